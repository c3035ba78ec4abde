"""`tpurank synth`: write a synthetic dataset in the exact real format."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from tpurank.core.declared import synth_io
from tpurank.core.errors import TpurankError
from tpurank.core.options import add_collections, add_jobs, add_splits
from tpurank.core.staleness import StageIO
from tpurank.synth.scales import SCALES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", help="data root to write (default: the resolved --data-dir)")
    p.add_argument(
        "--scale", choices=list(SCALES), default="tiny", help="tiny (tests), demo, full (default: tiny)"
    )
    p.add_argument("--seed", type=int, help="random seed (default: the config's seed, 0)")
    add_collections(p, all_by_default=False)
    add_splits(p, all_by_default=False)
    add_jobs(p, 1, "worker processes (default: 1; 0 = one per core)")


def declare(args: argparse.Namespace) -> StageIO:
    """It reads nothing and writes the data root (locked while it runs; no step record: the
    generator keeps finished files itself)."""
    return synth_io(Path(args.out) if args.out else args.paths.data)


def run(args: argparse.Namespace) -> int:
    from tpurank.synth.stage import generate  # its libraries load when the stage runs

    seed = args.cfg.seed if args.seed is None else args.seed
    out = Path(args.out) if args.out else args.paths.data
    try:
        generate(
            out,
            args.scale,
            seed,
            collections=args.collections,
            splits=args.splits,
            progress=True,
            cfg=args.cfg,
            jobs=args.jobs or (os.cpu_count() or 1),
        )
    except OSError as e:
        raise TpurankError(f"{out}: cannot write the dataset ({e.strerror or e})") from None
    print(f"wrote a {args.scale} synthetic dataset (seed {seed}) to {out}")
    return 0
