"""Can a few measured configs tell which of the ensemble's members ranks a program better?

The calibrated ensemble combines its calibrated members with weights chosen on the measured
configs (tpurank.rank.select.choose_weights). This asks, on the saved fits of the real layout
programs (`bench/runs/calibration_fits.py`; uniform draws), two questions that bound any such
choice:

- **Fixed weights.** The ensemble with each fixed LightGBM weight (0, 0.25, ..., 1; the GNN the
  rest) over the members as the default rule calibrates them, against its better calibrated member,
  on the configs not measured: if no one weight is within 0.01 of the better member on every
  program, the weights must come from the program's own measurements.
- **What the measurements say.** How often the member that ranks the measured configs better (out
  of fold, as the default rule's folds see them: `Choice.tau`) is the member whose calibrated
  ranking orders the rest better, per k: 0.5 is a coin.

    .venv/bin/python bench/runs/calibration_weights.py /tmp/fits-cut [--out bench/results/calibration_weights.json]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
sys.path.insert(0, str(ROOT / "bench" / "runs"))

import calibration_rules as cr  # noqa: E402
import provenance  # noqa: E402
import tune_tables  # noqa: E402

from tpurank.rank import select  # noqa: E402

GRID = (0.0, 0.25, 0.5, 0.75, 1.0)  # LightGBM's weight; the GNN's is the rest
NEVER = 10**9  # weights_from: the ensemble keeps the weights it is given


def fixed(r: cr.Record, lgbm: float) -> cr.Record:
    """`r` with the ensemble's weights fixed at `lgbm` for LightGBM (the members as saved)."""
    out = copy.copy(r)
    out.weights = np.array([lgbm if m == "lgbm" else 1 - lgbm for m in r.members])
    return out


def member_evidence(r: cr.Record) -> dict[str, float]:
    """Each member's held-out tau on the measured configs, as the default rule's folds see it (its
    chosen share of calibration, `Choice.tau`)."""
    how = dataclasses.replace(cr.variant(""), seed=r.draw).for_kind("layout")
    label = r.label
    out = {}
    for m in r.members:
        oof = r.oof.get(m, np.full(len(label), np.nan))
        checked = len(r.positions) >= how.checked_from
        prior = select.prior_share(len(r.positions), how.prior_of(m, checked))
        margin = how.margin if checked else np.inf
        out[m] = select.choose_share(r.trained[m][r.positions], oof, label, margin, prior).tau
    return out


def measure(folder: Path) -> list[dict]:
    """One row per program, k and draw: each fixed weight's and each calibrated member's tau on the
    configs not measured, and each member's held-out tau on the measured ones."""
    rows = []
    shipped = cr.rule_of("")
    held = cr.rule_of(f"w={NEVER}")
    for f in sorted(folder.glob("layout-*.npz")):
        meta = json.loads(f.with_suffix(".json").read_text())
        data = dict(np.load(f, allow_pickle=False))
        truth = data["truth"]
        for key in data["index"]:
            r = cr.Record(data, str(key))
            if r.source != "uniform" or r.weights is None:
                continue
            left = truth > 0
            left[r.positions] = False
            cal = {m: cr.scores(c, truth, left, False)["tau"] for m, c in shipped(r).items()}
            grid = {str(w): cr.scores(held(fixed(r, w))["ensemble"], truth, left, False)["tau"] for w in GRID}
            rows.append(
                {"program": meta["program"], "k": r.k, "draw": r.draw, "calibrated": cal, "fixed": grid}
                | {"held_out": member_evidence(r)}
            )
    return rows


def report(rows: list[dict]) -> str:
    """`tune_tables.weights_rows` as plain text."""
    head, table = tune_tables.weights_rows(rows, [str(w) for w in GRID])
    return "\n".join("  ".join(r) for r in [head, *table])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fits", type=Path)
    p.add_argument("--out", type=Path, help="save the rows and the provenance here (.json)")
    a = p.parse_args()
    stamp = provenance.stamp()
    rows = measure(a.fits)
    print(report(rows))
    if a.out is not None:
        fits = sorted(
            {
                json.loads(f.read_text()).get("provenance", {}).get("commit", "?")
                for f in a.fits.glob("layout-*.json")
            }
        )
        res = {"what": __doc__.splitlines()[0], "grid": GRID, "fits_commits": fits, "rows": rows}
        a.out.write_text(json.dumps(res | {"provenance": stamp}) + "\n")
        print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
