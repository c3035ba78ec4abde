"""`tpurank validate`: `reports/validation.md`, every model's validation scores side by side.

Every `submissions/valid_<model>.csv` is checked and scored (baselines included), next to the best
public validation scores from the spec as reference lines. Also written: per-graph scores
(`reports/validation_graphs.csv`), PNG plots in `reports/plots/`, and a provenance sidecar
(`reports/validation.json`, holding the score table too). Where an ensemble was fitted, a section
says that its weights were fitted on this validation split (its score is in-sample) and gives the
cross-fitted estimate saved by `train --model ensemble` (tpurank.rankers.ensemble.cross_fit).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import rankdata

from tpurank.core.atomic import write_text
from tpurank.core.collections import COLLECTIONS, kind_of
from tpurank.core.errors import TpurankError
from tpurank.core.metrics import rank_from_order, summarize
from tpurank.core.paths import Paths
from tpurank.core.provenance import write_sidecar
from tpurank.data.dataset import discover
from tpurank.data.subsets import load_subsets
from tpurank.rankers.ensemble import report_lines
from tpurank.rankers.registry import MODEL_NAMES
from tpurank.report import plots
from tpurank.submission.format import check_csv
from tpurank.submission.score import expected_for_csv, load_runtimes, score_parsed, scores_json

# Best validation score per collection seen in the public write-ups (../shared/docs/tpugraphs.md).
BEST_PUBLIC: dict[str, float] = {
    "tile:xla": 0.975,
    "layout:xla:default": 0.46,
    "layout:xla:random": 0.71,
    "layout:nlp:default": 0.55,
    "layout:nlp:random": 0.96,
}
RANK_PLOT_GRAPHS = 4  # graphs in the predicted-vs-true rank figure
COLUMNS = (*COLLECTIONS, "overall")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--official-subsets", metavar="DIR", help="eval_indices folder: score layout graphs on those subsets"
    )


def find_models(submissions: Path) -> list[str]:
    """Models with a `valid_<model>.csv`: registry order first (baselines lead), then by name."""
    found = {p.stem.removeprefix("valid_") for p in submissions.glob("valid_*.csv")}
    return [m for m in MODEL_NAMES if m in found] + sorted(found - set(MODEL_NAMES))


def _fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def score_models(
    paths: Paths, models: list[str], subsets_dir: str | None
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, list[int]]], dict[str, str]]:
    """(per-graph rows per model, submitted orders per model, problem per skipped model)."""
    subsets = load_subsets(subsets_dir) if subsets_dir else None
    rows: dict[str, list[dict[str, Any]]] = {}
    orders: dict[str, dict[str, list[int]]] = {}
    skipped: dict[str, str] = {}
    for m in models:
        csv = paths.submissions / f"valid_{m}.csv"
        try:
            expected, _ = expected_for_csv(paths, "valid", csv)
            problems, parsed = check_csv(csv, expected, f"the valid files under {paths.npz}")
        except TpurankError as e:  # an unreadable CSV is one model skipped, not the whole report
            skipped[m] = str(e)
            continue
        if not expected:
            problems = problems or [f"{csv}: no row names a valid graph"]
        if problems:
            skipped[m] = f"{len(problems)} problem(s), first: {problems[0]}"
            continue
        rows[m] = score_parsed(parsed, paths, "valid", subsets)
        orders[m] = parsed
    return rows, orders, skipped


CURVES_PNG = "training_curves.png"


def training_curves(paths: Paths) -> dict[str, dict[str, list[float]]]:
    """Every trained model's metrics.csv (seed members' too): name -> step, valid score, lr."""
    out: dict[str, dict[str, list[float]]] = {}
    for f in sorted(paths.models.glob("*/*/**/metrics.csv")) if paths.models.is_dir() else []:
        rel = f.relative_to(paths.models).parts
        if any(p.startswith(".") for p in rel):
            continue  # a retrain in progress (its staging folder)
        try:
            df = pd.read_csv(f)
            curve = {k: df[k].astype(float).tolist() for k in ("step", "valid_score", "lr")}
        except (OSError, ValueError, KeyError, pd.errors.ParserError):
            print(f"validate: {f}: unreadable, left out of the training curves", file=sys.stderr)
            continue
        out[" ".join(rel[:-1])] = curve
    return out


def markdown(
    table: dict[str, dict[str, float | None]],
    summaries: dict[str, dict[str, dict[str, float]]],
    skipped: dict[str, str],
    subsets_dir: str | None,
    data_root: Path,
    synthetic: str | None = None,
    rank_model: str = "",
    ensemble: list[str] | None = None,
) -> str:
    """The report text (`synthetic`: the synthetic scale, None for real data; `ensemble`: the
    lines of `ensemble.report_lines`, its weights fitted on validation and the cross-fitted score)."""
    head = "| model | " + " | ".join(c.replace("layout:", "") for c in COLUMNS) + " |"
    title = "# Validation report" + (f": SYNTHETIC data ('{synthetic}' scale)" if synthetic else "")
    warning = (
        [
            f"**SYNTHETIC DATA**: `{data_root}` was generated by `tpurank synth` ({synthetic} scale). These "
            "scores measure the pipeline; they are not Kaggle scores and not comparable to the real-data "
            "reference row.",
            "",
        ]
        if synthetic
        else []
    )
    lines = [
        title,
        "",
        *warning,
        f"Data: `{data_root}`. Score: Kendall tau (layout), 2 - slowdown@5 (tile); overall = mean of the "
        "collections present. "
        + (
            "Layout graphs scored on the official subsets."
            if subsets_dir
            else "All configs of every graph scored."
        ),
        "",
        head,
        "|" + "---|" * (len(COLUMNS) + 1),
    ]
    for m, vals in table.items():
        lines.append(f"| {m} | " + " | ".join(_fmt(vals.get(c)) for c in COLUMNS) + " |")
    ref = dict(BEST_PUBLIC, overall=float(np.mean(list(BEST_PUBLIC.values()))))
    lines.append("| *best public (spec, real data)* | " + " | ".join(_fmt(ref[c]) for c in COLUMNS) + " |")
    lines += ["", "## Diagnostics per collection", ""]
    lines.append("| model | collection | graphs | undefined | score | pair acc | slowdown@1 | slowdown@5 |")
    lines.append("|---|---|---|---|---|---|---|---|")
    for m, summary in summaries.items():
        for c, s in summary.items():
            lines.append(
                f"| {m} | {c} | {int(s['graphs'])} | {int(s['undefined'])} | {_fmt(s['score'])} | "
                f"{_fmt(s.get('pair_accuracy'))} | {_fmt(s['slowdown@1'])} | {_fmt(s['slowdown@5'])} |"
            )
    if ensemble:
        lines += ["", *ensemble]
    if skipped:
        lines += ["", "## Skipped (invalid CSV)", ""] + [f"- {m}: {why}" for m, why in skipped.items()]
    lines += [
        "",
        "## Plots",
        "",
        "![scores per collection](plots/collection_scores.png)",
        "![per-graph tau](plots/tau_distribution.png)",
        f"![predicted vs true rank, model {rank_model}](plots/rank_scatter.png)",
        "![tile slowdown](plots/tile_slowdown.png)",
        f"![training curves](plots/{CURVES_PNG})",
        "",
        "Per-graph scores: `validation_graphs.csv`.",
        "",
    ]
    return "\n".join(lines)


def rank_examples(
    paths: Paths, orders: dict[str, list[int]], rows: list[dict[str, Any]]
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(title, predicted rank, true rank) for up to RANK_PLOT_GRAPHS layout graphs, one per collection first."""
    files = {f.id: f for f in discover(paths.npz, splits=["valid"])}
    layout = [r for r in rows if kind_of(r["collection"]) == "layout"]
    picked: list[dict[str, Any]] = []
    for c in COLLECTIONS:
        picked += [r for r in layout if r["collection"] == c][:1]
    picked += [r for r in layout if r not in picked]
    out = []
    for r in picked[:RANK_PLOT_GRAPHS]:
        f = files[r["id"]]
        runtime = load_runtimes(f.path, f.collection)
        title = f"{f.collection.replace('layout:', '')}\n{f.stem[:28]} tau={r['score']:.2f}"
        out.append((title, rank_from_order(np.asarray(orders[r["id"]])), rankdata(runtime) - 1))
    return out


