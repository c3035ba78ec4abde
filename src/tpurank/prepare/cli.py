"""`tpurank prepare`: the prepare stage's face, its options, declaration and `run` (the work:
tpurank.prepare.stage, loaded when the stage runs: `all` imports this module for its `Options`)."""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tpurank.core.declared import prepare_io
from tpurank.core.names import StepCommand
from tpurank.core.options import add_collections, add_jobs, add_splits
from tpurank.core.staleness import StageIO, option


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` builds them directly; the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.PREPARE

    out: Path | None = None
    collections: list[str] | None = None
    splits: list[str] | None = None
    jobs: int | None = option(None, result=False)
    no_progress: bool = option(False, result=False)
    eval_indices: Path | None = None
    keep_rule: bool = False
    force: bool = option(False, result=False)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, help="cache folder (default: <out-dir>/features/prepared)")
    add_collections(parser, all_by_default=False)
    add_splits(parser, all_by_default=False)
    add_jobs(parser, None, "worker processes (default: prepare.jobs; 0 = one per core)")
    parser.add_argument("--no-progress", action="store_true", help="hide progress bars")
    parser.add_argument(
        "--eval-indices",
        type=Path,
        metavar="DIR",
        help="official validation subsets (eval_indices/*.json; default: <data-dir>/eval_indices if present)",
    )
    parser.add_argument(
        "--keep-rule",
        action="store_true",
        help="use the saved node-feature rule as it is, never refit it (infer: the models' own rule)",
    )


def declare(args: argparse.Namespace) -> StageIO:
    """Its declaration (tpurank.core.declared)."""
    return prepare_io(args.paths, args.out, args.eval_indices)


def run(args: argparse.Namespace) -> int:
    from tpurank.prepare.stage import prepare_dataset  # its libraries load when the stage runs

    jobs = args.jobs if args.jobs is not None else args.cfg.prepare.jobs
    result = prepare_dataset(
        args.paths,
        args.cfg,
        collections=args.collections,
        splits=args.splits,
        jobs=jobs,
        progress=not args.no_progress,
        out=args.out,
        eval_indices=args.eval_indices,
        keep_rule=args.keep_rule,
    )
    out = args.out or args.paths.prepared
    for line in result.skipped:
        print(f"tpurank prepare: warning: {line}", file=sys.stderr)
    for line in result.failed:
        print(f"tpurank prepare: error: {line}", file=sys.stderr)
    idx = result.index
    print(
        f"prepare: {result.built} built, {result.reused} reused, {len(result.failed)} failed; the index of {out} "
        f"holds {len(idx)} graphs: configs {int(idx['configs'].sum())} -> {int(idx['configs_unique'].sum())} "
        f"unique, nodes {int(idx['nodes'].sum())} -> {int(idx['nodes_kept'].sum())} kept"
    )
    return 1 if result.failed else 0
