"""`tpurank train --model M [--collections ...]`: the train stage's face (its options, declaration
and run); the work is `train/stage.py`. The untrained rankers (random, heuristic) have nothing to
learn.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar

from tpurank.core.collections import COLLECTIONS
from tpurank.core.declared import starting_points, train_io
from tpurank.core.names import UNTRAINED, StepCommand
from tpurank.core.options import add_collections
from tpurank.core.staleness import StageIO, option
from tpurank.models.registry import MODEL_NAMES, check_name


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.TRAIN

    model: str
    collections: list[str] = option(factory=lambda: list(COLLECTIONS))
    force: bool = option(False, result=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, choices=MODEL_NAMES, help="which model to train")
    add_collections(p)


def declare(args: argparse.Namespace) -> StageIO:
    """Its declaration (tpurank.core.declared)."""
    return train_io(args.paths, args.model, starting_points(args.cfg, args.model, args.collections))


def run(args: argparse.Namespace) -> int:
    check_name(args.model)  # an unknown model fails before any work, before its module is imported
    if args.model in UNTRAINED:
        return 0
    from tpurank.train.stage import train_collections  # its libraries load when the stage runs

    train_collections(args.model, args.paths, {c: args.cfg.for_collection(c) for c in args.collections})
    return 0
