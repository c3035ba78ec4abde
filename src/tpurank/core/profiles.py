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

import dataclasses
import glob
import math
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpurank.core import env
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import preset_file

CHOICES = env.PROFILE.choices  # auto, then the profiles; $TPURANK_PROFILE is checked in core/env.py
PROFILES = CHOICES[1:]
ENV = env.PROFILE.name
# Kaggle's GPUs: a T4 reports 14.7 GiB, a P100 or V100 of "16 GB" 15.9 GiB; anything bigger trains the full scale
SMALL_GPU_GIB = 16.5
# the whole run's time when `all --budget` is not given: the cpu profile ends within an evening, the
# Kaggle one leaves ~2 h of a 12 h session for inference and writing the submission, and the gpu one
# never binds at the 1st place's scale on an H100 (a projection of 2.1 h: docs/scale.md)
DEFAULT_BUDGET = {"cpu": "2h", "kaggle-t4": "10h", "gpu": "8h"}


# A GPU profile's model trained on a CPU: one step of the gpu profile's GNN (width 256, 4 graphs x 64
# configs) took 11.8 s on 2 cores on the real layout pair (bench/LOG.md); a projection scales it by
# width, configs a step and cores. Larger graphs take longer: it is an estimate, never a promise.
CPU_STEP_SECONDS, CPU_STEP_WIDTH, CPU_STEP_CONFIGS, CPU_STEP_CORES = 11.8, 256, 256, 2
GPU_PROFILES = ("kaggle-t4", "gpu")


@dataclass(frozen=True)
class Profile:
    """A resolved profile: its name, why it was chosen, and a warning when it does not fit the machine
    (all printed in one line at the start of `all` and `train`)."""

    name: str
    reason: str
    warning: str = ""

    @property
    def file(self) -> Path:
        """Its config file (`configs/profile-<name>.toml`, or the installed wheel's copy)."""
        return preset_file(f"profile-{self.name}.toml")

    @property
    def line(self) -> str:
        return f"profile {self.name}: {self.reason}" + (f"; {self.warning}" if self.warning else "")


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
        choice, how = env.PROFILE.read() or "auto", f"${ENV}"
    if choice not in CHOICES:
        raise TpurankError(f"{how} must be one of {', '.join(CHOICES)}, got {choice!r}")
    if choice == "auto":
        return detect()
    return Profile(choice, f"chosen with {how}")


def cpu_step_seconds(section: Any) -> float:
    """The estimated seconds of one training step of a model section (`cfg.gnn`, `cfg.baseline`) on
    this machine's CPU: the measured CPU_STEP_SECONDS scaled by width, configs a step and cores."""
    configs = section.configs_per_graph * section.graphs_per_batch
    cores = os.cpu_count() or 1
    scale = (section.hidden / CPU_STEP_WIDTH) * (configs / CPU_STEP_CONFIGS) * (CPU_STEP_CORES / cores)
    return CPU_STEP_SECONDS * scale


def cpu_projection(cfg: Config, collections: list[str], section: str = "gnn") -> tuple[float, int, float]:
    """(seconds, steps, mean seconds a step) of training `section` on `collections` on this CPU:
    each collection's steps times its seeds, a run cut at its time budget (`time_budget_min`)."""
    seconds, steps, uncut = 0.0, 0, 0.0
    for c in collections:
        s = getattr(cfg.for_collection(c), section)
        seeds, per = getattr(s, "seeds", 1), cpu_step_seconds(s)
        run = s.max_steps * per
        seconds += seeds * (min(run, s.time_budget_min * 60) if s.time_budget_min > 0 else run)
        steps += seeds * s.max_steps
        uncut += seeds * run
    return seconds, steps, uncut / max(steps, 1)


def _hours(seconds: float) -> str:
    return f"{seconds / 3600:,.0f} h" if seconds >= 3600 else format_duration(seconds)


def with_cpu_warning(
    profile: Profile,
    cfg: Config,
    collections: list[str] | None = None,
    section: str = "gnn",
    budget_s: float | None = None,
) -> Profile:
    """`profile`, with a warning when it is sized for a GPU (gpu, kaggle-t4) and no usable CUDA GPU
    exists: training at its scale on this CPU takes days, and nothing else would say so.

    Args:
        profile: the resolved profile.
        cfg: the run's config (its steps, seeds, widths and time budgets).
        collections: those the run trains (None: all five).
        section: the model trained, "gnn" or "baseline".
        budget_s: the whole run's time budget (`all`), else the config's time budgets cut it.
    """
    if profile.name not in GPU_PROFILES or gpu() is not None:
        return profile
    capped, steps, per = cpu_projection(cfg, collections or list(COLLECTIONS), section)
    full = steps * per
    limit = min(budget_s, capped) if budget_s else capped
    warning = (
        f"warning: no usable CUDA GPU: the {section.upper()}'s {steps:,} steps at this profile's scale take a "
        f"projected {_hours(full)} on this CPU (~{per:.1f} s a step: a PROJECTION from a measured CPU step)"
    )
    if limit < full * 0.999:
        warning += f"; its time budget ({_hours(limit)}) reaches ~{limit / full:.1%} of them"
    return dataclasses.replace(profile, warning=warning + "; --profile cpu is sized for a CPU")


_DURATION = re.compile(r"(?:(\d+(?:\.\d+)?)h)?(?:(\d+(?:\.\d+)?)m(?:in)?)?(?:(\d+(?:\.\d+)?)s)?")


def default_budget_s(cfg: Config) -> float:
    """The whole run's budget in seconds when `all` is given no `--budget`: the config's
    `budget.default_min` where set (the demo preset's), else the profile's default."""
    if cfg.budget.default_min > 0:
        return cfg.budget.default_min * 60
    return parse_duration(DEFAULT_BUDGET[cfg.profile])


def parse_duration(text: str) -> float:
    """Seconds in `2h`, `90m`, `1h30m` or `45s`. A bare number is refused: `2` could be meant as
    hours or minutes, and a budget read the wrong way is a run of the wrong length.

    Raises:
        TpurankError: anything else (a bare number included), or a duration of zero.
    """
    t = text.strip().lower()
    if re.fullmatch(r"\d+(\.\d+)?", t):
        raise TpurankError(f"--budget: {text!r} has no unit: write {t}m for minutes or {t}h for hours")
    m = _DURATION.fullmatch(t)
    if not t or m is None:
        raise TpurankError(f"--budget: {text!r} is not a duration (e.g. 2h, 90m, 1h30m, 45s)") from None
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
