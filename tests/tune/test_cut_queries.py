"""The shipped training queries, cut for calibration: every row kept once, each in a query of at
most the bound holding rows of one original query only, the same cut every time."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.lgbm.training_rows import TrainingRows
from tpurank.rank.calibrate import cut_queries


def _rows(sizes: list[int], features: int = 3) -> TrainingRows:
    n = sum(sizes)
    x = np.arange(n * features, dtype=np.float32).reshape(n, features)
    runtime = np.random.default_rng(0).uniform(1, 2, n)
    return TrainingRows(x, runtime, np.asarray(sizes, dtype=np.int64), [f"f{i}" for i in range(features)])


@pytest.mark.parametrize("bound", [2, 7, 100, 499, 500])
def test_every_row_is_kept_once_in_a_query_of_its_own_graph_within_the_bound(bound: int) -> None:
    rows = _rows([500, 64, 3, 250])
    cut = cut_queries(rows, bound)
    assert int(cut.sizes.sum()) == rows.rows and int(cut.sizes.max()) <= bound
    original = np.repeat(np.arange(len(rows.sizes)), rows.sizes)  # each row's query
    row_of = cut.x[:, 0].astype(np.int64) // 3  # x's first column is 3 * the row's index
    assert sorted(row_of.tolist()) == list(range(rows.rows))
    assert np.array_equal(cut.runtime, rows.runtime[row_of])  # runtimes travel with their rows
    starts = np.concatenate([[0], np.cumsum(cut.sizes)[:-1]])
    for start, size in zip(starts, cut.sizes, strict=True):
        assert len(set(original[row_of[start : start + size]].tolist())) == 1
    # near-equal parts: a 500-row query in parts that differ by at most one row
    first = cut.sizes[: -(-500 // bound)]
    assert int(first.sum()) == 500 and int(first.max() - first.min()) <= 1


def test_the_cut_is_seeded_and_no_bound_or_short_queries_leave_the_rows_as_they_are() -> None:
    rows = _rows([300, 40])
    a, b = cut_queries(rows, 100), cut_queries(rows, 100)
    assert np.array_equal(a.x, b.x) and np.array_equal(a.sizes, b.sizes)
    assert not np.array_equal(a.x, cut_queries(rows, 100, seed=1).x)
    assert cut_queries(rows, 0) is rows and cut_queries(rows, 300) is rows
