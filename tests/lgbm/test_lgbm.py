"""LightGBM rankers: query splitting, relevance grades, and training / reloading on tiny data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from tpurank.core.errors import TpurankError
from tpurank.lgbm.queries import LIGHTGBM_MAX_QUERY_ROWS, grades, label_gain, query_labels, split_queries


def test_split_queries_respects_the_limit_and_keeps_every_row_once():
    graph = np.array(["a"] * 25_000 + ["b"] * 3 + ["c"] * 10_000 + ["a"] * 2)  # "a" is not contiguous
    q = split_queries(graph, LIGHTGBM_MAX_QUERY_ROWS, seed=1)
    assert q.sizes.max() <= LIGHTGBM_MAX_QUERY_ROWS
    assert q.sizes.tolist() == [8334, 8334, 8334, 3, 10_000]  # 25,002 rows of "a" in 3 near-equal parts
    assert np.array_equal(np.sort(q.order), np.arange(len(graph)))
    start = 0
    for size in q.sizes:  # no query mixes graphs
        assert len(set(graph[q.order[start : start + size]])) == 1
        start += size
    again = split_queries(graph, LIGHTGBM_MAX_QUERY_ROWS, seed=1)
    assert np.array_equal(q.order, again.order)  # seeded: reproducible
    small = split_queries(graph, 4_000, seed=1)
    assert small.sizes.max() <= 4_000 and small.sizes.sum() == len(graph)


def test_split_queries_rejects_limits_lightgbm_cannot_take():
    with pytest.raises(TpurankError, match="max_query_rows"):
        split_queries(np.array(["a"]), 10_001)


def test_grades_fastest_gets_the_top_grade_and_ties_share():
    assert grades(np.array([5.0, 1.0, 3.0, 3.0]), levels=4).tolist() == [0, 3, 2, 2]
    g = grades(np.arange(1000, dtype=float)[::-1], levels=31)
    assert g.min() == 0 and g.max() == 30 and g[-1] == 30 and g[0] == 0
    assert np.all(np.diff(g) >= 0)  # slower runtime never gets a higher grade
    labels = query_labels(np.array([2.0, 1.0, 9.0, 8.0, 7.0]), np.array([2, 3]), levels=2)
    assert labels.tolist() == [0, 1, 0, 1, 1]  # query 2: ranks 2, 1, 0 -> bins [0, 1.5) and [1.5, 3)
    assert label_gain(3, "exp") == [0.0, 1.0, 3.0] and label_gain(3, "linear") == [0.0, 1.0, 2.0]
    with pytest.raises(TpurankError):
        grades(np.ones(3), levels=32)


# ---- training on tiny synthetic data -------------------------------------------------------------

TINY_COLLECTIONS = ("tile:xla", "layout:xla:random", "layout:nlp:default")


@pytest.fixture(scope="module")
def lgbm_paths(tiny_paths, tmp_path_factory):
    """Own out folder (models, feature tables) over the shared tiny prepared cache."""
    from tpurank.core.paths import Paths

    out = tmp_path_factory.mktemp("lgbm-out")
    (out / "features").mkdir()
    (out / "features" / "prepared").symlink_to(tiny_paths.prepared, target_is_directory=True)
    return Paths(data=tiny_paths.data, out=out)


def tiny_config():
    from tpurank.core.config import Config

    cfg = Config()
    cfg.lgbm.num_boost_round = 60
    cfg.lgbm.early_stopping_rounds = 20
    cfg.lgbm.min_data_in_leaf = 5
    cfg.lgbm.num_leaves = 15
    cfg.lgbm.threads = 1  # OpenMP threads stall when test workers share the cores
    return cfg


def valid_score(paths, collection: str, costs: dict[str, np.ndarray]) -> float:
    """Mean competition score of per-original-config costs on the valid split (each config's own
    measured runtime, as the validation report scores it)."""
    from tpurank.core.metrics import graph_metrics, mean_score, order_from_costs
    from tpurank.prepare.cache import iter_prepared

    scores = [
        graph_metrics(collection, order_from_costs(costs[g.id]), g.config_runtime)["score"]
        for g in iter_prepared(paths.prepared, collection, "valid")
    ]
    return mean_score(scores)[0]


@pytest.mark.parametrize("collection", TINY_COLLECTIONS)
def test_lgbm_beats_random_on_tiny_valid_and_reloads_identically(lgbm_paths, collection):
    from tpurank.features import io as tab_io
    from tpurank.features.stage import build_features
    from tpurank.lgbm import model
    from tpurank.prepare.cache import iter_prepared

    cfg = tiny_config().for_collection(collection)
    build_features(lgbm_paths, cfg, [collection], ["train", "valid"])
    train_df = tab_io.read_table(lgbm_paths, collection, "train")
    valid_df = tab_io.read_table(lgbm_paths, collection, "valid")
    valid = model.ValidData(
        table=valid_df,
        inverse=tab_io.read_per_graph(lgbm_paths, collection, "valid", "inverse"),
        runtime=tab_io.read_per_graph(lgbm_paths, collection, "valid", "runtime"),
    )
    booster, info = model.fit(train_df, valid, cfg, collection)
    model.save(lgbm_paths, cfg, collection, booster, info)

    costs = model.predict(lgbm_paths, cfg, collection, "valid")
    graphs = list(iter_prepared(lgbm_paths.prepared, collection, "valid"))
    assert sorted(costs) == sorted(g.id for g in graphs)
    assert all(len(costs[g.id]) == g.num_configs for g in graphs)

    # the reloaded model scores exactly as the trained one
    in_memory = -booster.predict(valid_df[tab_io.feature_columns(valid_df)].to_numpy(np.float32))
    for g in graphs:
        sel = (valid_df["graph"] == g.id).to_numpy()
        unique_cost = np.empty(g.num_unique)
        unique_cost[valid_df["row"].to_numpy()[sel]] = in_memory[sel]
        np.testing.assert_allclose(costs[g.id], unique_cost[g.inverse].astype(np.float32), rtol=1e-6)

    ours = valid_score(lgbm_paths, collection, costs)
    # early stopping watched the very score the validation report computes
    assert info["valid_score"] == pytest.approx(ours, abs=1e-6)
    rng = np.random.default_rng(0)
    random_scores = [
        valid_score(lgbm_paths, collection, {g.id: rng.random(g.num_configs) for g in graphs})
        for _ in range(20)
    ]
    print(
        f"{collection}: lgbm {ours:.4f} vs random {np.mean(random_scores):.4f} (valid {info['valid_score']})"
    )
    # beats the expected random score by more than two standard errors of its 20-draw estimate
    assert ours > np.mean(random_scores) + 2 * np.std(random_scores) / np.sqrt(20), (ours, random_scores)

    out = lgbm_paths.model_dir("lgbm", collection)
    for name in ("model.txt", "features.json", "config.json", "importance.csv", "provenance.json"):
        assert (out / name).exists(), name
    importance = (out / "importance.csv").read_text().splitlines()
    assert importance[0] == "feature,gain,split" and len(importance) == info["features"] + 1


def test_predict_without_or_with_a_damaged_model_is_a_clear_error(tmp_path):
    from tpurank.core.config import Config
    from tpurank.core.errors import DataError
    from tpurank.core.paths import Paths
    from tpurank.lgbm import model

    paths = Paths(data=tmp_path, out=tmp_path)
    with pytest.raises(TpurankError, match="no lgbm model; run `tpurank train --model lgbm`"):
        model.predict(paths, Config(), "tile:xla", "valid")
    out = paths.model_dir("lgbm", "tile:xla")
    out.mkdir(parents=True)
    (out / "model.txt").write_text("not a model\n")
    (out / "features.json").write_text("[]")
    with pytest.raises(
        TpurankError, match="provenance.json: missing or not JSON, so .*model.txt cannot be checked"
    ):
        model.predict(paths, Config(), "tile:xla", "valid")  # never handed to LightGBM unchecked
    from tpurank.core.identity import file_digest

    record = {"collection": "tile:xla", "model_digest": file_digest(out / "model.txt")}
    (out / "provenance.json").write_text(json.dumps(record))  # the file training wrote, yet no model
    with pytest.raises(DataError, match="model.txt: unreadable lgbm model"):
        model.predict(paths, Config(), "tile:xla", "valid")


def test_feature_matrix_is_the_frames_float32_rows_in_order():
    """Built column by column, the matrix equals pandas' own conversion, value for value."""
    import pandas as pd

    from tpurank.lgbm.validation import feature_matrix

    rng = np.random.default_rng(0)
    df = pd.DataFrame(
        {
            "graph": ["g"] * 50,
            "a": rng.normal(size=50),  # float64, rounded to float32
            "b": rng.normal(size=50).astype(np.float32),
            "c": rng.integers(-(2**30), 2**30, size=50).astype(np.int32),  # beyond float32's integers
        }
    )
    order = rng.permutation(50)[:40]
    x = feature_matrix(df, ["c", "a", "b"], order)
    expect = df[["c", "a", "b"]].to_numpy(np.float32)[order]
    assert x.dtype == np.float32 and x.flags.c_contiguous
    np.testing.assert_array_equal(x.view(np.uint32), expect.view(np.uint32))
