"""The project's error types: each prints as one line that a user can act on."""

from __future__ import annotations

from pathlib import Path


class TpurankError(Exception):
    """An expected failure (bad input, missing prerequisite): the CLI prints it as one line."""


class DataError(TpurankError):
    """A data file violates the format: names the file and the problem."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{self.path}: {problem}")

    def __reduce__(self) -> tuple:  # picklable across a process pool
        return (DataError, (self.path, self.problem))


class DiskFullError(TpurankError):
    """No space left while writing an output: the whole stage stops (every later file would fail too).

    Raised by `tpurank.core.atomic.atomic_path`, which has removed the half-written temporary file, so
    nothing a rerun would trust is left behind.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        super().__init__(
            f"{self.path}: no space left on the device while writing it; finished outputs are kept, "
            "free some space (or choose another --work-dir) and rerun"
        )

    def __reduce__(self) -> tuple:  # picklable across a process pool
        return (DiskFullError, (self.path,))


def command(words: str) -> str:
    """A tpurank command as every message names it: `tpurank <command> ...` in backquotes, as a
    user types it in the project's environment (`./run.sh <command> ...` runs the same), so a message
    never names the Python module or one spelling here and another there."""
    return f"`tpurank {words}`"
