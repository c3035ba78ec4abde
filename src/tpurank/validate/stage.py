"""The validation report (`tpurank validate`): `reports/validation.md`, every model's validation
scores side by side.

Every `submissions/valid_<model>.csv` is checked and scored (the untrained rankers included): a model x
collection table, where a fitted ensemble has two rows, its in-sample score (its weights were
fitted on these graphs) and the cross-fitted estimate saved by `train --model ensemble`
(tpurank.models.ensemble.cross_fit). Apart from it, a Reference block gives Kaggle leaderboard
scores on the real data (tpurank.report.reference), never mixed into our rows. Also written:
per-graph scores (`reports/validation_graphs.csv`), PNG plots in `reports/plots/` (training
curves from each model's metrics.csv: tpurank.report.curves), and a provenance sidecar
(`reports/validation.json`, holding the score tables too).

matplotlib (the plots) and scipy.stats are imported where they are used (tpurank.core.metrics).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from tpurank.core.atomic import write_text
from tpurank.core.collections import COLLECTIONS, kind_of
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError, command
from tpurank.core.metrics import rank_from_order, summarize
from tpurank.core.paths import Paths, synthetic_scale
from tpurank.core.provenance import write_sidecar
from tpurank.data.dataset import discover
from tpurank.data.subsets import (
    EVAL_MAX_CONFIGS,
    SPREAD_NOTE,
    capped_lines,
    coverage,
    coverage_sentence,
    load_subsets,
    scored_configs,
)
from tpurank.models.predictions import unpredicted_configs, unscored_subset
from tpurank.models.registry import MODEL_NAMES
from tpurank.models.weights import WEIGHTS_FILE, read_weights
from tpurank.report import reference
from tpurank.report.curves import read_curves
from tpurank.report.ensemble_section import report_lines
from tpurank.submission.format import check_csv
from tpurank.submission.score import expected_for_csv, load_runtimes, restrict, score_parsed, scores_json

RANK_PLOT_GRAPHS = 4  # graphs in the predicted-vs-true rank figure
COLUMNS = (*COLLECTIONS, "overall")
IN_SAMPLE = "ensemble (in-sample)"  # the table's label of the ensemble row: weights fitted on these graphs
CROSS_FITTED = "ensemble, cross-fitted"


def find_models(paths: Paths) -> list[str]:
    """Models with a `valid_<model>.csv`: registry order first (the untrained rankers lead), then by name."""
    found = set(paths.submitted("valid"))
    return [m for m in MODEL_NAMES if m in found] + sorted(found - set(MODEL_NAMES))


def _fmt(v: float | None) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4f}"


def score_models(
    paths: Paths, models: list[str], subsets_dir: str | None, all_configs: bool = False
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, list[int]]], dict[str, str]]:
    """(per-graph rows per model, submitted orders per model, problem per skipped model);
    `all_configs`: every config of every graph (a model that predicted only some is skipped)."""
    subsets = load_subsets(subsets_dir) if subsets_dir else None
    rows: dict[str, list[dict[str, Any]]] = {}
    orders: dict[str, dict[str, list[int]]] = {}
    skipped: dict[str, str] = {}
    for m in models:
        csv = paths.submission_file(m, "valid")
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
        predictions = paths.prediction_file(m, "valid")
        unscored = unpredicted_configs(predictions) if all_configs else None
        unscored = unscored or (unscored_subset(predictions, subsets) if subsets else None)
        if unscored:
            skipped[m] = unscored
            continue
        rows[m] = score_parsed(parsed, paths, "valid", subsets, all_configs)
        orders[m] = parsed
    return rows, orders, skipped


CURVES_PNG = "training_curves.png"


def cross_fitted(paths: Paths) -> dict[str, float | None]:
    """The fitted ensemble's cross-fitted score per collection (weights.json), and `overall`: their
    mean when every collection with a fitted ensemble has one, else None. Empty without an ensemble."""
    out: dict[str, float | None] = {}
    for c in COLLECTIONS:
        wfile = paths.model_dir("ensemble", c) / WEIGHTS_FILE
        if wfile.exists():
            score = (read_weights(wfile).get("cross_fit") or {}).get("score")
            out[c] = float(score) if isinstance(score, int | float) else None
    if out:
        known = [v for v in out.values() if v is not None]
        out["overall"] = float(np.mean(known)) if known and len(known) == len(out) else None
    return out


def score_rows(
    table: dict[str, dict[str, float | None]], crossed: dict[str, float | None]
) -> dict[str, dict[str, float | None]]:
    """The rows of the report's table: each model as scored; the ensemble, when fitted, labelled
    in-sample with its cross-fitted estimate right below it."""
    rows: dict[str, dict[str, float | None]] = {}
    for m, vals in table.items():
        if m == "ensemble" and crossed:
            rows[IN_SAMPLE], rows[CROSS_FITTED] = vals, crossed
        else:
            rows[m] = vals
    return rows


def markdown(
    table: dict[str, dict[str, float | None]],
    summaries: dict[str, dict[str, dict[str, float]]],
    skipped: dict[str, str],
    subsets: tuple[int, int] | None,
    data_root: Path,
    synthetic: str | None = None,
    rank_model: str = "",
    ensemble: list[str] | None = None,
    all_configs: bool = False,
) -> str:
    """The report text.

    Args:
        table: row label -> {column: score}, as `score_rows` makes it (the ensemble's in-sample and
            cross-fitted rows included).
        summaries: model -> collection -> diagnostics (`summarize`).
        skipped: model -> why its CSV was left out.
        subsets: with `--official-subsets`, (layout graphs scored, those on their official subset)
            (`subsets.coverage`); None without.
        data_root: what was scored.
        synthetic: the synthetic scale, None for real data.
        rank_model: the model of the rank figure.
        ensemble: the lines of `ensemble_section.report_lines` (its weights, both scores per collection).
        all_configs: every config of every graph was scored (`--all-configs`).
    """
    lines = [
        *data_header(data_root, synthetic),
        "## Our scores: validation split",
        "",
        "Score: Kendall tau (layout), 2 - slowdown@5 (tile); overall = mean of the collections present. "
        + scored_on(subsets, all_configs),
        "",
        "| model | " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * (len(COLUMNS) + 1),
    ]
    for m, vals in table.items():
        lines.append(f"| {m} | " + " | ".join(_fmt(vals.get(c)) for c in COLUMNS) + " |")
    if CROSS_FITTED in table:
        lines += [
            "",
            f"`{IN_SAMPLE}`: its weights were chosen on these same graphs, so it is optimistic (the "
            "ensemble's score in `tpurank runs` is this one). "
            f"`{CROSS_FITTED}`: weights fitted on one half of each collection's graphs score the other half, "
            "and the reverse (the ensemble section below): compare this row with the members.",
        ]
    lines += ["", *reference.markdown(bool(synthetic)), "", *diagnostics(summaries)]
    if ensemble:
        lines += ["", *ensemble]
    if skipped:
        lines += ["", "## Skipped (invalid CSV)", ""] + [f"- {m}: {why}" for m, why in skipped.items()]
    return "\n".join([*lines, *([""] if lines[-1] else []), *plots_section(rank_model)])


def scored_on(subsets: tuple[int, int] | None, all_configs: bool = False) -> str:
    """Which configs the table scored, and how its figures relate to those `predict` saved (its
    sidecars, which `tpurank runs` shows): the same without official subsets or `--all-configs`."""
    runs = "`tpurank runs` (and `submissions/valid_<model>.json`)"
    if all_configs:
        return (
            f"Every config of every graph scored (--all-configs); {runs} score a layout graph on at most "
            f"{EVAL_MAX_CONFIGS:,} configs, so their figures differ where a graph has more."
        )
    if subsets is None:
        return f"All configs of every graph scored{SPREAD_NOTE}: the figures of {runs}."
    sentence = coverage_sentence(*subsets)
    if subsets[1] == 0:
        return f"{sentence} The figures are those of {runs}."
    return (
        f"{sentence} {runs} score every config instead: their layout and overall figures differ from these."
    )


def data_header(data_root: Path, synthetic: str | None) -> list[str]:
    """The report's title and what data it scored: synthetic scores are never Kaggle scores."""
    title = "# Validation report: " + (f"SYNTHETIC data ('{synthetic}' scale)" if synthetic else "REAL data")
    data = (
        f"**SYNTHETIC DATA**: `{data_root}` was generated by `tpurank synth` ({synthetic} scale). These "
        "scores measure the pipeline; they are not Kaggle scores and cannot be compared with the "
        "leaderboard scores of the Reference section."
        if synthetic
        else f"**REAL DATA**: the TpuGraphs files under `{data_root}` (it holds no `synth.json`). These are "
        "validation-split scores, not leaderboard scores."
    )
    return [title, "", data, ""]