def output_folders(args: argparse.Namespace) -> list[Path]:
    """The reports folder, locked while the report is written (tpurank.core.lock)."""
    return [args.paths.reports]


def run(args: argparse.Namespace) -> int:
    paths: Paths = args.paths
    models = find_models(paths.submissions)
    if not models:
        raise TpurankError(
            f"{paths.submissions}: no valid_<model>.csv; run `python -m tpurank predict --model M --split valid`"
        )
    rows, orders, skipped = score_models(paths, models, args.official_subsets)
    for m, why in skipped.items():
        print(f"validate: skipped {m}: {why}", file=sys.stderr)
    if not rows:
        raise TpurankError("no valid_<model>.csv passed its check; see the lines above")
    summaries = {m: summarize(r) for m, r in rows.items()}
    table = {m: scores_json(s) for m, s in summaries.items()}
    from tpurank.synth.tree import synthetic_scale

    synthetic = synthetic_scale(paths.data)
    tag = f"SYNTHETIC data ({synthetic}): not Kaggle scores" if synthetic else ""
    reports = paths.reports
    plot_dir = reports / "plots"
    plots.collection_scores(
        table, dict(BEST_PUBLIC), COLUMNS, out=plot_dir / "collection_scores.png", tag=tag
    )
    taus = {
        c: {m: [r["score"] for r in rs if r["collection"] == c] for m, rs in rows.items()}
        for c in COLLECTIONS
        if kind_of(c) == "layout" and any(r["collection"] == c for rs in rows.values() for r in rs)
    }
    plots.tau_distribution(taus, plot_dir / "tau_distribution.png", tag)
    best = max(table, key=lambda m: -math.inf if table[m]["overall"] is None else table[m]["overall"])
    plots.rank_scatter(
        rank_examples(paths, orders[best], rows[best]), plot_dir / "rank_scatter.png", best, tag
    )
    slow = {m: [r["slowdown@5"] for r in rs if r["collection"] == "tile:xla"] for m, rs in rows.items()}
    plots.tile_slowdown(slow, plot_dir / "tile_slowdown.png", tag)
    plots.training_curves(training_curves(paths), plot_dir / CURVES_PNG, tag)  # empty without one
    ensemble_lines = report_lines(paths) if "ensemble" in rows else []
    per_graph = pd.DataFrame([{"model": m, **r} for m, rs in rows.items() for r in rs])
    write_text(reports / "validation_graphs.csv", per_graph.to_csv(index=False))
    write_text(
        reports / "validation.md",
        markdown(
            table,
            summaries,
            skipped,
            subsets_dir=args.official_subsets,
            data_root=paths.data,
            synthetic=synthetic,
            rank_model=best,
            ensemble=ensemble_lines,
        ),
    )
    write_sidecar(
        reports / "validation.json",
        args.cfg,
        paths.data,
        scores=table,
        skipped=skipped,
        official_subsets=args.official_subsets,
        rank_plot_model=best,
        synthetic_scale=synthetic,
    )
    print(f"wrote {reports / 'validation.md'} ({len(rows)} models; best overall: {best})", file=sys.stderr)
    return 0
