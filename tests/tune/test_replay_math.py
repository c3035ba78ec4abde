"""The pieces of the loop and of calibration that need no trained model: random search's exact
expectations, the measured-runtimes CSV, the bounded training rows and the measured query."""

from __future__ import annotations

import itertools
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpurank.core.errors import DataError, TpurankError
from tpurank.lgbm.training_rows import MIN_QUERY_ROWS, load, rows_to_keep, save
from tpurank.rank.calibrate import Calibration, measured_query
from tpurank.rank.candidates import Candidates
from tpurank.rank.measured import assign, read_measured
from tpurank.tune.replay import TOP_K, expected_random_best, expected_random_needed, top_k_errors


@pytest.mark.parametrize("n", [1, 2, 3, 5, 6])
def test_random_searchs_expected_best_is_the_mean_over_every_draw(n: int) -> None:
    runtime = np.array([5.0, 3.0, 9.0, 3.5, 7.0, 4.0])
    draws = [min(runtime[list(c)]) for c in itertools.combinations(range(6), n)]
    assert expected_random_best(runtime, n) == pytest.approx(np.mean(draws))


def test_random_searchs_expected_measurements_to_a_good_config_is_the_mean_over_every_order() -> None:
    runtime = np.array([100.0, 100.2, 103.0, 110.0, 100.4, 120.0])  # three within 0.5% of the best
    firsts = [
        next(i for i, p in enumerate(order, 1) if runtime[p] <= 100.5)
        for order in itertools.permutations(range(6))
    ]
    assert expected_random_needed(runtime) == pytest.approx(np.mean(firsts)) == pytest.approx(7 / 4)


def test_top_k_error_is_the_best_of_the_first_k_over_the_true_best_minus_one() -> None:
    runtime = np.arange(100.0, 120.0)  # the best: 100
    proposed = [110.0, 104.0, 119.0, 101.0, 108.0, 100.0, 103.0]  # seven proposals: none at K = 10
    model = np.array([105.0, *np.arange(119.0, 99.0, -1.0)[:19]])  # the model's order, best last
    e = top_k_errors(proposed, model, runtime, 100.0)
    assert set(e["tuner"]) == set(TOP_K) == {1, 5, 10}
    assert e["tuner"][1] == pytest.approx(0.10) and e["tuner"][5] == pytest.approx(0.01)
    assert e["tuner"][10] is None
    assert e["model"][1] == e["model"][5] == pytest.approx(0.05) and e["model"][10] == pytest.approx(0.05)
    for k in TOP_K:
        assert e["random"][k] == pytest.approx(expected_random_best(runtime, k) / 100.0 - 1)


def _csv(tmp_path: Path, text: str) -> Path:
    (tmp_path / "m.csv").write_text(text)
    return tmp_path / "m.csv"


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "header '(empty file)', expected config,runtime_ns or graph,config,runtime_ns"),
        ("config,runtime_ns\n", "no measured configs below the header"),
        ("config,runtime_ns\n1,2,3\n", "line 2: 3 fields, expected 2"),
        ("config,runtime_ns\n-1,5\n", "line 2: config -1 is negative"),
        ("config,runtime_ns\n1,0\n", "line 2: runtime_ns 0 is not positive"),
        ("config,runtime_ns\n1,inf\n", "line 2: runtime_ns inf is not a finite number"),
        ("config,runtime_ns\n1,fast\n", "line 2: runtime_ns 'fast' is not a number"),
    ],
)
def test_a_bad_csv_names_its_line_and_problem(tmp_path: Path, text: str, problem: str) -> None:
    with pytest.raises(DataError) as e:
        read_measured(_csv(tmp_path, text))
    assert str(e.value) == f"{tmp_path / 'm.csv'}: {problem}"


def _graph(name: str, index: list[int], failed: frozenset[int] = frozenset()) -> Candidates:
    n = len(index)
    return Candidates(name, "tile", Path("k.pb"), np.array(index), np.zeros(n, np.int64), failed=failed)


