"""The PNG figures of the validation report (matplotlib, headless Agg backend).

Each function takes plain numbers and writes one file atomically; none reads data itself. `tag`
(e.g. "SYNTHETIC data (tiny)") is added to every title so a figure cut out of the report still
says what data it shows.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display on servers and Kaggle
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from tpurank.core.atomic import atomic_path  # noqa: E402

DPI = 110  # small files, still readable on a laptop screen


REFERENCE_LABEL = "best public (real TpuGraphs data)"


def _title(text: str, tag: str) -> str:
    return f"{text}\n{tag}" if tag else text


def _save(fig: plt.Figure, out: Path) -> Path:
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png")
    plt.close(fig)
    return out


def collection_scores(
    scores: Mapping[str, Mapping[str, float | None]],
    reference: Mapping[str, float],
    columns: Sequence[str],
    out: Path,
    tag: str = "",
) -> Path:
    """Grouped bars: one group per collection (and overall), one bar per model; reference marks.

    The reference marks are horizontal lines across each group, inside the axes (the y range
    includes them), labelled as real-data results.

    Args:
        scores: model -> {column: score or None}.
        reference: column -> the best public validation score on the real data (a black line).
        columns: the groups, in order.
        out: the PNG path.
        tag: added to the title (e.g. SYNTHETIC data).
    """
    models = list(scores)
    x = np.arange(len(columns))
    width = 0.8 / max(1, len(models))
    fig, ax = plt.subplots(figsize=(1.6 * len(columns) + 2, 4))
    for i, m in enumerate(models):
        vals = [scores[m].get(c) for c in columns]
        ys = [np.nan if v is None else v for v in vals]
        ax.bar(x - 0.4 + width * (i + 0.5), ys, width, label=m)
    ref = np.array([reference.get(c, np.nan) for c in columns], dtype=float)
    shown = np.isfinite(ref)
    ax.hlines(
        ref[shown], x[shown] - 0.42, x[shown] + 0.42, colors="black", lw=2, label=REFERENCE_LABEL, zorder=3
    )
    ax.set_xlim(-0.6, len(columns) - 0.4)
    values = [v for m in models for v in scores[m].values() if v is not None and np.isfinite(v)]
    values += list(ref[shown])
    lo, hi = min([0.0, *values]), max([0.0, *values])
    pad = 0.08 * max(hi - lo, 0.1)
    ax.set_ylim(lo - pad, hi + pad)
    ax.set_xticks(x, [c.replace("layout:", "") for c in columns])
    ax.set_ylabel("score (tau for layout, 2 - slowdown for tile)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(_title("validation score per collection", tag))
    return _save(fig, out)


def tau_distribution(taus: Mapping[str, Mapping[str, Sequence[float]]], out: Path, tag: str = "") -> Path:
    """Box plots of per-graph Kendall tau: one panel per layout collection, one box per model.

    Args:
        taus: collection -> model -> per-graph tau values (NaN ones are dropped).
        out: the PNG path.
    """
    cols = list(taus) or ["(no layout graphs)"]
    fig, axes = plt.subplots(1, len(cols), figsize=(3.2 * len(cols) + 1, 3.6), squeeze=False, sharey=True)
    for ax, c in zip(axes[0], cols, strict=True):
        per_model = taus.get(c, {})
        data = [[v for v in vals if not math.isnan(v)] for vals in per_model.values()]
        if per_model:
            ax.boxplot(data, tick_labels=list(per_model), showmeans=True)
            ax.tick_params(axis="x", rotation=45, labelsize=8)
        ax.set_ylim(-1.05, 1.05)
        ax.set_title(c.replace("layout:", ""), fontsize=9)
    axes[0][0].set_ylabel("Kendall tau per graph")
    fig.suptitle(_title("Kendall tau per graph", tag), fontsize=10, y=1.1)
    return _save(fig, out)


def rank_scatter(
    examples: Sequence[tuple[str, np.ndarray, np.ndarray]], out: Path, model: str, tag: str = ""
) -> Path:
    """Predicted rank against true rank for a few graphs (a perfect ranking is the diagonal).

    Args:
        examples: (title, predicted rank, true rank) per graph; ranks 0 = fastest.
        out: the PNG path.
        model: the model whose ranks these are (named in the title).
        tag: added to the title.
    """
    n = max(1, len(examples))
    fig, axes = plt.subplots(1, n, figsize=(3.2 * n, 3.2), squeeze=False)
    for ax, (title, pred, true) in zip(axes[0], examples, strict=False):
        ax.scatter(true, pred, s=3, alpha=0.5)
        top = max(len(true) - 1, 1)
        ax.plot([0, top], [0, top], color="grey", lw=0.7)
        ax.set_title(title, fontsize=8)
        ax.set_xlabel("true rank")
    axes[0][0].set_ylabel("predicted rank")
    if not examples:
        axes[0][0].text(0.5, 0.5, "no layout graphs", ha="center", transform=axes[0][0].transAxes)
    fig.suptitle(_title(f"predicted vs true rank: model {model}", tag), fontsize=10, y=1.13)
    return _save(fig, out)


def tile_slowdown(slowdowns: Mapping[str, Sequence[float]], out: Path, tag: str = "") -> Path:
    """Histogram of tile slowdown@5 (best of the top 5 / best overall; 1.0 = perfect) per model."""
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    finite = [v for vals in slowdowns.values() for v in vals if math.isfinite(v)]
    hi = max(finite) if finite else 2.0
    bins = np.linspace(1.0, max(hi, 1.01), 30)
    for m, vals in slowdowns.items():
        ax.hist([v for v in vals if math.isfinite(v)], bins=bins, histtype="step", label=m)
    ax.set_xlabel("slowdown@5 (tile score = 2 - slowdown)")
    ax.set_ylabel("graphs")
    ax.legend(fontsize=8)
    ax.set_title(_title("tile: slowdown of the best of the top 5", tag))
    return _save(fig, out)


def training_curves(curves: Mapping[str, Mapping[str, Sequence[float]]], out: Path, tag: str = "") -> Path:
    """Validation score and learning rate against the step, one line per trained model (a model's
    metrics.csv: `gnn layout:xla:random` -> {"step", "valid_score", "lr"})."""
    fig, (score_ax, lr_ax) = plt.subplots(2, 1, figsize=(6.5, 6), sharex=True)
    for name, c in curves.items():
        score_ax.plot(c["step"], c["valid_score"], marker=".", label=name)
        lr_ax.plot(c["step"], c["lr"], label=name)
    score_ax.set_ylabel("valid score")
    if curves:
        score_ax.legend(fontsize=7)
    else:  # LightGBM alone, or models trained before metrics.csv
        score_ax.text(0.5, 0.5, "no metrics.csv among the models", ha="center", transform=score_ax.transAxes)
    lr_ax.set_ylabel("learning rate")
    lr_ax.set_xlabel("optimizer step")
    score_ax.set_title(_title("training curves (metrics.csv of each model)", tag))
    return _save(fig, out)
