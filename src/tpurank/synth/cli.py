"""`tpurank synth`: write a synthetic dataset, or compare synthetic statistics with a real sample."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tpurank.cli import jobs_arg
from tpurank.dataset import COLLECTIONS, SPLITS
from tpurank.errors import TpurankError
from tpurank.synth.scales import SCALES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="data root to write (default: the resolved --data-dir)")
    p.add_argument(
        "--scale", choices=list(SCALES), default="tiny", help="tiny (tests), demo, full (default: tiny)"
    )
    p.add_argument("--seed", type=int, help="random seed (default: the config's seed, 0)")
    p.add_argument("--collections", nargs="+", choices=COLLECTIONS, help="only these collections")
    p.add_argument("--splits", nargs="+", choices=SPLITS, help="only these splits")
    p.add_argument("--jobs", type=jobs_arg, default=1, help="worker processes (default: 1; 0 = one per core)")
    p.add_argument(
        "--compare-real",
        metavar="SAMPLE_ROOT",
        help="print synthetic vs real statistics side by side (synthetic: --out if it holds data, "
        "else a fresh --scale tree in a temporary folder)",
    )

    p.add_argument(
        "--difficulty-seeds",
        type=int,
        default=5,
        metavar="N",
        help="--compare-real: also rank the real train/valid pairs and N synthetic counterparts of "
        "the same sizes with the random, heuristic and lgbm rankers (0: skip; default: 5)",
    )


def output_folders(args: argparse.Namespace) -> list[Path]:
    """The data root synth writes, locked while it runs (tpurank.lock)."""
    return [] if args.compare_real else [Path(args.out) if args.out else args.paths.data]


def run(args: argparse.Namespace) -> int:
    seed = args.cfg.seed if args.seed is None else args.seed
    if args.compare_real:
        from tpurank.synth.compare import compare

        if args.difficulty_seeds < 0:
            raise TpurankError(f"--difficulty-seeds must be 0 or more, got {args.difficulty_seeds}")

        print(compare(Path(args.compare_real), Path(args.out) if args.out else None, args.scale, seed))
        if args.difficulty_seeds:
            from tpurank.synth.difficulty import difficulty_rows, difficulty_table

            print()
            print(difficulty_table(difficulty_rows(Path(args.compare_real), args.difficulty_seeds)))
        return 0
    from tpurank.synth.tree import generate

    out = Path(args.out) if args.out else args.paths.data
    try:
        generate(
            out,
            args.scale,
            seed,
            args.collections,
            args.splits,
            progress=True,
            cfg=args.cfg,
            jobs=args.jobs or (os.cpu_count() or 1),
        )
    except OSError as e:
        raise TpurankError(f"{out}: cannot write the dataset ({e.strerror or e})") from None
    print(f"wrote a {args.scale} synthetic dataset (seed {seed}) to {out}")
    return 0
