"""`tpurank features`: build the tabular feature tables from the prepared cache.

The stage's face: its options, its declaration and `run`. The work is tpurank.features.stage,
loaded when the stage runs (`all` imports this module for its `Options` and stays light).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar

from tpurank.core.collections import COLLECTIONS, SPLITS
from tpurank.core.declared import features_io
from tpurank.core.names import StepCommand
from tpurank.core.options import add_collections, add_splits
from tpurank.core.staleness import StageIO, option


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.FEATURES

    collections: list[str] = option(factory=lambda: list(COLLECTIONS))
    splits: list[str] = option(factory=lambda: list(SPLITS))
    force: bool = option(False, result=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_collections(parser)
    add_splits(parser)
    parser.add_argument("--force", action="store_true", help="rebuild tables even when up to date")


def declare(args: argparse.Namespace) -> StageIO:
    """Its declaration (tpurank.core.declared)."""
    return features_io(args.paths)


def run(args: argparse.Namespace) -> int:
    from tpurank.features.stage import build_features  # its libraries load when the stage runs

    results = build_features(args.paths, args.cfg, args.collections, splits=args.splits, force=args.force)
    for (collection, split), s in results.items():
        if s.get("reused"):
            print(f"{collection} {split}: up to date ({s['graphs']} graphs)")
        else:
            print(
                f"{collection} {split}: {s['graphs']} graphs, {s['rows']} rows, {s['rows_per_s']:.0f} rows/s"
            )
    return 0
