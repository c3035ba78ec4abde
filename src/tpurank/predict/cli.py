"""`tpurank predict --model M --split valid|test`: predictions and the submission CSV of a model.

Per collection the model returns graph ID -> cost per config index; they are kept in
`predictions/<M>/<split>.npz` (saved after each collection, so an interrupted run resumes where
it stopped; a collection is recomputed when its config, model files, prepared cache or data
change, or with --force). Then `submissions/<split>_<M>.csv` is written, fastest first, after
the full submission check, with a JSON sidecar holding the validation scores when the split has
runtimes. A test CSV is only written when every collection is predicted.

One rule keeps finished output safe: a collection's predictions are replaced only when its new
run succeeds for every expected graph. A collection that fails (a damaged model file, a test
file missing from the prepared cache) gets one line, keeps its previous predictions, and the
CSV is not rewritten; the exit code is 1.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import ClassVar

from tpurank.core.collections import COLLECTIONS
from tpurank.core.declared import predict_io
from tpurank.core.names import StepCommand
from tpurank.core.options import add_collections
from tpurank.core.staleness import StageIO, option
from tpurank.models.registry import MODEL_NAMES


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.PREDICT

    model: str
    split: str
    collections: list[str] = option(factory=lambda: list(COLLECTIONS))
    partial: bool = False
    force: bool = option(False, result=False)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, choices=MODEL_NAMES, help="which model predicts")
    p.add_argument("--split", required=True, choices=["valid", "test"], help="split to rank")
    add_collections(p)
    p.add_argument(
        "--partial",
        action="store_true",
        help="test: write rows only for the sample IDs whose test file exists (not accepted by Kaggle)",
    )
    p.add_argument("--force", action="store_true", help="recompute predictions that are up to date")


def declare(args: argparse.Namespace) -> StageIO:
    """Its declaration (tpurank.core.declared)."""
    return predict_io(args.paths, args.model, args.split)


def run(args: argparse.Namespace) -> int:
    from tpurank.predict.stage import predict_split  # its libraries load when the stage runs

    return predict_split(
        args.paths,
        args.cfg,
        args.model,
        split=args.split,
        collections=args.collections,
        partial=args.partial,
        force=args.force,
    )
