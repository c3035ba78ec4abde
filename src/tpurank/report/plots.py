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
from matplotlib import ticker  # noqa: E402

from tpurank.core.atomic import atomic_path  # noqa: E402

DPI = 110  # small files, still readable on a laptop screen


# one color and dash per model in every figure; seed members share their model's
MODEL_STYLES: dict[str, tuple[str, str | tuple]] = {
    "random": ("tab:gray", ":"),
    "heuristic": ("tab:brown", "-."),
    "lgbm": ("tab:blue", "-"),
    "gnn": ("tab:orange", "--"),
    "baseline": ("tab:green", (0, (5, 1, 1, 1))),
    "ensemble": ("tab:red", "-"),
}


def _title(text: str, tag: str) -> str:
    return f"{text}\n{tag}" if tag else text


def _save(fig: plt.Figure, out: Path) -> Path:
    with atomic_path(out, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=DPI, bbox_inches="tight", format="png")
    plt.close(fig)
    return out


def collection_scores(
    scores: Mapping[str, Mapping[str, float | None]],
    columns: Sequence[str],
    out: Path,
    tag: str = "",
    reference: Mapping[str, float] | None = None,
) -> Path:
    """Grouped bars: one group per collection (and overall), one bar per model; reference marks.

    The reference marks are horizontal lines across the `overall` group only (the one stated score on
    that scale), inside the axes (the y range includes them), labelled as real-data leaderboard scores.
    They are a mean over all five collections, so when only some collections were scored the group is
    labelled as a partial overall ("overall of 2 of 5 collections") and the marks are left out: a
    note under the axes says why.

    Args:
        scores: model (or row label) -> {column: score or None}.
        columns: the groups, in order (`overall` last).
        out: the PNG path.
        tag: added to the title (e.g. SYNTHETIC data).
        reference: label -> an overall score on the real data (tpurank.report.reference), or None.
    """
    models = list(scores)
    x = np.arange(len(columns))
    fig, ax = plt.subplots(figsize=(1.7 * len(columns) + 2.5, 4))
    _grouped_bars(ax, scores, columns, x)
    values = [v for m in models for v in scores[m].values() if v is not None and np.isfinite(v)]
    at = x[list(columns).index("overall")] if "overall" in columns else None
    scored, of = scored_collections(scores, columns)
    partial = at is not None and scored < of
    if at is not None:
        values += _reference_marks(ax, reference or {}, at, scored, of)
    ax.set_xlim(-0.6, len(columns) - 0.4)
    lo, hi = min([0.0, *values]), max([0.0, *values])
    pad = 0.08 * max(hi - lo, 0.1)
    ax.set_ylim(lo - pad, hi + pad)
    ticks = [
        f"overall of {scored} of {of}\ncollections" if c == "overall" and partial else c for c in columns
    ]
    ax.set_xticks(x, ticks, rotation=15, fontsize=8)
    ax.set_ylabel("score (tau for layout, 2 - slowdown for tile)")
    ax.axhline(0, color="grey", lw=0.5)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.set_title(_title("validation score per collection", tag))
    return _save(fig, out)


def _grouped_bars(
    ax: plt.Axes, scores: Mapping[str, Mapping[str, float | None]], columns: Sequence[str], x: np.ndarray
) -> None:
    """One bar per model in each group at `x` (a missing score: no bar), in the model's color; the
    cross-fitted rows hatched."""
    width = 0.8 / max(1, len(scores))
    for i, m in enumerate(scores):
        ys = [np.nan if scores[m].get(c) is None else scores[m][c] for c in columns]
        hatch = "//" if "cross-fitted" in m else None
        ax.bar(
            x - 0.4 + width * (i + 0.5),
            ys,
            width,
            label=m,
            color=style(m, i)["color"],
            hatch=hatch,
            edgecolor="white" if hatch else None,
        )


