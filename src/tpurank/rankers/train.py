"""`tpurank train --model M [--collections ...]`: train one model per collection.

Each model module writes its own files (and provenance) under `models/<M>/<collection>/`, by
way of a staging folder swapped in only when its training completes (rankers/staging.py): an
interrupted retrain leaves the finished model as it was. The baselines have nothing to learn.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from tpurank.core.options import add_collections
from tpurank.rankers.registry import MODEL_NAMES, get_model
from tpurank.rankers.staging import staged

UNTRAINED = ("random", "heuristic")  # nothing to learn, no folder


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, choices=MODEL_NAMES, help="which model to train")
    add_collections(p)


def output_folders(args: argparse.Namespace) -> list[Path]:
    """The model's folder, locked while it trains (tpurank.core.lock)."""
    return [args.paths.models / args.model]


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
