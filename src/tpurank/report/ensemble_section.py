"""The ensemble as the reports show it: its section of the validation report and its line in
`all`'s closing summary. Its weights are fitted on the validation split, so its score there is
in-sample; beside it stands the cross-fitted estimate (tpurank.models.ensemble.cross_fit)."""

from __future__ import annotations

import math

from tpurank.core.collections import COLLECTIONS
from tpurank.core.paths import Paths
from tpurank.models.weights import WEIGHTS_FILE, read_weights


def fitted_records(paths: Paths) -> list[dict]:
    """The saved weights.json of every collection with a fitted ensemble."""
    files = [paths.model_dir("ensemble", c) / WEIGHTS_FILE for c in COLLECTIONS]
    return [read_weights(f) for f in files if f.exists()]


def summary_note(paths: Paths) -> str | None:
    """One line for `all`'s closing summary: the ensemble's valid score is in-sample, and its
    cross-fitted estimate per collection."""
    records = fitted_records(paths)
    crossed = [
        f"{r['collection'].replace('layout:', '')} {r['cross_fit']['score']:.4f}"
        for r in records
        if (r.get("cross_fit") or {}).get("score") is not None
    ]
    if not records:
        return None
    return (
        "ensemble: weights fitted on valid, so its valid score is in-sample; cross-fitted (half/half): "
        + (", ".join(crossed) if crossed else "- (fewer than 2 valid graphs)")
    )


def report_lines(paths: Paths) -> list[str]:
    """The validation report's section on the ensemble: its weights are fitted on the validation
    split, so its score there is in-sample; beside it, the cross-fitted estimate per collection.
    Empty when no ensemble was fitted."""
    records = fitted_records(paths)
    if not records:
        return []

    def num(v: float | None) -> str:
        return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"

    lines = [
        "## Ensemble: weights fitted on validation",
        "",
        "The ensemble's weights are chosen on these validation graphs, so its score in the table above "
        "is in-sample (optimistic). The cross-fitted estimate fits the weights on one half of each "
        "collection's valid graphs and scores the other half, then swaps the halves (seed `seed`); it is "
        "the mean of every graph's out-of-half score. Both are scored on all configs of each graph.",
        "",
        "| collection | weights (fitted on valid) | valid, in-sample | cross-fitted | best member | halves' weights |",
        "|---|---|---|---|---|---|",
    ]
    for r in records:
        w = ", ".join(f"{m} {x:.1f}" for m, x in zip(r["members"], r["weights"], strict=True))
        singles = r.get("member_valid_scores", {})
        known = {m: v for m, v in singles.items() if v is not None and not math.isnan(v)}
        best = max(known, key=known.get) if known else None
        best_txt = f"{best} {num(known[best])}" if best else "-"
        cf = r.get("cross_fit") or {"score": None, "why": "not computed (fitted by an older version)"}
        crossed = num(cf["score"]) if cf["score"] is not None else f"- ({cf.get('why', 'undefined')})"
        hw = " / ".join("(" + ", ".join(f"{x:.1f}" for x in h) + ")" for h in cf.get("weights", []))
        lines.append(
            f"| {r['collection']} | {w} | {num(r.get('valid_score'))} | {crossed} | {best_txt} | {hw or '-'} |"
        )
    return [*lines, ""]