def _reference_marks(
    ax: plt.Axes, reference: Mapping[str, float], at: float, scored: int, of: int
) -> list[float]:
    """Leaderboard lines across the `overall` group at `at` (their values, for the y range), or, when
    that overall is of `scored` < `of` collections, a note under the axes saying why none is drawn."""
    if scored < of:
        if reference:
            ax.annotate(
                f"Kaggle leaderboard scores not drawn: they are means of all {of} collections, this overall "
                f"of {scored}",
                (0, 0),
                xycoords="axes fraction",
                xytext=(0, -48),
                textcoords="offset points",
                fontsize=7,
            )
        return []
    for k, (label, value) in enumerate(reference.items()):
        ax.hlines(
            value,
            at - 0.42,
            at + 0.42,
            colors="black",
            lw=2,
            linestyles=("-", "--", ":")[k % 3],
            label=f"{label} (Kaggle private LB, real data)",
            zorder=3,
        )
    return list(reference.values())


def scored_collections(
    scores: Mapping[str, Mapping[str, float | None]], columns: Sequence[str]
) -> tuple[int, int]:
    """(collections some model has a score for, collections in the figure): `overall` is the mean of
    the scored ones only."""
    collections = [c for c in columns if c != "overall"]
    scored = [
        c for c in collections if any(v.get(c) is not None and np.isfinite(v[c]) for v in scores.values())
    ]
    return len(scored), len(collections)


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
            box = ax.boxplot(data, tick_labels=list(per_model), showmeans=True, patch_artist=True)
            for patch, m in zip(box["boxes"], per_model, strict=True):
                patch.set(facecolor=style(m)["color"], alpha=0.45)
            ax.tick_params(axis="x", rotation=45, labelsize=8)
        ax.set_ylim(-1.05, 1.05)
        ax.set_title(c, fontsize=9)
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


def style(model: str, i: int = 0) -> dict:
    """Color and line style of a model, the same in every figure (`gnn seed-1` as `gnn`); unknown
    names take the next color of the cycle (`i`)."""
    base = model.split()[0].rstrip(",") if model.split() else model
    color, dash = MODEL_STYLES.get(base, (f"C{i % 10}", "-"))
    return {"color": color, "linestyle": dash}


