"""The validation report's figures: the synthetic tag, references inside the axes, partial overalls,
training curves and the tile slowdown."""

from __future__ import annotations

import numpy as np
import pytest


def test_plots_say_synthetic_name_the_model_and_keep_references_inside(tmp_path, monkeypatch):
    """Every figure's title carries the tag; reference lines lie inside the axes, labelled as real data."""
    from tpurank.report import plots

    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: figs.setdefault(out.name, fig) and out)
    tag = "SYNTHETIC data (tiny): not Kaggle scores"
    cols = ["tile:xla", "layout:xla:default", "overall"]
    scores = {"gnn": {"tile:xla": 0.2, "layout:xla:default": -0.1, "overall": 0.05}}
    ref = {"1st place, best ensemble": 0.736, "1st place, best single model": 0.714}
    plots.collection_scores(scores, cols, tmp_path / "a.png", tag, reference=ref)
    plots.tau_distribution({"layout:xla:default": {"gnn": [0.1, 0.2]}}, tmp_path / "b.png", tag)
    ranks = np.arange(5.0)
    plots.rank_scatter([("g", ranks, ranks)], tmp_path / "c.png", "lgbm", tag)
    plots.tile_slowdown({"gnn": [1.0, 1.2]}, tmp_path / "d.png", tag)
    for name, fig in figs.items():
        texts = [fig._suptitle.get_text() if fig._suptitle else ""] + [ax.get_title() for ax in fig.axes]
        assert any(tag in t for t in texts), (name, texts)
    assert any("model lgbm" in figs["c.png"]._suptitle.get_text() for _ in [0])
    ax = figs["a.png"].axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    labels = [f"{who} (Kaggle private LB, real data)" for who in ref]
    assert [t for t in legend if "Kaggle" in t] == labels
    lo, hi = ax.get_ylim()
    for label, value in zip(labels, ref.values(), strict=True):
        (marks,) = [c for c in ax.collections if c.get_label() == label]
        ((start, end),) = marks.get_segments()  # one mark: on the overall group only (x = 2)
        assert start[1] == end[1] == value and lo < value < hi
        assert 1.5 < start[0] < end[0] < 2.5


def test_a_partial_overall_is_labelled_and_not_drawn_against_the_leaderboard(tmp_path, monkeypatch):
    """The real sample scores 2 of the 5 collections: its overall is labelled as the mean of those 2,
    and the leaderboard's overall (a mean of all 5) is not drawn beside it; a note says why."""
    from tpurank.core.collections import COLLECTIONS
    from tpurank.report import plots

    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: figs.setdefault(out.name, fig) and out)
    cols = [*COLLECTIONS, "overall"]
    scores = {
        "random": {"tile:xla": 1.0, "layout:xla:default": -0.0351, "overall": 0.4824},
        "heuristic": {"tile:xla": 1.0, "layout:xla:default": 0.0187, "overall": 0.5094},
    }
    ref = {"1st place, best ensemble": 0.736}
    plots.collection_scores(scores, cols, tmp_path / "partial.png", "", reference=ref)
    ax = figs["partial.png"].axes[0]
    ticks = [t.get_text() for t in ax.get_xticklabels()]
    assert ticks == [*COLLECTIONS, "overall of 2 of 5\ncollections"]
    assert not [c for c in ax.collections if "Kaggle" in str(c.get_label())]  # no leaderboard line
    (note,) = [t.get_text() for t in ax.texts]
    assert "not drawn: they are means of all 5 collections, this overall of 2" in note
    # all five scored: the plain overall, with the leaderboard's line across it
    full = {m: {c: 0.5 for c in cols} for m in scores}
    plots.collection_scores(full, cols, tmp_path / "full.png", "", reference=ref)
    ax = figs["full.png"].axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()][-1] == "overall" and not ax.texts
    assert [c.get_label() for c in ax.collections if "Kaggle" in str(c.get_label())] == [
        "1st place, best ensemble (Kaggle private LB, real data)"
    ]


@pytest.mark.parametrize("models", [0, 2])
def test_training_curves_per_collection_or_a_note_without_warnings(tmp_path, monkeypatch, models):
    """A panel per collection: GNN loss and validation score over steps, LightGBM's metric over rounds;
    without any metrics.csv, a note instead of an empty legend's warning."""
    import warnings

    from tpurank.report import plots

    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: figs.setdefault(out.name, fig) and out)
    gnn = {
        "step": [1, 2, 3, 4],
        "train_loss": [2.0, 1.5, 1.2, 1.0],
        "valid_step": [2, 4],
        "valid_score": [0.1, 0.2],
    }
    curves = {
        c: {"gnn": gnn, "gnn seed-1": gnn, "lgbm": {"round": [1, 2, 3], "valid_score": [0.1, 0.3, 0.2]}}
        for c in ["tile:xla", "layout:nlp:default"][:models]
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.training_curves(curves, tmp_path / "t.png", "tag")
    fig = figs["t.png"]
    if not models:
        (ax,) = fig.axes
        assert ax.get_legend() is None and [t.get_text() for t in ax.texts] == [
            "no metrics.csv among the models"
        ]
        return
    assert len(fig.axes) == 3 * models
    loss, valid, lgbm = fig.axes[0], fig.axes[models], fig.axes[2 * models]  # the first column's rows
    assert [loss.get_title(), fig.axes[1].get_title()] == ["tile:xla", "layout:nlp:default"]
    assert [line.get_label() for line in loss.lines] == ["gnn", "gnn seed-1"]
    assert list(loss.lines[0].get_ydata()) == gnn["train_loss"]
    assert list(valid.lines[0].get_xdata()) == [2, 4] and list(valid.lines[0].get_ydata()) == [0.1, 0.2]
    assert [line.get_label() for line in lgbm.lines] == ["lgbm"] and list(lgbm.lines[0].get_xdata()) == [
        1,
        2,
        3,
    ]


def test_tile_slowdown_gives_every_model_its_own_row_on_a_log_axis(tmp_path, monkeypatch):
    """Three models perfect on every graph (one curve on a shared axis) each keep a row of their own."""
    from tpurank.report import plots

    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: figs.setdefault(out.name, fig) and out)
    slow = {"random": [1.0, 3.2, 10.6], "lgbm": [1.0] * 3, "gnn": [1.0] * 3, "ensemble": [1.0, 1.0, 1.5]}
    plots.tile_slowdown(slow, tmp_path / "s.png", "tag")
    (ax,) = figs["s.png"].axes
    assert ax.get_xscale() == "log" and ax.get_xlim()[1] > 10.6
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [lb.split("\n")[0] for lb in labels] == list(slow)
    assert "perfect 3/3" in labels[1] and "perfect 2/3" in labels[3]
    fills = [p for p in ax.patches if p.get_fill()]
    assert len(fills) == 4 and len({p.get_facecolor() for p in fills}) == 4  # a colour per model
    baselines = sorted(round(p.get_path().vertices[:, 1].min(), 6) for p in fills)
    assert baselines == [0, 1, 2, 3]  # one row each: none hides another
