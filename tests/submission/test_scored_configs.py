"""Layout graphs are scored on at most 1,000 configs, and neural rankers score only those on valid."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from helpers import chain_layout_graph

from tpurank.core.errors import TpurankError
from tpurank.core.normalize import normalize
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.npz import save_graph
from tpurank.data.subsets import EVAL_MAX_CONFIGS, scored_configs, spread_configs
from tpurank.gnn.data import load_split
from tpurank.gnn.predict import scored_rows
from tpurank.models.ensemble import collection_score
from tpurank.models.predictions import save_predictions, unscored_subset
from tpurank.submission.format import ExpectedGraph, render
from tpurank.validate.stage import rank_examples


@pytest.mark.parametrize(
    ("n", "limit", "kept"), [(5, 10, 5), (10, 10, 10), (11, 10, 10), (25_000, 1000, 1000)]
)
def test_spread_configs_keeps_at_most_the_limit_spread_evenly(n: int, limit: int, kept: int) -> None:
    rows = spread_configs(n, limit)
    assert len(rows) == kept and rows[0] == 0 and rows[-1] == n - 1
    assert (np.diff(rows) > 0).all()  # distinct, sorted


def test_only_big_layout_graphs_are_scored_on_a_spread() -> None:
    assert scored_configs("tile:xla", 50_000) is None
    assert scored_configs("layout:xla:random", EVAL_MAX_CONFIGS) is None
    rows = scored_configs("layout:nlp:default", 90_529)
    assert rows is not None and len(rows) == EVAL_MAX_CONFIGS


def test_a_neural_ranker_scores_only_the_scored_configs_of_a_big_valid_graph(tiny_paths) -> None:
    g = load_split(tiny_paths, "layout:xla:random", "valid", progress=False)[0]
    last = g.num_unique - 1
    want = np.union1d(spread_configs(2_500), [1, 3, 5])  # the spread and the official subset
    inverse = np.full(2_500, last)  # every other config is a copy of the last stored row
    inverse[want] = np.arange(len(want)) % last
    g = replace(g, inverse=inverse, eval_rows=np.array([1, 3, 5]))
    rows = scored_rows(g, "layout:xla:random", "valid")
    np.testing.assert_array_equal(rows, np.arange(min(last, len(want))))
    np.testing.assert_array_equal(scored_rows(g, "layout:xla:random", "test"), np.arange(g.num_unique))


def test_a_small_valid_graph_is_scored_whole(tiny_paths) -> None:
    g = load_split(tiny_paths, "layout:xla:random", "valid", progress=False)[0]
    np.testing.assert_array_equal(scored_rows(g, "layout:xla:random", "valid"), np.arange(g.num_unique))


def test_normalize_keeps_unscored_configs_out() -> None:
    cost = np.array([3.0, np.nan, 1.0, 2.0, np.nan])
    for how in ("rank", "zscore"):
        out = normalize(cost, how)
        assert np.isnan(out[[1, 4]]).all()
        np.testing.assert_allclose(out[[0, 2, 3]], normalize(cost[[0, 2, 3]], how))
    np.testing.assert_allclose(normalize(np.array([3.0, 1.0, 2.0]), "rank"), [1.0, 0.0, 0.5])


def test_the_valid_csv_lists_unscored_configs_last_and_the_test_csv_refuses_them() -> None:
    e = ExpectedGraph("layout:xla:random:g", "layout:xla:random", num_configs=4)
    costs = {e.id: np.array([np.nan, 2.0, 1.0, np.nan])}
    text = render(costs, [e], "v.csv", unscored=True)
    assert text.splitlines()[1] == "layout:xla:random:g,2;1;0;3"
    with pytest.raises(TpurankError, match="NaN or infinite"):
        render(costs, [e], "t.csv")
    with pytest.raises(TpurankError, match="NaN or infinite"):  # infinite is never a cost
        render({e.id: np.array([np.inf, 2.0, 1.0, np.nan])}, [e], "v.csv", unscored=True)


def test_the_ensemble_scores_a_big_graph_on_its_scored_configs() -> None:
    n = 3_000
    rng = np.random.default_rng(0)
    runtime = rng.random(n) + 1
    cost = np.full(n, np.nan)
    keep = spread_configs(n)
    cost[keep] = runtime[keep]  # perfect on the scored configs, nothing elsewhere
    assert collection_score("layout:xla:random", {"g": cost}, {"g": runtime}) == pytest.approx(1.0)


def test_validation_refuses_a_subset_the_predictions_left_unscored(tmp_path) -> None:
    path = tmp_path / "valid.npz"
    cost = np.full(3_000, np.nan)
    cost[spread_configs(3_000)] = 1.0
    save_predictions(path, {"layout:xla:default:g": cost})
    scored = {"layout:xla:default": {"g": spread_configs(3_000)[:10]}}
    assert unscored_subset(path, scored) is None
    missing = {"layout:xla:default": {"g": np.array([1, 2, 3])}}  # not among the spread configs
    assert "layout:xla:default:g: configs of its official subset were not scored" in unscored_subset(
        path, missing
    )
    assert unscored_subset(tmp_path / "absent.npz", missing) is None


def test_the_reports_rank_scatter_draws_the_scored_configs(tmp_path) -> None:
    n, rng = 1_500, np.random.default_rng(1)
    g = chain_layout_graph(rng.permutation(n) + 100, rng)
    save_graph(tmp_path / "data" / NPZ_SUBDIR / "layout" / "xla" / "default" / "valid" / "big.npz", g)
    paths = Paths(data=tmp_path / "data", out=tmp_path / "out")
    order = list(np.argsort(g.config_runtime))  # the true order: every scored config on the diagonal
    row = {"id": "layout:xla:default:big", "collection": "layout:xla:default", "score": 1.0}
    [(_, predicted, true)] = rank_examples(paths, {row["id"]: order}, [row])
    assert len(predicted) == len(true) == EVAL_MAX_CONFIGS
    np.testing.assert_array_equal(predicted, true)