def tile_slowdown(slowdowns: Mapping[str, Sequence[float]], out: Path, tag: str = "") -> Path:
    """Per model, its own row: a histogram of tile slowdown@5 over the graphs on a log axis.

    slowdown@5 = the best runtime among the 5 configs ranked first / the best runtime (1.0 =
    perfect; tile score = 2 - slowdown). The log axis spreads the learned models, near 1.0, from
    the untrained rankers, which reach 10; one row per model (offset histograms) keeps models that
    coincide (all perfect) apart, each row labelled with its mean and its perfect graphs.
    """
    finite = {m: np.asarray([v for v in vals if math.isfinite(v)], float) for m, vals in slowdowns.items()}
    values = np.concatenate([v for v in finite.values() if len(v)] or [np.ones(1)])
    hi = max(float(values.max()) * 1.1, 1.1)
    edges = np.geomspace(1.0, hi, 31)
    shares = {m: np.histogram(v, edges)[0] / max(len(v), 1) for m, v in finite.items()}
    top = max([float(h.max()) for h in shares.values() if len(h)] + [1e-9])
    fig, ax = plt.subplots(figsize=(6.5, 1.0 + 0.55 * max(len(finite), 1)))
    labels = []
    for i, (m, v) in enumerate(finite.items()):
        row = len(finite) - 1 - i  # the first model on top
        color = style(m, i)["color"]
        ax.stairs(row + 0.85 * shares[m] / top, edges, baseline=row, fill=True, alpha=0.45, color=color)
        ax.stairs(row + 0.85 * shares[m] / top, edges, baseline=row, color=color, lw=1.2)
        ax.axhline(row, color="grey", lw=0.4)
        if len(v):
            ax.plot([v.mean()], [row + 0.9], marker="v", color="black", ms=5, ls="none")
        perfect = int(np.sum(v <= 1.0 + 1e-9))
        labels.append(f"{m}\nmean {v.mean():.3f}, perfect {perfect}/{len(v)}" if len(v) else f"{m}\nno graph")
    ax.set_yticks(np.arange(len(finite))[::-1] + 0.4, labels, fontsize=7)
    ax.set_ylim(-0.1, max(len(finite), 1))
    ax.set_xscale("log")
    ax.set_xlim(0.98, hi)
    ax.xaxis.set_major_formatter(ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xticks([t for t in (1, 1.25, 1.5, 2, 3, 5, 10, 20, 50) if t <= hi])
    ax.set_xlabel("slowdown@5, log scale (1.0 = the fastest config is in the top 5; v = mean)")
    ax.grid(alpha=0.3, axis="x")
    ax.set_title(_title("tile:xla: slowdown of the best of the top 5, per graph", tag))
    return _save(fig, out)


ROW_TITLES = ("GNNs: training loss", "GNNs: validation score", "LightGBM: validation metric")


def training_curves(
    curves: Mapping[str, Mapping[str, Mapping[str, Sequence[float]]]], out: Path, tag: str = ""
) -> Path:
    """Per collection (a column): the GNN-style models' training loss and validation score against
    the step, and LightGBM's validation metric against the boosting round.

    Args:
        curves: collection -> curve name (`gnn`, `gnn seed-1`, `baseline`, `lgbm`) -> its curve
            (tpurank.report.curves.read_curve: `step`, `train_loss`, `valid_step`, `valid_score`, or
            `round`, `valid_score`).
        out: the PNG path.
        tag: added to the title.
    """
    if not curves:  # models trained before metrics.csv, or none trained
        fig, ax = plt.subplots(figsize=(6.5, 3))
        ax.text(0.5, 0.5, "no metrics.csv among the models", ha="center", transform=ax.transAxes)
        ax.set_title(_title("training curves", tag))
        return _save(fig, out)
    cols = list(curves)
    fig, axes = plt.subplots(3, len(cols), figsize=(3.4 * len(cols) + 0.6, 8), squeeze=False)
    for j, c in enumerate(cols):
        loss_ax, valid_ax, lgbm_ax = axes[:, j]
        valid_ax.sharex(loss_ax)  # the same steps above and below
        loss_ax.set_title(c, fontsize=9)
        for i, (name, cv) in enumerate(curves[c].items()):
            seed = {"lw": 0.9, "alpha": 0.6} if " seed-" in name else {"lw": 1.4}
            if "round" in cv:
                lgbm_ax.plot(cv["round"], cv["valid_score"], label=name, **style(name, i), **seed)
                continue
            loss_ax.plot(cv["step"], cv["train_loss"], label=name, **style(name, i), **seed)
            mark = "." if len(cv["valid_step"]) <= 40 else None
            valid_ax.plot(
                cv["valid_step"], cv["valid_score"], marker=mark, label=name, **style(name, i), **seed
            )
        for ax, what in zip((loss_ax, valid_ax, lgbm_ax), ROW_TITLES, strict=True):
            _finish_panel(ax, what, first=j == 0)
        loss_ax.set_xlabel("optimizer step", fontsize=7)
        valid_ax.set_xlabel("optimizer step", fontsize=7)
        lgbm_ax.set_xlabel("boosting round", fontsize=7)
    fig.suptitle(_title("training curves (metrics.csv of each model)", tag), fontsize=10)
    # fixed gaps between the panels, not tight_layout: it measures every panel's labels (a third of
    # this figure's time, ~0.4 s a report); _save's tight bounding box trims the outer margins
    fig.subplots_adjust(left=0.06, right=0.98, top=0.9, bottom=0.06, wspace=0.3, hspace=0.45)
    return _save(fig, out)


def _finish_panel(ax: plt.Axes, what: str, first: bool) -> None:
    """Legend, row label on the first column, log y for a positive loss, or a note when empty."""
    if first:
        ax.set_ylabel(what, fontsize=8)
    ax.tick_params(labelsize=7)
    if not ax.lines:
        ax.text(0.5, 0.5, "no curve", ha="center", va="center", transform=ax.transAxes, color="grey")
        return
    ys = np.concatenate([np.asarray(line.get_ydata(), float) for line in ax.lines])
    ys = ys[np.isfinite(ys)]
    if what.endswith("loss") and len(ys) and ys.min() > 0 and ys.max() / ys.min() > 20:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=6)
