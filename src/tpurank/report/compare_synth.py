"""`tpurank compare-synth --real SAMPLE_ROOT`: the synthetic data beside real files.

Prints the statistics of a synthetic tree and a real sample side by side (tpurank.synth.compare),
then their runtimes and rankings with a distance per statistic (tpurank.synth.realism), then how
hard each is to rank: the real train/valid pairs and synthetic counterparts of the same sizes,
ranked by the random, heuristic and LightGBM rankers (models/difficulty.py, which trains the
LightGBM ranker: models live with models), and a last summary line. It stands above the models;
the generator itself stands below every model.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.models.difficulty import difficulty_rows, difficulty_table
from tpurank.synth.compare import compare
from tpurank.synth.scales import SCALES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--real", required=True, metavar="SAMPLE_ROOT", help="a data root of real TpuGraphs files")
    p.add_argument(
        "--synthetic",
        metavar="DIR",
        help="a synthetic data root to compare (default: a fresh --scale tree in a temporary folder)",
    )
    p.add_argument(
        "--scale", choices=list(SCALES), default="tiny", help="scale of the fresh tree (default: tiny)"
    )
    p.add_argument("--seed", type=int, help="random seed (default: the config's seed, 0)")
    p.add_argument(
        "--difficulty-seeds",
        type=int,
        default=5,
        metavar="N",
        help="also rank the real train/valid pairs and N synthetic counterparts of the same sizes with the "
        "random, heuristic and lgbm rankers (0: skip; default: 5)",
    )


def run(args: argparse.Namespace) -> int:
    if args.difficulty_seeds < 0:
        raise TpurankError(f"--difficulty-seeds must be 0 or more, got {args.difficulty_seeds}")
    seed = args.cfg.seed if args.seed is None else args.seed
    real = Path(args.real)
    tables = [compare(real, Path(args.synthetic) if args.synthetic else None, args.scale, seed)]
    if args.difficulty_seeds:
        tables.append(difficulty_table(difficulty_rows(real, args.difficulty_seeds)))
    print("\n\n".join(tables))
    # each table ends with its own summary line; together they say how far the generator sits
    print("\nsummary: " + "; ".join(t.splitlines()[-1] for t in tables))
    return 0