def test_measurements_are_matched_to_graphs_by_name_and_to_configs_by_file_index(tmp_path: Path) -> None:
    graphs = [_graph("a", [0, 2, 5]), _graph("b", [0, 1], failed=frozenset({2}))]
    m = read_measured(_csv(tmp_path, "graph,config,runtime_ns\na,5,10\nb,1,7.5\na,0,12\n"))
    assert assign(m, graphs) == {"a": {2: 10.0, 0: 12.0}, "b": {1: 7.5}}
    for text, problem in (
        ("config,runtime_ns\n0,10\n", "k.pb holds 2 graphs: add a graph column"),
        ("graph,config,runtime_ns\nc,0,10\n", "line 2: graph 'c' is not in k.pb (it has a, b)"),
        ("graph,config,runtime_ns\nb,2,10\n", "line 2: config 2 failed in k.pb"),
        (
            "graph,config,runtime_ns\na,1,10\n",
            "line 2: config 1 is not a config of k.pb (its configs: 3 indices",
        ),
    ):
        with pytest.raises(DataError, match=problem.replace("(", r"\(").replace(")", r"\)")):
            assign(read_measured(_csv(tmp_path, text)), graphs)


def _table(graphs: int, rows: int, flat: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    ids = np.repeat([f"g{i}" for i in range(graphs)], rows)
    runtime = rng.random(graphs * rows)
    runtime[: flat * rows] = 1.0  # the first `flat` graphs: every config equally fast
    return pd.DataFrame(
        {
            "graph": ids,
            "row": np.tile(np.arange(rows), graphs),
            "runtime": runtime,
            "f1": np.repeat(np.arange(graphs, dtype=float), rows),  # the graph's number
            "f2": rng.random(graphs * rows),
        }
    )


def test_training_rows_are_bounded_whole_queries_and_repeatable(tmp_path: Path) -> None:
    table = _table(graphs=50, rows=400, flat=2)
    kept = rows_to_keep(table, ["f2", "f1"], seed=1, max_rows=5_000)
    assert kept.rows <= 5_000 and len(kept.sizes) == 48  # the two flat graphs left out
    assert set(kept.sizes) == {5_000 // 48} and kept.features == ["f2", "f1"]
    starts = np.cumsum(np.r_[0, kept.sizes[:-1]])
    graphs = [set(kept.x[s : s + n, 1].tolist()) for s, n in zip(starts, kept.sizes, strict=True)]
    assert all(len(g) == 1 for g in graphs) and len(set().union(*graphs)) == 48  # a query: one graph
    many = rows_to_keep(_table(graphs=200, rows=100), ["f1"], seed=1, max_rows=5_000)
    assert len(many.sizes) == 5_000 // MIN_QUERY_ROWS and set(many.sizes) == {MIN_QUERY_ROWS}
    save(tmp_path / "rows.npz", kept)
    again = load(tmp_path / "rows.npz")
    assert again is not None and np.array_equal(again.x, rows_to_keep(table, ["f2", "f1"], 1, 5_000).x)
    assert load(tmp_path / "absent.npz") is None
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(DataError, match="unreadable training rows"):
        load(tmp_path / "bad.npz")


def test_the_measured_query_counts_duplicate_configs_once_at_their_mean() -> None:
    x = np.array([[0.0], [1.0], [2.0]], np.float32)
    inverse = np.array([0, 1, 1, 2])  # configs 1 and 2 share a feature row
    rows, grades = measured_query(x, inverse, np.array([1, 2, 3, 0]), np.array([10.0, 30.0, 5.0, 40.0]), 31)
    assert rows[:, 0].tolist() == [0.0, 1.0, 2.0]  # unique rows 0, 1 (mean 20), 2
    assert grades.tolist() == sorted(grades.tolist()) and grades[2] > grades[1] > grades[0]


def test_a_calibration_of_unknown_settings_is_refused() -> None:
    for bad in (
        {"method": "retrain"},
        {"weight": 0.0},
        {"weight": math.inf},
        {"rounds": 0},
        {"ensemble": "gnn"},
    ):
        with pytest.raises(TpurankError):
            Calibration(**bad)  # type: ignore[arg-type]
