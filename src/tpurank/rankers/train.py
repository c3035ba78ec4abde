"""`tpurank train --model M [--collections ...]`: train one model per collection.

Each model module writes its own files (and provenance) under `models/<M>/<collection>/`, by
way of a staging folder swapped in only when its training completes (rankers/staging.py): an
interrupted retrain leaves the finished model as it was. The untrained rankers (random, heuristic) have nothing to learn.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import ClassVar

from tpurank.core.collections import COLLECTIONS
from tpurank.core.options import add_collections
from tpurank.core.staleness import Files, StageIO, option
from tpurank.rankers.registry import EVERY_SECTION, MODEL_NAMES, UNTRAINED, get_model, model_sections
from tpurank.rankers.staging import staged


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    STAGE: ClassVar[str] = "train"

    model: str
    collections: list[str] = option(factory=lambda: list(COLLECTIONS))
    force: bool = option(False, result=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, choices=MODEL_NAMES, help="which model to train")
    add_collections(p)


def declare(args: argparse.Namespace) -> StageIO:
    """A model reads the prepared cache (LightGBM also the feature tables) and writes its own
    folder. The ensemble reads the members' valid predictions and the data they are scored against."""
    paths = args.paths
    writes = [Files(paths.models / args.model)]
    if args.model == "ensemble":
        from tpurank.rankers.ensemble import ensemble_reads

        return StageIO(ensemble_reads(paths), writes, EVERY_SECTION)
    tables = [Files(paths.tabular)] if args.model == "lgbm" else []  # LightGBM's feature tables
    return StageIO([Files(paths.prepared), *tables], writes, model_sections(args.model))


def run(args: argparse.Namespace) -> int:
    model = get_model(args.model)  # the collections are checked by the parser (core/options.py)
    for c in args.collections:
        t = time.perf_counter()
        if args.model in UNTRAINED:
            continue
        with staged(args.paths, args.model, c) as paths:
            model.train(paths, args.cfg.for_collection(c), c)
        print(f"train {args.model} {c}: {time.perf_counter() - t:.1f} s", file=sys.stderr)
    return 0
