"""The ensemble's per-graph normalization, rank against zscore, on a finished run's valid predictions.

Reads the valid predictions of `lgbm` and `gnn` of a run (`predict --split valid` done, e.g. by
`./run.sh all` or bench_scale's `<work>/out`), and prints per collection both members' scores and,
for each normalization, the ensemble fitted on valid (in-sample), cross-fitted (half/half, as
`train --model ensemble` reports it) and with equal weights. Nothing is trained; seconds.

    .venv/bin/python bench/bench_ensemble_normalize.py --data-dir DATA --out-dir OUT [--work-dir WORK]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tpurank.core.collections import COLLECTIONS  # noqa: E402
from tpurank.core.paths import Paths  # noqa: E402
from tpurank.rankers import ensemble as ens  # noqa: E402

MEMBERS = ("lgbm", "gnn")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True, help="holds predictions/<model>/valid.*")
    p.add_argument("--work-dir", type=Path, help="holds features/prepared (default: --out-dir)")
    a = p.parse_args()
    paths = Paths(a.data_dir, a.out_dir, a.work_dir or a.out_dir)
    preds = [ens.load_member_predictions(paths, m, "valid") for m in MEMBERS]
    print(
        "| collection | lgbm | gnn | rank: fitted / cross-fitted / equal | zscore: fitted / cross-fitted / equal |"
    )
    print("|---|---|---|---|---|")
    for coll in COLLECTIONS:
        truth = ens.valid_truth(paths, coll)
        if not truth:
            continue
        singles = [ens.collection_score(coll, {g: pr[g] for g in truth}, truth) for pr in preds]
        cells = []
        for how in ("rank", "zscore"):
            _, fitted = ens.fit_weights(coll, preds, truth, how)
            crossed = ens.cross_fit(coll, preds, truth, how, 0)["score"]
            half = np.full(len(preds), 1 / len(preds))
            equal = ens.collection_score(coll, {g: ens.combine([pr[g] for pr in preds], half, how) for g in truth}, truth)  # fmt: skip
            cells.append(f"{fitted:.4f} / {crossed:.4f} / {equal:.4f}")
        print(f"| {coll} | {singles[0]:.4f} | {singles[1]:.4f} | {cells[0]} | {cells[1]} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
