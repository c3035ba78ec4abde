"""Every `TPURANK_*` environment variable tpurank reads, checked like a config key.

A variable is read only through its entry here, so a bad value is one line naming it, what it
must be and what it holds ("$TPURANK_PROGRESS_SECONDS must be a number >= 0, got 'abc'"), never
a traceback from wherever it happens to be used first. The CLI reads them all before a command
starts (`check_environment`), as it checks the config. An empty value counts as unset.

No module reads a variable as it is imported: a module-level read would run before the CLI's check
(a traceback for a bad value) and would freeze the value for the process. Read it when it is used.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.core.links import resolve


def _raw(name: str) -> str:
    return os.environ.get(name, "").strip()


@dataclass(frozen=True)
class Number:
    """A numeric variable: `minimum` is inclusive, `above` exclusive; `whole` allows integers only."""

    name: str
    default: float
    minimum: float | None = None
    above: float | None = None
    whole: bool = False

    def rule(self) -> str:
        what = "a whole number" if self.whole else "a number"
        if self.above is not None:
            return f"{what} > {self.above:g}"
        return f"{what} >= {self.minimum:g}" if self.minimum is not None else what

    def read(self) -> float:
        """The value, else the default.

        Raises:
            TpurankError: not a finite number, or out of range.
        """
        raw = _raw(self.name)
        if not raw:
            return self.default
        try:
            value = int(raw) if self.whole else float(raw)
        except ValueError:
            value = math.nan
        if (
            not math.isfinite(value)
            or (self.minimum is not None and value < self.minimum)
            or (self.above is not None and value <= self.above)
        ):
            raise TpurankError(f"${self.name} must be {self.rule()}, got {raw!r}")
        return value


@dataclass(frozen=True)
class Folder:
    """A variable naming a folder (it need not exist yet)."""

    name: str

    def given(self) -> str:
        """The value as the user wrote it (for a message that quotes it); "" when unset."""
        return _raw(self.name)

    def read(self) -> Path | None:
        """The folder, resolved; None when unset.

        Raises:
            TpurankError: a symbolic link loop, or an existing file that is not a folder.
        """
        raw = _raw(self.name)
        if not raw:
            return None
        try:
            folder = resolve(Path(raw).expanduser())
        except TpurankError:
            raise TpurankError(f"${self.name} must be a folder, got {raw!r} (a symbolic link loop)") from None
        if folder.exists() and not folder.is_dir():
            raise TpurankError(f"${self.name} must be a folder, got {raw!r} (a file)")
        return folder


@dataclass(frozen=True)
class Choice:
    """A variable naming one of a few fixed words (`--profile`'s choices for $TPURANK_PROFILE)."""

    name: str
    choices: tuple[str, ...]

    def read(self) -> str | None:
        """The word; None when unset.

        Raises:
            TpurankError: a word not among `choices`.
        """
        raw = _raw(self.name)
        if raw and raw not in self.choices:
            raise TpurankError(f"${self.name} must be one of {', '.join(self.choices)}, got {raw!r}")
        return raw or None


PROGRESS_SECONDS = Number("TPURANK_PROGRESS_SECONDS", 10.0, minimum=0)  # core/progress.py
NET_TIMEOUT = Number("TPURANK_NET_TIMEOUT", 60.0, above=0)  # data/net.py
CHUNK_CACHE_MB = Number("TPURANK_CHUNK_CACHE_MB", 256, minimum=0, whole=True)  # prepare/store.py
HOME = Folder("TPURANK_HOME")  # core/paths.py: the outputs' root
DATA = Folder("TPURANK_DATA")  # core/paths.py: the data root
WORK = Folder("TPURANK_WORK")  # core/paths.py: the intermediates' root
TENSORBOARD = Folder("TPURANK_TENSORBOARD")  # gnn/training/run_log.py
PROFILE = Choice("TPURANK_PROFILE", ("auto", "cpu", "kaggle-t4", "gpu"))  # core/profiles.py

VARIABLES: tuple[Number | Folder | Choice, ...] = (
    PROGRESS_SECONDS,
    NET_TIMEOUT,
    CHUNK_CACHE_MB,
    HOME,
    DATA,
    WORK,
    TENSORBOARD,
    PROFILE,
)


def check_environment() -> None:
    """Read every variable once: a bad value stops the command before it starts.

    Raises:
        TpurankError: the first bad value, in one line.
    """
    for var in VARIABLES:
        var.read()
