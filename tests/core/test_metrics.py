"""Metric values against hand-worked examples, scipy and brute force on random data."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import kendalltau

from tpurank.core.metrics import (
    graph_metrics,
    kendall_tau,
    normalized_runtime,
    order_from_costs,
    overall_score,
    pair_accuracy,
    rank_from_order,
    slowdown_at_k,
    summarize,
    tile_score,
)


def test_rank_and_order_round_trip():
    order = np.array([2, 0, 3, 1])
    assert rank_from_order(order).tolist() == [1, 3, 0, 2]
    assert order_from_costs(np.array([0.5, 0.1, 0.5, 0.0])).tolist() == [3, 1, 0, 2]  # tie: index order


def test_kendall_tau_hand_worked():
    # perfect, reversed, and one swapped pair out of 6: (C - D) / 6 = (5 - 1) / 6
    assert kendall_tau(np.arange(4), np.array([1, 2, 3, 4])) == pytest.approx(1.0)
    assert kendall_tau(np.arange(4)[::-1], np.array([1, 2, 3, 4])) == pytest.approx(-1.0)
    assert kendall_tau(np.arange(4), np.array([1, 3, 2, 4])) == pytest.approx(4 / 6)


def test_ties_in_runtime_follow_tau_b():
    # runtimes 1, 1, 2 ranked 0, 1, 2: 3 pairs, 1 tied in runtime, C = 2, D = 0 -> 2 / sqrt(2 * 3)
    rt = np.array([1.0, 1.0, 2.0])
    assert kendall_tau(np.arange(3), rt) == pytest.approx(2 / math.sqrt(6))
    assert pair_accuracy(np.arange(3), rt) == pytest.approx(1.0)
    assert pair_accuracy(np.array([2, 0, 1]), rt) == pytest.approx(0.0)


def test_undefined_tau_is_nan():
    assert math.isnan(kendall_tau(np.arange(3), np.array([5, 5, 5])))
    assert math.isnan(kendall_tau(np.arange(1), np.array([5])))
    assert math.isnan(pair_accuracy(np.arange(3), np.array([5, 5, 5])))


@pytest.mark.parametrize("seed", range(5))
def test_tau_and_pair_accuracy_on_random_data(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 40))
    runtime = rng.integers(0, n // 2 + 2, n).astype(float)  # many ties
    order = rng.permutation(n)
    rank = rank_from_order(order)
    assert kendall_tau(order, runtime) == pytest.approx(kendalltau(rank, runtime).statistic)
    good = bad = 0
    for i, j in itertools.combinations(range(n), 2):
        if runtime[i] != runtime[j]:
            if (rank[i] < rank[j]) == (runtime[i] < runtime[j]):
                good += 1
            else:
                bad += 1
    assert pair_accuracy(order, runtime) == pytest.approx(good / (good + bad))


def test_tile_score_hand_worked():
    y = np.array([5.0, 3.0, 4.0, 1.0, 2.0, 6.0])
    assert tile_score(np.array([0, 1, 2, 3, 4]), y) == pytest.approx(1.0)  # best (index 3) in the top 5
    assert tile_score(np.array([0, 1, 2, 5, 4]), y) == pytest.approx(0.0)  # best of top 5 is 2 = 2x the min
    assert tile_score(np.array([5, 0, 2, 1, 4, 3]), y) == pytest.approx(0.0)  # only the first 5 count
    assert slowdown_at_k(np.array([2, 3]), y, 1) == pytest.approx(4.0)
    assert tile_score(np.array([0, 1]), np.array([3.0, 1.0])) == pytest.approx(1.0)  # < 5 configs: all


def test_normalized_runtime():
    assert normalized_runtime(np.array([10, 20]), np.array([10, 40])).tolist() == [1.0, 0.5]


def test_graph_metrics_by_kind():
    y = np.array([3.0, 1.0, 2.0])
    tile = graph_metrics("tile:xla", np.array([0, 2, 1]), y)
    assert tile["score"] == pytest.approx(1.0) and "pair_accuracy" not in tile
    layout = graph_metrics("layout:nlp:random", np.array([1, 2, 0]), y)
    assert layout["score"] == pytest.approx(1.0) and layout["pair_accuracy"] == pytest.approx(1.0)
    assert layout["slowdown@1"] == pytest.approx(1.0)


def test_summarize_and_overall():
    rows = [
        {"collection": "tile:xla", "score": 0.9, "slowdown@1": 1.2, "slowdown@5": 1.1},
        {"collection": "tile:xla", "score": 0.7, "slowdown@1": 1.4, "slowdown@5": 1.3},
        {
            "collection": "layout:xla:default",
            "score": 0.5,
            "pair_accuracy": 0.8,
            "slowdown@1": 1,
            "slowdown@5": 1,
        },
        {
            "collection": "layout:xla:default",
            "score": math.nan,
            "pair_accuracy": math.nan,
            "slowdown@1": 1,
            "slowdown@5": 1,
        },
    ]
    s = summarize(rows)
    assert list(s) == ["tile:xla", "layout:xla:default"]
    assert s["tile:xla"]["score"] == pytest.approx(0.8) and s["tile:xla"]["graphs"] == 2
    assert s["layout:xla:default"]["score"] == pytest.approx(0.5)
    assert s["layout:xla:default"]["undefined"] == 1
    assert overall_score({"tile:xla": 0.8, "layout:xla:default": 0.5}) == pytest.approx(0.65)
    assert math.isnan(overall_score({}))
