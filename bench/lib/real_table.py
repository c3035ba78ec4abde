"""The results table of bench_real.py: per model, the mean ± std [min, max] over seeds of each
column (layout tau on all configs and on the official subset, the tile score), and the circular
ensemble labelled as an upper bound."""

from __future__ import annotations

import numpy as np

FOLD_FITTED = "ensemble_fold_fitted"  # tile only: each fold's weights fitted on the other folds


def summary(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    a = np.asarray(values, dtype=np.float64)
    if not len(a):  # e.g. no ensemble when --models leaves out its members
        return {"mean": float("nan"), "std": float("nan"), "min": float("nan"), "max": float("nan"), "n": 0}
    return {
        "mean": float(a.mean()),
        "std": float(a.std()),
        "min": float(a.min()),
        "max": float(a.max()),
        "n": len(a),
    }


def fmt(s: dict[str, float] | None) -> str:
    if not s:
        return "-"
    if s["n"] == 1 or s["max"] == s["min"]:
        return f"{s['mean']:.4f}" + (f" (x{s['n']}, no spread)" if s["n"] > 1 else "")
    return f"{s['mean']:.4f} ± {s['std']:.4f} [{s['min']:.4f}, {s['max']:.4f}]"


def table(res: dict, models: list[str]) -> str:
    cols = []
    if "layout" in res:
        cols += [
            ("xla:default tau, all configs", res["layout"]["per_seed"]["all"]),
            ("xla:default tau, official subset", res["layout"]["per_seed"]["subset"]),
        ]
    if "tile" in res:
        cols.append(("tile score, kernel CV", res["tile"]["per_seed"]))
    lines = ["| model | " + " | ".join(c for c, _ in cols) + " |", "|---|" + "---|" * len(cols)]
    names = {
        "ensemble": "**ensemble** (equal weights)",
        FOLD_FITTED: "ensemble (weights fitted on the other folds)",
    }
    for m in ["ensemble", FOLD_FITTED, *models]:  # the ensemble first: the ranker tpurank ships
        name = names.get(m, m)
        cells = [fmt(summary(v[m]) if m in v else None) for _, v in cols]
        if any(c != "-" for c in cells):
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
    circ = []
    if "layout" in res:
        circ += [summary([s for s, _ in res["layout"]["circular_ensemble"][k]]) for k in ("all", "subset")]
    if "tile" in res:
        circ.append(summary([s for s, _ in res["tile"]["circular_ensemble"]]))
    if circ and all(circ):
        lines.append(
            "| *ensemble, weights fitted on the scored graphs (circular)* | "
            + " | ".join(fmt(c) for c in circ)
            + " |"
        )
    return "\n".join(lines)
