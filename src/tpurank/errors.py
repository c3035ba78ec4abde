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
