"""The ensemble's weights are fitted on validation; the cross-fitted estimate
(weights fitted on one half of the valid graphs, scored on the other, swapped) is saved and
reported beside the in-sample score."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.models.ensemble import (
    cross_fit,
    fit_weights,
    halves,
    train,
    valid_truth,
)
from tpurank.models.predictions import save_predictions
from tpurank.report.ensemble_section import report_lines, summary_note
from tpurank.validate.stage import markdown

LAYOUT = "layout:xla:default"


def test_halves_split_every_graph_once_seeded() -> None:
    ids = [f"g{i}" for i in range(7)]
    a, b = halves(ids, seed=3)
    assert len(a) == 4 and len(b) == 3 and sorted(a + b) == sorted(ids)
    assert halves(list(reversed(ids)), seed=3) == (a, b)  # the order given does not matter
    assert any(halves(ids, seed=s) != (a, b) for s in range(10))


def test_cross_fit_by_hand() -> None:
    """Member A ranks the graphs of half 0 perfectly and those of half 1 backwards; member B the
    other way round. Weights fitted on half 0 lean to A (0.6/0.4: the most even of the perfect ones)
    and rank half 1 backwards: tau -1; swapped, the same: the cross-fitted score is -1. In-sample,
    the fitted weights score 0.2 (g0..g4 tau 1, 1, 1, -1, -1) although nothing generalises. (Runtimes
    fall with the config index, so equal weights, a constant cost kept in index order, score -1.)"""
    runtime = np.array([5.0, 4.0, 3.0, 2.0, 1.0])
    ids = [f"layout:xla:default:g{i}" for i in range(5)]
    first, second = halves(ids, seed=0)
    assert (len(first), len(second)) == (3, 2)
    truth = {g: runtime for g in ids}
    a = {g: runtime if g in first else -runtime for g in ids}
    b = {g: -runtime if g in first else runtime for g in ids}
    out = cross_fit(LAYOUT, [a, b], truth, "rank", seed=0)
    assert out["halves"] == [first, second]
    assert out["weights"] == [pytest.approx([0.6, 0.4]), pytest.approx([0.4, 0.6])]
    assert out["half_scores"] == [pytest.approx(-1.0), pytest.approx(-1.0)]
    assert out["score"] == pytest.approx(-1.0)
    w, score = fit_weights(LAYOUT, [a, b], truth, "rank")
    np.testing.assert_allclose(w, [0.6, 0.4])  # the 3-graph half wins in-sample
    assert score == pytest.approx((3 - 2) / 5)
    # halves of different sizes: every graph's out-of-half score counts once (pooled mean)
    c = {g: runtime for g in ids}  # a perfect member: fitted weights keep it on both halves
    noisy = {g: runtime[[1, 0, 2, 3, 4]] for g in ids}  # one swapped pair: tau 0.8
    out = cross_fit(LAYOUT, [c, noisy], truth, "rank", seed=0)
    assert out["score"] == pytest.approx(1.0) and out["half_scores"] == [pytest.approx(1.0)] * 2
    assert cross_fit(LAYOUT, [a, b], {ids[0]: runtime}, "rank", seed=0)["score"] is None


def test_train_saves_and_report_shows_the_cross_fitted_estimate(tiny_paths: Paths, tmp_path: Path) -> None:
    """On the tiny data's valid graphs: the saved estimate is cross_fit's, and the report says the
    weights were fitted on validation and prints both scores."""
    rng = np.random.default_rng(1)
    cfg = Config()
    cfg.ensemble.models = ["cf_noisy", "cf_rand"]
    truth = valid_truth(tiny_paths, LAYOUT)
    assert len(truth) >= 2, "tiny data needs two valid graphs for a cross-fit"
    noisy = {g: np.log(rt + 1) + rng.normal(0, 0.05, len(rt)) for g, rt in truth.items()}
    rand = {g: rng.random(len(rt)) for g, rt in truth.items()}
    save_predictions(tiny_paths.prediction_file("cf_noisy", "valid"), noisy)
    save_predictions(tiny_paths.prediction_file("cf_rand", "valid"), rand)
    train(tiny_paths, cfg, LAYOUT)
    rec = json.loads((tiny_paths.model_dir("ensemble", LAYOUT) / "weights.json").read_text())
    expected = cross_fit(LAYOUT, [noisy, rand], truth, "rank", cfg.seed)
    assert rec["fitted_on"] == "valid"
    assert rec["cross_fit"]["score"] == pytest.approx(expected["score"])
    assert rec["cross_fit"]["weights"] == expected["weights"]
    lines = report_lines(tiny_paths)
    row = next(line for line in lines if line.startswith(f"| {LAYOUT} |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[2] == f"{rec['valid_score']:.4f}" and cells[3] == f"{expected['score']:.4f}"
    note = summary_note(tiny_paths)
    assert "in-sample" in note and f"xla:default {expected['score']:.4f}" in note
    text = markdown({}, {}, {}, None, tmp_path, ensemble=lines)
    assert "## Ensemble: weights fitted on validation" in text and "in-sample" in text
