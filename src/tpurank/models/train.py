"""`tpurank train --model M [--collections ...]`: train one model per collection.

Each model module writes its own files (and provenance) under `models/<M>/<collection>/`, by
way of a staging folder swapped in only when its training completes (models/staging.py): an
interrupted retrain leaves the finished model as it was. The untrained rankers (random, heuristic) have nothing to learn.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from typing import ClassVar

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.declared import starting_points, train_io
from tpurank.core.names import UNTRAINED, Stage
from tpurank.core.options import add_collections
from tpurank.core.paths import Paths
from tpurank.core.staleness import StageIO, option
from tpurank.models.collection_processes import train_in_processes, training_processes
from tpurank.models.registry import MODEL_NAMES, check_name, get_model
from tpurank.models.staging import staged


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    STAGE: ClassVar[Stage] = Stage.TRAIN

    model: str
    collections: list[str] = option(factory=lambda: list(COLLECTIONS))
    force: bool = option(False, result=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, choices=MODEL_NAMES, help="which model to train")
    add_collections(p)


def declare(args: argparse.Namespace) -> StageIO:
    """Its declaration (tpurank.core.declared)."""
    return train_io(args.paths, args.model, starting_points(args.cfg, args.model, args.collections))


def train_one(model: str, paths: Paths, cfg: Config, collection: str) -> float:
    """Train `model` on one collection with its config, by way of its staging folder (an interrupted
    retrain leaves the finished model); its seconds. Module-level: the collections' own processes
    run it (tpurank.models.collection_processes)."""
    t = time.perf_counter()
    trainer = get_model(model)  # a model this install lacks fails before its staging folder is made
    with staged(paths, model, collection) as staging:
        trainer.train(staging, cfg, collection)
    seconds = time.perf_counter() - t
    print(f"train {model} {collection}: {seconds:.1f} s", file=sys.stderr)
    return seconds


def run(args: argparse.Namespace) -> int:
    check_name(args.model)  # an unknown model fails before any work (no import: see below)
    if args.model in UNTRAINED:
        return 0
    configs = {c: args.cfg.for_collection(c) for c in args.collections}
    # in processes of their own, this one imports no model: on big data it stays light while it waits
    if (processes := training_processes(args.model, args.paths, args.collections)) is not None:
        train_in_processes(train_one, args.model, args.paths, configs, processes)
        return 0
    for c, cfg in configs.items():
        train_one(args.model, args.paths, cfg, c)
    return 0
