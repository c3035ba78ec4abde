"""Profiles: the training scale that fits the machine, picked by the device unless the user names one.

A profile is a config file of `configs/` (`profile-<name>.toml`) that goes right above the defaults:
the demo preset (on small synthetic data), the user's `--config` and `--set` all stay above it.

- `cpu`: no usable GPU. Narrow GNNs trained for minutes, not hours; LightGBM on fewer rows.
- `kaggle-t4`: a GPU with at most 16 GB (Kaggle's T4 or P100): sized to train within a Kaggle
  session, inference included.
- `gpu`: a larger GPU: the 1st place's scale (the defaults of core/config.py).

`auto` (the default, or `$TPURANK_PROFILE`) picks one of them and says why in one line.
"""

from __future__ import annotations

import glob
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.core.paths import preset_file

PROFILES = ("cpu", "kaggle-t4", "gpu")
CHOICES = ("auto", *PROFILES)
ENV = "TPURANK_PROFILE"
# Kaggle's GPUs: a T4 reports 14.7 GiB, a P100 or V100 of "16 GB" 15.9 GiB; anything bigger trains the full scale
SMALL_GPU_GIB = 16.5
# the whole run's time when `all --budget` is not given: the cpu profile ends within an evening, the
# Kaggle one leaves ~2 h of a 12 h session for inference and writing the submission, and the gpu one
# never binds at the 1st place's scale on an H100 (a projection of 2.1 h: docs/scale.md)
DEFAULT_BUDGET = {"cpu": "2h", "kaggle-t4": "10h", "gpu": "8h"}


@dataclass(frozen=True)
class Profile:
    """A resolved profile: its name and why it was chosen (printed at the start of `all` and `train`)."""

    name: str
    reason: str

    @property
    def file(self) -> Path:
        """Its config file (`configs/profile-<name>.toml`, or the installed wheel's copy)."""
        return preset_file(f"profile-{self.name}.toml")

    @property
    def line(self) -> str:
        return f"profile {self.name}: {self.reason}"


def cuda_arch_supported(capability: tuple[int, int], arch_list: list[str]) -> bool:
    """Whether a torch build compiled for `arch_list` (torch.cuda.get_arch_list()) runs on `capability`.

    A cubin `sm_XY` runs on devices of the same major version X with minor >= Y; PTX `compute_XY`
    is compiled at load time for any device of capability >= XY.
    """
    major, minor = capability
    for arch in arch_list:
        m = re.fullmatch(r"(sm|compute)_(\d+)(\d)[a-z]?", arch)
        if not m:
            continue
        a_major, a_minor = int(m.group(2)), int(m.group(3))
        if m.group(1) == "sm" and a_major == major and a_minor <= minor:
            return True
        if m.group(1) == "compute" and (a_major, a_minor) <= (major, minor):
            return True
    return False


def nvidia_device_files() -> bool:
    """Whether the machine shows an NVIDIA device: without one, torch (slow to import) is not asked."""
    return bool(glob.glob("/dev/nvidia[0-9]*")) or os.path.exists("/dev/nvidiactl")


def gpu() -> tuple[str, float] | None:
    """(name, memory in GiB) of CUDA device 0 (the one training uses) when the installed torch can run
    on it, else None (a driver or device error counts as no GPU: the CPU profile then)."""
    if not nvidia_device_files():
        return None
    import torch  # only here: most stages never need it

    try:
        if not torch.cuda.is_available():
            return None
        capability = tuple(torch.cuda.get_device_capability(0))
        if not cuda_arch_supported(capability, list(torch.cuda.get_arch_list())):  # type: ignore[arg-type]
            return None
        props = torch.cuda.get_device_properties(0)
    except RuntimeError:
        return None
    return props.name, props.total_memory / 2**30


def detect() -> Profile:
    """The profile that fits this machine's first usable GPU, or the CPU."""
    found = gpu()
    if found is None:
        return Profile("cpu", "no usable CUDA GPU (--profile to choose another)")
    name, gb = found
    if gb <= SMALL_GPU_GIB:
        return Profile("kaggle-t4", f"{name} with {gb:.1f} GiB, sized to train within a Kaggle session")
    return Profile("gpu", f"{name} with {gb:.1f} GiB: the 1st place's scale")


def resolve_profile(choice: str | None = None) -> Profile:
    """`--profile`, else `$TPURANK_PROFILE`, else `auto` (the device decides).

    Raises:
        TpurankError: an unknown name in `$TPURANK_PROFILE` (argparse checks `--profile`).
    """
    how = "--profile"
    if not choice:
        choice, how = os.environ.get(ENV) or "auto", f"${ENV}"
    if choice not in CHOICES:
        raise TpurankError(f"{how} must be one of {', '.join(CHOICES)}, got {choice!r}")
    if choice == "auto":
        return detect()
    return Profile(choice, f"chosen with {how}")


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?:in)?)?(?:(\d+(?:\.\d+)?)s)?")


def parse_duration(text: str) -> float:
    """Seconds in `2h`, `90m`, `1h30m`, `45s` or a bare number of minutes.

    Raises:
        TpurankError: anything else, or a duration of zero.
    """
    t = text.strip().lower()
    try:
        seconds = float(t) * 60
    except ValueError:
        m = _DURATION.fullmatch(t)
        if not t or m is None:
            raise TpurankError(f"--budget: {text!r} is not a duration (e.g. 2h, 90m, 1h30m)") from None
        h, mi, s = (float(g) if g else 0.0 for g in m.groups())
        seconds = h * 3600 + mi * 60 + s
    if not (math.isfinite(seconds) and seconds > 0):
        raise TpurankError(f"--budget must be a finite time above zero, got {text!r}")
    return seconds


def format_duration(seconds: float) -> str:
    """`1h05m`, `14m30s`, `45s`: how the plan and the closing line print times."""
    s = round(max(0.0, seconds))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m:02d}m"
    return f"{m}m{s:02d}s" if m else f"{s}s"