def plots_section(rank_model: str) -> list[str]:
    """The report's last section: every figure of `write_plots`, and where the per-graph scores are."""
    return [
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


def diagnostics(summaries: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """The section that explains each score: graphs, undefined ones, pair accuracy, slowdowns."""
    lines = [
        "## Diagnostics per collection",
        "",
        "| model | collection | graphs | undefined | score | pair acc | slowdown@1 | slowdown@5 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for m, summary in summaries.items():
        for c, s in summary.items():
            lines.append(
                f"| {m} | {c} | {int(s['graphs'])} | {int(s['undefined'])} | {_fmt(s['score'])} | "
                f"{_fmt(s.get('pair_accuracy'))} | {_fmt(s['slowdown@1'])} | {_fmt(s['slowdown@5'])} |"
            )
    return lines


def rank_examples(
    paths: Paths, orders: dict[str, list[int]], rows: list[dict[str, Any]]
) -> list[tuple[str, np.ndarray, np.ndarray]]:
    """(title, predicted rank, true rank) for up to RANK_PLOT_GRAPHS layout graphs, one per collection first."""
    from scipy.stats import rankdata  # here: see the module docstring

    files = {f.id: f for f in discover(paths.npz, splits=["valid"])}
    layout = [r for r in rows if kind_of(r["collection"]) == "layout"]
    picked: list[dict[str, Any]] = []
    for c in COLLECTIONS:
        picked += [r for r in layout if r["collection"] == c][:1]
    picked += [r for r in layout if r not in picked]
    out = []
    for r in picked[:RANK_PLOT_GRAPHS]:
        f = files[r["id"]]
        runtime, order = load_runtimes(f.path, f.collection), np.asarray(orders[r["id"]])
        # the configs the score counted: all of them (`--all-configs`, a small graph), or the spread
        keep = None if r.get("configs") == len(runtime) else scored_configs(f.collection, len(runtime))
        if keep is not None:
            order, runtime = restrict(order, runtime, keep, f.stem)
        title = f"{f.collection}\n{f.stem[:28]} tau={r['score']:.2f}"
        out.append((title, rank_from_order(order), rankdata(runtime) - 1))
    return out


def write_plots(
    paths: Paths,
    rows: dict[str, list[dict[str, Any]]],
    orders: dict[str, dict[str, list[int]]],
    table: dict[str, dict[str, float | None]],
    tag: str,
) -> str:
    """Every PNG of the report (`reports/plots/`); returns the model of the rank figure (the best overall).

    Args:
        rows: per-graph scores per model; orders: their submitted orders.
        table: the report's rows (`score_rows`).
        tag: the data's tag for every title ("" on real data).
    """
    from tpurank.report import plots  # here: see the module docstring

    plot_dir = paths.reports / "plots"
    # leaderboard marks only beside real-data scores: on synthetic data they would invite a comparison
    ref = {r.who: r.overall for r in reference.REFERENCES if r.overall is not None} if not tag else None
    plots.collection_scores(table, COLUMNS, plot_dir / "collection_scores.png", tag, reference=ref)
    taus = {
        c: {m: [r["score"] for r in rs if r["collection"] == c] for m, rs in rows.items()}
        for c in COLLECTIONS
        if kind_of(c) == "layout" and any(r["collection"] == c for rs in rows.values() for r in rs)
    }
    plots.tau_distribution(taus, plot_dir / "tau_distribution.png", tag)
    named = {"ensemble" if m == IN_SAMPLE else m: vals for m, vals in table.items()}
    overall = {m: vals for m, vals in named.items() if m in rows}  # the ensemble as fitted, not cross-fitted
    best = max(overall, key=lambda m: -math.inf if overall[m]["overall"] is None else overall[m]["overall"])
    plots.rank_scatter(
        rank_examples(paths, orders[best], rows[best]), plot_dir / "rank_scatter.png", best, tag
    )
    slow = {m: [r["slowdown@5"] for r in rs if r["collection"] == "tile:xla"] for m, rs in rows.items()}
    plots.tile_slowdown(slow, plot_dir / "tile_slowdown.png", tag)
    plots.training_curves(read_curves(paths.models), plot_dir / CURVES_PNG, tag)  # a note without one
    return best


def scored_models(
    paths: Paths, official_subsets: str | None, all_configs: bool
) -> tuple[dict[str, list[dict[str, Any]]], dict[str, dict[str, list[int]]], dict[str, str]]:
    """`score_models` on every model with a valid CSV, each model skipped and each graph scored on
    fewer configs than it has said in a line; an error when none could be scored."""
    models = find_models(paths)
    if not models:
        raise TpurankError(
            f"{paths.submissions}: no valid_<model>.csv; run {command('predict --model M --split valid')}"
        )
    rows, orders, skipped = score_models(paths, models, official_subsets, all_configs)
    for m, why in skipped.items():
        print(f"validate: skipped {m}: {why}", file=sys.stderr)
    if not rows:
        raise TpurankError(
            f"no valid_<model>.csv passed its check against the valid files under {paths.npz} (see the "
            "lines above); if they rank other data, pass --data-dir DIR or set $TPURANK_DATA"
        )
    for line in capped_lines(r for rs in rows.values() for r in rs):
        print(f"validate: {line}", file=sys.stderr)
    return rows, orders, skipped


def write_report(paths: Paths, cfg: Config, official_subsets: str | None, all_configs: bool = False) -> int:
    """Score every `valid_<model>.csv` and write the report, its plots and its sidecar (see the module
    docstring); 0 when written. `all_configs`: every config of every graph (`--all-configs`)."""
    rows, orders, skipped = scored_models(paths, official_subsets, all_configs)
    summaries = {m: summarize(r) for m, r in rows.items()}
    table = {m: scores_json(s) for m, s in summaries.items()}
    synthetic = synthetic_scale(paths.data)
    tag = f"SYNTHETIC data ({synthetic}): not Kaggle scores" if synthetic else ""
    crossed = cross_fitted(paths) if "ensemble" in rows else {}
    best = write_plots(paths, rows, orders, score_rows(table, crossed), tag)
    subsets = coverage(r for rs in rows.values() for r in rs) if official_subsets else None
    if subsets is not None:
        print(f"validate: {coverage_sentence(*subsets)}", file=sys.stderr)
    reports = paths.reports
    per_graph = pd.DataFrame([{"model": m, **r} for m, rs in rows.items() for r in rs])
    write_text(reports / "validation_graphs.csv", per_graph.to_csv(index=False))
    text = markdown(
        score_rows(table, crossed),
        summaries,
        skipped,
        subsets=subsets,
        data_root=paths.data,
        synthetic=synthetic,
        rank_model=best,
        ensemble=report_lines(paths) if "ensemble" in rows else [],
        all_configs=all_configs,
    )
    write_text(reports / "validation.md", text)
    write_sidecar(
        reports / "validation.json",
        cfg,
        paths.data,
        scores=table,
        ensemble_cross_fitted=crossed or None,
        skipped=skipped,
        official_subsets=official_subsets,
        all_configs=all_configs,
        # (layout graphs scored, those on their official subset): `tpurank runs` tells its figures apart
        official_subsets_coverage=(
            {"layout_graphs": subsets[0], "on_subset": subsets[1]} if subsets is not None else None
        ),
        rank_plot_model=best,
        synthetic_scale=synthetic,
        data="synthetic" if synthetic else "real",
    )
    print(f"wrote {reports / 'validation.md'} ({len(rows)} models; best overall: {best})", file=sys.stderr)
    return 0
