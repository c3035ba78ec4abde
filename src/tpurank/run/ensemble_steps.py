"""`tpurank ensemble`: fit the ensemble on valid, then predict valid and test with it.

Three steps, each the stage it names and run as `all` runs it (locked, skipped when up to date,
recorded): `train --model ensemble`, the one way its weights are fitted, then `predict --model
ensemble` on valid and on test. It keeps no record of its own: its steps keep theirs.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar

from tpurank.core.collections import COLLECTIONS
from tpurank.core.names import StepCommand
from tpurank.core.options import add_collections
from tpurank.core.staleness import option
from tpurank.predict import cli as predict
from tpurank.run.stages import run_step
from tpurank.train import cli as train


@dataclass(frozen=True)
class Options:
    """The command's options (the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.ENSEMBLE

    collections: list[str] = option(factory=lambda: list(COLLECTIONS))
    force: bool = option(False, result=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_collections(p, help="collections to ensemble (default: all five)")


def steps(collections: list[str], force: bool = False) -> list[train.Options | predict.Options]:
    """Its steps: fit the weights, then predict valid and test."""
    fit = train.Options(model="ensemble", collections=collections, force=force)
    splits = ("valid", "test")
    return [
        fit,
        *(predict.Options(model="ensemble", split=s, collections=collections, force=force) for s in splits),
    ]


def run(args: argparse.Namespace) -> int:
    for options in steps(args.collections, args.force):
        if rc := run_step(options, args.paths, args.cfg):
            return rc
    return 0
