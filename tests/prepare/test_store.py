"""tpurank.prepare.store's cache of decoded config chunks."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.prepare.store import _ChunkCache, row_indices


def test_the_chunk_cache_keeps_its_budget_and_empties_between_steps() -> None:
    cache = _ChunkCache(budget=100)
    for i in range(3):
        cache.put(("f", "id", i), np.zeros(40, dtype=np.uint8))
    assert cache.get(("f", "id", 0)) is None and cache.bytes == 80  # least recently used dropped
    cache.clear()  # `all` between steps
    assert cache.bytes == 0 and not cache.items and cache.get(("f", "id", 2)) is None
    cache.put(("f", "id", 4), np.zeros(40, dtype=np.uint8))
    assert cache.bytes == 40


@pytest.mark.parametrize(
    ("rows", "want"), [(slice(1, None, 2), [1, 3]), (-1, 3), ([0, -2], [0, 2]), (np.array([[3]]), [[3]])]
)
def test_row_indices_index_as_numpy_does(rows, want) -> None:
    np.testing.assert_array_equal(row_indices(rows, 4, "x"), want)
    np.testing.assert_array_equal(row_indices(rows, 4, "x"), np.arange(4)[rows])


@pytest.mark.parametrize("rows", [4, -5, [0, 9]])
def test_row_indices_refuse_a_row_out_of_range(rows) -> None:
    with pytest.raises(IndexError, match="x: config row out of range 0..3"):
        row_indices(rows, 4, "x")
