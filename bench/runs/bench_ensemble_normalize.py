"""The ensemble's per-graph normalization, rank against zscore, on a finished run's valid predictions.

Reads the valid predictions of `lgbm` and `gnn` of a run (`predict --split valid` done, e.g. by
`./run.sh all` or bench_scale's `<work>/out`), and prints per collection both members' scores and,
for each normalization, the ensemble fitted on valid (in-sample), cross-fitted (half/half, as
`train --model ensemble` reports it) and with equal weights. Nothing is trained; seconds.

    .venv/bin/python bench/runs/bench_ensemble_normalize.py --data-dir DATA --out-dir OUT [--work-dir WORK]

Below each collection's row, its real-sample row from bench_real.py (`REAL`; "-" where the collection
has none): the members and the equal-weight ensemble with the normalization that bench ran, "fitted"
being its circular figure (weights fitted on the scored graphs) and "cross-fitted" tile's weights
fitted on the other kernel folds.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import real_rows as rr  # noqa: E402

from tpurank.core.collections import COLLECTIONS  # noqa: E402
from tpurank.core.paths import Paths  # noqa: E402
from tpurank.models import ensemble as ens  # noqa: E402

MEMBERS = ("lgbm", "gnn")
NORMALIZATIONS = ("rank", "zscore")
# collection -> the bench_real.py results file of its real rows and where its per-seed scores sit in it
REAL = {
    "layout:xla:default": (
        "real_layout_issue25.json",
        ("layout", "per_seed", "all"),
        ("layout", "circular_ensemble", "all"),
    ),
    "tile:xla": ("real_tile_issue25.json", ("tile", "per_seed"), ("tile", "circular_ensemble")),
}


def real_cells(coll: str, real: rr.RealRows) -> list[str]:
    """The real row's cells (lgbm, gnn, then fitted / cross-fitted / equal per normalization), "-"
    where bench_real measured nothing of the kind."""
    if coll not in REAL or not (path := real.find(REAL[coll][0])):
        return ["-"] * (len(MEMBERS) + len(NORMALIZATIONS))
    name, per_seed, circular = REAL[coll]
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: not a bench_real results file ({type(e).__name__}: {e})")

    def stat(key: tuple[str, ...]) -> str:
        held = data
        for k in key:  # e.g. no fold-fitted ensemble on layout: nothing of that kind measured
            held = held.get(k) if isinstance(held, dict) else None
        v = list((real.values(rr.Real(name, (name,), key)) or {}).values()) if held else []
        return f"{np.mean(v):.4f} ± {np.std(v):.4f}" if v else "-"

    ensemble = data.get("ensemble", {})
    ensemble = ensemble if "normalize" in ensemble else ensemble.get(per_seed[0], {})  # a merged file
    how = ensemble.get("normalize", "rank")
    how = how.get(coll, "rank") if isinstance(how, dict) else how  # older files: one for both halves
    combined = " / ".join(
        stat(k) for k in (circular, (*per_seed, "ensemble_fold_fitted"), (*per_seed, "ensemble"))
    )
    return [
        *(stat((*per_seed, m)) for m in MEMBERS),
        *(combined if n == how else "-" for n in NORMALIZATIONS),
    ]


def table(synthetic: dict[str, list[str]], real: rr.RealRows) -> str:
    """The synthetic row of each collection (`synthetic`: collection -> cells), its real row below."""
    lines = [
        "| collection | data | lgbm | gnn | rank: fitted / cross-fitted / equal | zscore: fitted / cross-fitted / equal |",
        "|---|---|---|---|---|---|",
    ]
    for coll, cells in synthetic.items():
        lines.append(f"| {coll} | synthetic | " + " | ".join(cells) + " |")
        lines.append(f"| {coll} | real | " + " | ".join(real_cells(coll, real)) + " |")
    files = ", ".join(f for f, *_ in REAL.values())
    return "\n".join(lines) + f"\n\n{rr.LEGEND}\nreal rows: bench_real.py ({files}); fitted = circular there"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data-dir", type=Path, required=True)
    p.add_argument("--out-dir", type=Path, required=True, help="holds predictions/<model>/valid.*")
    p.add_argument("--work-dir", type=Path, help="holds features/prepared (default: --out-dir)")
    rr.add_option(p)
    a = p.parse_args()
    paths = Paths(a.data_dir, a.out_dir, a.work_dir or a.out_dir)
    preds = [ens.load_member_predictions(paths, m, "valid") for m in MEMBERS]
    rows: dict[str, list[str]] = {}
    for coll in COLLECTIONS:
        truth = ens.valid_truth(paths, coll)
        if not truth:
            continue
        singles = [ens.collection_score(coll, {g: pr[g] for g in truth}, truth) for pr in preds]
        cells = []
        for how in NORMALIZATIONS:
            _, fitted = ens.fit_weights(coll, preds, truth, how)
            crossed = ens.cross_fit(coll, preds, truth, how, 0)["score"]
            half = np.full(len(preds), 1 / len(preds))
            equal = ens.collection_score(
                coll, {g: ens.combine([pr[g] for pr in preds], half, how) for g in truth}, truth
            )
            cells.append(f"{fitted:.4f} / {crossed:.4f} / {equal:.4f}")
        rows[coll] = [f"{singles[0]:.4f}", f"{singles[1]:.4f}", *cells]
    print(table(rows, rr.RealRows({}, rr.folders(a.real_dir))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
