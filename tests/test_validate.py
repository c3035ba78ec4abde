"""Baselines, the predict/train stages and the validation report, on the tiny synthetic dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpurank import cli
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.data.dataset import discover
from tpurank.prepare.cache import PreparedGraph, iter_prepared
from tpurank.rankers.baselines import heuristic_costs, random_costs
from tpurank.rankers.predictions import load_predictions
from tpurank.rankers.registry import get_model
from tpurank.submission.check import check_submission_file
from tpurank.submission.score import score_csv


@pytest.fixture()
def out_paths(tiny_paths, tmp_path):
    """A fresh output folder that sees the shared tiny prepared cache (read-only use)."""
    paths = Paths(data=tiny_paths.data, out=tmp_path / "out")
    paths.out.mkdir()
    (paths.out / "features").symlink_to(tiny_paths.features, target_is_directory=True)
    return paths


def _common(paths: Paths) -> list[str]:
    return ["--data-dir", str(paths.data), "--out-dir", str(paths.out)]


def _graph(kind: str, configs: np.ndarray, inverse: list[int]) -> PreparedGraph:
    u = len(configs)
    return PreparedGraph(
        id=f"{'tile:xla' if kind == 'tile' else 'layout:xla:random'}:g",
        collection="tile:xla" if kind == "tile" else "layout:xla:random",
        split="valid",
        stem="g",
        node_feat=np.zeros((1, 4), np.float32),
        node_feat_raw=np.zeros((1, 140), np.float32),
        node_opcode=np.zeros(1, np.uint8),
        edge_index=np.zeros((0, 2), np.int32),
        node_map=np.zeros(1, np.int64),
        config_nodes=np.zeros(0 if kind == "tile" else configs.shape[1], np.int32),
        configs=configs,
        runtime_min=np.ones(u),
        runtime_mean=np.ones(u),
        count=np.bincount(inverse, minlength=u).astype(np.int32),
        inverse=np.asarray(inverse, np.int32),
        config_runtime=np.ones(len(inverse)),
        is_test=False,
    )


def test_heuristic_rules_and_duplicates():
    cfg = np.full((3, 2, 18), -1, np.int8)
    cfg[1, 0, 3] = 2  # one node changed
    cfg[2, :, 0] = 1  # both nodes changed
    g = _graph("layout", cfg, [2, 0, 1, 0, 2])
    assert heuristic_costs(g).tolist() == [2, 0, 1, 0, 2]
    tile = np.zeros((3, 24), np.float32)
    tile[:, 15] = [10, 200, 10]  # output tile products
    tile[:, 7] = [4, 1, 8]  # kernel tile products break the tie between rows 0 and 2
    costs = heuristic_costs(_graph("tile", tile, [0, 1, 2, 1]))
    assert np.argsort(costs, kind="stable").tolist() == [1, 3, 2, 0]


def test_random_baseline_is_seeded_and_keeps_duplicates_equal():
    g = _graph("layout", np.full((4, 1, 18), -1, np.int8), [0, 1, 2, 3, 1, 1])
    a, b, c = random_costs(g, 0), random_costs(g, 0), random_costs(g, 1)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a[1] == a[4] == a[5] and len(set(a[[0, 1, 2, 3]])) == 4


def test_baselines_on_the_prepared_cache_give_duplicates_equal_costs(tiny_paths):
    checked = 0
    for name in ("heuristic", "random"):
        model = get_model(name)
        for collection, split in (("tile:xla", "train"), ("layout:nlp:random", "valid")):
            preds = model.predict(tiny_paths, Config(), collection, split)
            graphs = list(iter_prepared(tiny_paths.prepared, collection, split))
            assert sorted(preds) == sorted(g.id for g in graphs) and graphs
            for g in graphs:
                costs = preds[g.id]
                assert len(costs) == g.num_configs
                for row in np.flatnonzero(g.count > 1)[:5]:
                    assert len(set(costs[g.inverse == row])) == 1
                    checked += 1
    assert checked > 0  # the tiny data does hold duplicate configs


def test_predict_train_validate_end_to_end(out_paths, capsys):
    common = _common(out_paths)
    assert cli.main(["train", "--model", "random", *common]) == 0
    for model in ("random", "heuristic"):
        for split in ("valid", "test"):
            assert cli.main(["predict", "--model", model, "--split", split, *common]) == 0
    subs = out_paths.submissions
    test_csv = subs / "test_heuristic.csv"
    assert check_submission_file(test_csv, out_paths) == []
    preds = load_predictions(out_paths.prediction_file("heuristic", "test"))
    assert len(preds) == len(test_csv.read_text().splitlines()) - 1
    # the sidecar's scores are those of the score stage on the CSV it sits beside
    side = json.loads((subs / "valid_heuristic.json").read_text())
    _, summary = score_csv(subs / "valid_heuristic.csv", out_paths, "valid")
    for c, s in summary.items():
        assert side["scores"][c] == pytest.approx(s["score"])
    assert side["models"] == ["heuristic"] and side["complete"] and "data_fingerprint" in side
    # resumable: a second run keeps the predictions
    pred_file = out_paths.prediction_file("random", "valid")
    before = pred_file.stat().st_mtime_ns
    capsys.readouterr()
    assert cli.main(["predict", "--model", "random", "--split", "valid", *common]) == 0
    assert "up to date, kept" in capsys.readouterr().err
    assert pred_file.stat().st_mtime_ns == before
    # a changed seed changes the random baseline's stamp, so it is recomputed
    assert cli.main(["predict", "--model", "random", "--split", "valid", "--set", "seed=3", *common]) == 0
    assert pred_file.stat().st_mtime_ns != before

    assert cli.main(["validate", *common]) == 0
    report = (out_paths.reports / "validation.md").read_text()
    sidecar = json.loads((out_paths.reports / "validation.json").read_text())
    for model in ("random", "heuristic"):
        overall = sidecar["scores"][model]["overall"]
        assert f"| {model} | " in report and f"{overall:.4f}" in report
    assert sidecar["scores"]["heuristic"]["overall"] == pytest.approx(side["scores"]["overall"])
    assert "*best public (spec, real data)* | 0.9750" in report
    # tiny synthetic data: said in the title and next to the numbers
    assert report.startswith("# Validation report: SYNTHETIC data ('tiny' scale)")
    assert "**SYNTHETIC DATA**" in report and sidecar["synthetic_scale"] == "tiny"
    assert f"model {sidecar['rank_plot_model']}](plots/rank_scatter.png)" in report
    assert "![training curves](plots/training_curves.png)" in report
    for name in ("collection_scores", "tau_distribution", "rank_scatter", "tile_slowdown", "training_curves"):
        png = out_paths.reports / "plots" / f"{name}.png"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    graphs = (out_paths.reports / "validation_graphs.csv").read_text().splitlines()
    assert len(graphs) == 1 + 2 * len(discover(out_paths.npz, splits=["valid"]))


def test_stage_errors_are_one_line(out_paths, sample_root, tmp_path, capsys):
    common = _common(out_paths)
    assert cli.main(["validate", *common]) == 1  # no valid CSV yet
    assert cli.main(["predict", "--model", "heuristic", "--split", "test", "--data-dir", str(sample_root),
                     "--out-dir", str(tmp_path)]) == 1  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "no valid_<model>.csv" in err[0]
    assert "884 have no file" in err[1] and "--partial" in err[1]


def test_plots_say_synthetic_name_the_model_and_keep_references_inside(tmp_path, monkeypatch):
    """Every figure's title carries the tag; reference lines lie inside the axes, labelled as real data."""
    from tpurank.report import plots

    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: figs.setdefault(out.name, fig) and out)
    tag = "SYNTHETIC data (tiny): not Kaggle scores"
    cols = ["tile:xla", "layout:xla:default", "overall"]
    scores = {"gnn": {"tile:xla": 0.2, "layout:xla:default": -0.1, "overall": 0.05}}
    plots.collection_scores(
        scores, {"tile:xla": 0.975, "layout:xla:default": 0.46}, cols, tmp_path / "a.png", tag
    )
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
    assert "best public (real TpuGraphs data)" in legend
    (lines,) = [c for c in ax.collections if c.get_label() == "best public (real TpuGraphs data)"]
    lo, hi = ax.get_ylim()
    x0, x1 = ax.get_xlim()
    for seg in lines.get_segments():
        assert lo < seg[0][1] < hi and x0 < seg[0][0] and seg[1][0] < x1


@pytest.mark.parametrize("models", [0, 2])
def test_training_curves_legend_or_a_note_without_warnings(tmp_path, monkeypatch, models):
    """A report without a metrics.csv (LightGBM alone) says so instead of an empty legend's warning."""
    import warnings

    from tpurank.report import plots

    figs = {}
    monkeypatch.setattr(plots, "_save", lambda fig, out: figs.setdefault(out.name, fig) and out)
    curves = {
        f"gnn c{i}": {"step": [10, 20], "valid_score": [0.1, 0.2], "lr": [1e-3, 0.0]} for i in range(models)
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        plots.training_curves(curves, tmp_path / "t.png", "tag")
    ax = figs["t.png"].axes[0]
    if models:
        assert [t.get_text() for t in ax.get_legend().get_texts()] == list(curves)
    else:
        assert ax.get_legend() is None
        assert [t.get_text() for t in ax.texts] == ["no metrics.csv among the models"]
