"""Baselines, the predict/train stages and the validation report, on the tiny synthetic dataset."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpurank import cli
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.data.dataset import discover
from tpurank.models.predictions import load_predictions
from tpurank.models.registry import get_model
from tpurank.models.untrained import heuristic_costs, random_costs
from tpurank.prepare.cache import PreparedGraph, iter_prepared
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
    assert "up to date" in capsys.readouterr().err  # the stage's step record, or each collection's
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
    # Kaggle's real-data scores sit in their own block below our table, never as a row of it
    ours = report[report.index("## Our scores") : report.index("## Reference")]
    table_rows = [ln.split(" | ")[0].strip("| ") for ln in ours.splitlines() if ln.startswith("| ")]
    assert table_rows == ["model", "random", "heuristic"]
    assert "0.731" not in report and "best public" not in report
    assert "## Reference: Kaggle leaderboard scores on the REAL data (not ours)" in report
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


@pytest.mark.parametrize(
    ("graphs", "on_subset", "says"),
    [
        (0, 0, "No layout graph was scored"),
        (
            4,
            0,
            "No graph of this data is in the official subsets: all configs of every graph scored (4 layout",
        ),
        (4, 4, "Every layout graph (4) scored on its official subset"),
        (4, 1, "1 of 4 layout graphs scored on their official subsets; the other 3, not in the subsets,"),
    ],
)
def test_the_subsets_sentence_says_what_was_scored(graphs, on_subset, says):
    from tpurank.data.subsets import coverage_sentence

    assert coverage_sentence(graphs, on_subset).startswith(says)


def test_validate_with_official_subsets_says_how_many_graphs_they_covered(out_paths, tmp_path, capsys):
    """Subsets that list none of the data's graphs are no claim that graphs were scored on them; one
    listed graph is counted, and the report says why its figures differ from `tpurank runs`."""
    from tpurank.data.subsets import coverage

    common = _common(out_paths)
    assert cli.main(["predict", "--model", "heuristic", "--split", "valid", *common]) == 0
    valid = discover(out_paths.npz, splits=["valid"])
    layout = [f for f in valid if f.collection == "layout:xla:random"]
    n_layout = sum(f.collection.startswith("layout:") for f in valid)
    subsets = tmp_path / "eval_indices"
    subsets.mkdir()
    (subsets / "xla_random.json").write_text(json.dumps({"a graph of other data": [0, 1, 2]}))
    assert cli.main(["validate", "--official-subsets", str(subsets), *common]) == 0
    report = (out_paths.reports / "validation.md").read_text()
    sidecar = json.loads((out_paths.reports / "validation.json").read_text())
    assert "Layout graphs scored on the official subsets" not in report
    assert (
        f"No graph of this data is in the official subsets: all configs of every graph scored ({n_layout} "
        in report
    )
    assert "The figures are those of `tpurank runs` (and `submissions/valid_<model>.json`)." in report
    assert sidecar["official_subsets_coverage"] == {"layout_graphs": n_layout, "on_subset": 0}
    assert "validate: No graph of this data is in the official subsets" in capsys.readouterr().err

    (subsets / "xla_random.json").write_text(json.dumps({layout[0].stem: [0, 1, 2]}))
    assert cli.main(["validate", "--official-subsets", str(subsets), *common]) == 0
    report = (out_paths.reports / "validation.md").read_text()
    assert (
        f"1 of {n_layout} layout graphs scored on their official subsets; the other {n_layout - 1}" in report
    )
    assert "score every config instead: their layout and overall figures differ from these" in report
    rows = [{"id": "a", "collection": "layout:xla:random", "subset": True}] * 2  # two models, one graph
    assert coverage([*rows, {"id": "t", "collection": "tile:xla", "subset": False}]) == (1, 1)


def test_stage_errors_are_one_line(out_paths, sample_root, tmp_path, capsys):
    common = _common(out_paths)
    assert cli.main(["validate", *common]) == 1  # no valid CSV yet
    assert (
        cli.main(
            [
                "predict",
                "--model",
                "heuristic",
                "--split",
                "test",
                "--data-dir",
                str(sample_root),
                "--out-dir",
                str(tmp_path),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2
    assert "no valid_<model>.csv" in err[0]
    assert "884 have no file" in err[1] and "--partial" in err[1]


def test_the_ensemble_row_is_in_sample_with_the_cross_fitted_one_beside_it(tmp_path):
    from tpurank.validate.stage import CROSS_FITTED, IN_SAMPLE, cross_fitted, markdown, score_rows

    paths = Paths(data=tmp_path / "data", out=tmp_path / "out")
    crossed = {"tile:xla": 0.8, "layout:xla:random": 0.3}
    for c, score in crossed.items():
        f = paths.model_dir("ensemble", c) / "weights.json"
        f.parent.mkdir(parents=True)
        rec = {
            "collection": c,
            "members": ["lgbm", "gnn"],
            "weights": [0.5, 0.5],
            "normalize": "rank",
            "valid_score": 0.9,
            "cross_fit": {"score": score},
        }
        f.write_text(json.dumps(rec))
    got = cross_fitted(paths)
    assert got == {**crossed, "overall": pytest.approx(0.55)}  # the mean of the collections fitted
    table = {"gnn": {"tile:xla": 0.7, "overall": 0.7}, "ensemble": {"tile:xla": 0.9, "overall": 0.9}}
    rows = score_rows(table, got)
    assert list(rows) == ["gnn", IN_SAMPLE, CROSS_FITTED] and rows[CROSS_FITTED] is got
    assert list(score_rows(table, {})) == ["gnn", "ensemble"]  # no weights.json: one row, as scored
    text = markdown(rows, {}, {}, None, paths.data, synthetic=None)
    assert text.startswith("# Validation report: REAL data") and "**REAL DATA**" in text
    lines = text.splitlines()
    i = lines.index(f"| {IN_SAMPLE} | 0.9000 | - | - | - | - | 0.9000 |")
    assert lines[i + 1] == f"| {CROSS_FITTED} | 0.8000 | - | 0.3000 | - | - | 0.5500 |"
    # a collection without a cross-fitted score (fewer than 2 graphs): no overall claimed
    (paths.model_dir("ensemble", "layout:nlp:random") / "weights.json").parent.mkdir(parents=True)
    rec["collection"], rec["cross_fit"] = "layout:nlp:random", {"score": None, "why": "1 valid graph(s)"}
    (paths.model_dir("ensemble", "layout:nlp:random") / "weights.json").write_text(json.dumps(rec))
    assert cross_fitted(paths)["overall"] is None


def test_the_reference_block_states_only_the_documented_scores_with_links():
    """Every score of the Reference block is one the facts page states (none invented), each with a
    source link, and the block says our scores are not comparable."""
    import re
    from pathlib import Path

    from tpurank.report import reference

    for synthetic in (True, False):
        block = "\n".join(reference.markdown(synthetic))
        assert block.startswith(reference.TITLE) and "REAL" in reference.TITLE
        assert ("SYNTHETIC" in block) == synthetic
    rows = [ln for ln in block.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert [r.split(" | ")[0].removeprefix("| ") for r in rows] == [
        "1st place, best ensemble",
        "1st place, best single model",
        "official baseline",
    ]
    assert all("](https://" in r for r in rows)
    facts = Path(__file__).resolve().parents[3] / "shared" / "docs" / "tpugraphs.md"
    if not facts.exists():
        pytest.skip(f"{facts} absent: the scores cannot be checked against it")
    stated = facts.read_text()
    assert "1st 0.714 best single model, 0.736 best ensemble" in stated
    assert "mean layout tau about 0.30" in stated
    for r in reference.REFERENCES:
        number = re.search(r"\d\.\d+", r.score).group()
        assert number in stated, (r.who, number)
