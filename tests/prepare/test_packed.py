"""PackedRows: unique config rows kept compressed, read back in any order in bounded groups."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.prepare.packed import PackedRows


def packed(x: np.ndarray, block_bytes: int, pieces: int = 7) -> PackedRows:
    rows = PackedRows(x.shape[1:], x.dtype, block_bytes=block_bytes)
    for part in np.array_split(x, pieces):
        rows.append(part)
    return rows


@pytest.fixture
def configs() -> np.ndarray:
    return np.random.default_rng(0).integers(-1, 6, size=(1000, 13, 18)).astype(np.int8)


@pytest.mark.parametrize("gather_bytes", [1, 5000, 1 << 30])
def test_ordered_chunks_equal_the_permuted_rows(configs: np.ndarray, gather_bytes: int) -> None:
    """Chunks in any order and group size are the rows an ndarray gives, selection applied."""
    rows = packed(configs, block_bytes=13 * 18 * 50)  # blocks of 50 rows, appended in 7 pieces
    cols = np.array([0, 3, 4, 12])
    rows.select(cols)
    order = np.random.default_rng(1).permutation(len(configs))
    chunks = list(rows.ordered_chunks(order, chunk_rows=64, gather_bytes=gather_bytes))
    assert [len(c) for c in chunks] == [64] * 15 + [40]
    np.testing.assert_array_equal(np.concatenate(chunks), configs[order][:, cols])
    assert rows.shape == (1000, 4, 18) and rows.dtype == np.int8
    unordered = np.concatenate(list(rows.ordered_chunks(None, chunk_rows=300)))
    np.testing.assert_array_equal(unordered, configs[:, cols])


def test_indexing_like_an_array(configs: np.ndarray) -> None:
    rows = packed(configs, block_bytes=13 * 18 * 64, pieces=3)
    idx = np.array([[5, -1], [999, 0]])
    np.testing.assert_array_equal(rows[idx], configs[idx])
    np.testing.assert_array_equal(rows[7], configs[7])
    np.testing.assert_array_equal(rows[10:20], configs[10:20])
    np.testing.assert_array_equal(np.asarray(rows), configs)
    with pytest.raises(IndexError):
        rows[np.array([1000])]


def test_rows_are_held_compressed() -> None:
    """Configs repeat column sequences: held compressed, they take a fraction of their raw bytes."""
    base = np.random.default_rng(2).integers(-1, 6, size=(4000, 1, 18)).astype(np.int8)
    x = np.repeat(base, 40, axis=1)  # 40 nodes tied to one decision
    rows = packed(x, block_bytes=1 << 20)
    assert rows.compressed_bytes < x.nbytes / 10
    np.testing.assert_array_equal(np.asarray(rows), x)


def test_empty_rows() -> None:
    rows = PackedRows((3, 18), np.int8)
    assert len(rows) == 0 and list(rows.ordered_chunks(None, chunk_rows=8)) == []
    assert np.asarray(rows).shape == (0, 3, 18)
