"""`tpurank validate`: `reports/validation.md`, every model's validation scores side by side.

The stage's face: its options, declaration and `run`. The report itself is
tpurank.validate.stage, loaded when the stage runs (`all` imports this module for its `Options`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tpurank.core.declared import validate_io
from tpurank.core.names import StepCommand
from tpurank.core.options import add_scored_configs
from tpurank.core.staleness import StageIO, option


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.VALIDATE

    official_subsets: str | None = None
    all_configs: bool = False
    force: bool = option(False, result=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_scored_configs(p)


def declare(args: argparse.Namespace) -> StageIO:
    """Its declaration (tpurank.core.declared)."""
    return validate_io(args.paths, Path(args.official_subsets) if args.official_subsets else None)


def run(args: argparse.Namespace) -> int:
    from tpurank.validate.stage import write_report  # its libraries load when the stage runs

    return write_report(args.paths, args.cfg, args.official_subsets, args.all_configs)
