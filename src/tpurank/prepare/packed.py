"""A graph's unique config rows held zstd-compressed in memory while its cache file is built.

`dedup_layout` once wrote every unique row of a layout file into one int8 buffer (configs x
configurable nodes x 18): 2.08 GB for the full-scale densenet's 99,964 configs, in each prepare
worker. Here the rows arrive block by block and each block is kept compressed as the cache stores
its chunks (column-major, zstd), a small fraction of the raw size. `ordered_chunks` reads them
back in any row order (the cache's shuffled one) in groups of at most GATHER_BYTES raw: each group
decodes every block once, so memory holds the compressed rows, one group and one block.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from tpurank.prepare.store import compress, decompress, row_indices, to_columns

BLOCK_BYTES = 4 << 20  # raw bytes per compressed block (the cache's own chunk size)
# raw bytes of rows gathered per pass over the blocks (peak RSS vs passes): at 256 MB, prepare's two
# workers on the biggest files took `all`'s prepare to 2.17 GB (docs/scale.md)
GATHER_BYTES = 128 << 20


class PackedRows:
    """Rows of one shape and dtype, appended in order and kept compressed; indexes like an ndarray
    (`rows[idx]`, `np.asarray(rows)`), optionally through a selection of its axis 1 (`select`).

    Args:
        row_shape: the shape of one row, e.g. (configurable nodes, 18).
        dtype: the rows' dtype.
        block_bytes: raw bytes per compressed block.
    """

    def __init__(self, row_shape: tuple[int, ...], dtype: Any, block_bytes: int = BLOCK_BYTES) -> None:
        self.row_shape = tuple(int(s) for s in row_shape)
        self.dtype = np.dtype(dtype)
        row_bytes = max(1, int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize)
        self.block_rows = max(1, block_bytes // row_bytes)
        self.cols: np.ndarray | None = None  # kept positions along axis 1 (None: all)
        self._blobs: list[bytes] = []
        self._starts: list[int] = []  # first row of each blob
        self._pending: list[np.ndarray] = []
        self._rows = 0  # rows appended (compressed and pending)
        self._flushed = 0

    def append(self, rows: np.ndarray) -> None:
        """Add rows (n, *row_shape) at the end."""
        if rows.shape[1:] != self.row_shape:
            raise ValueError(f"rows of shape {rows.shape[1:]}, expected {self.row_shape}")
        self._pending.append(np.array(rows, dtype=self.dtype))
        self._rows += len(rows)
        if self._rows - self._flushed >= self.block_rows:
            self._flush(final=False)

    def _flush(self, final: bool = True) -> None:
        """Compress the pending rows in blocks of `block_rows` (a shorter last one only when final)."""
        if not self._pending:
            return
        block = np.concatenate(self._pending)
        start = 0
        while len(block) - start >= (1 if final else self.block_rows):
            part = block[start : start + self.block_rows]
            self._starts.append(self._flushed)
            self._blobs.append(compress(to_columns(part).data))
            self._flushed += len(part)
            start += len(part)
        self._pending = [block[start:].copy()] if start < len(block) else []

    def _take(self, j: int, idx: np.ndarray) -> np.ndarray:
        """Rows `idx` of blob j (relative to its first row): (len(idx), *shape[1:])."""
        stop = self._starts[j + 1] if j + 1 < len(self._starts) else self._flushed
        n = stop - self._starts[j]
        size = n * int(np.prod(self.row_shape, dtype=np.int64)) * self.dtype.itemsize
        cols = np.frombuffer(decompress(self._blobs[j], size), dtype=self.dtype).reshape(*self.row_shape, n)
        if self.cols is not None:
            cols = cols[self.cols]  # whole (18, n) slabs: cheap in the column-major layout
        return np.moveaxis(cols[..., idx], -1, 0)

    def select(self, cols: np.ndarray) -> PackedRows:
        """Keep only these positions along axis 1 from now on (the varying nodes); returns self."""
        self.cols = np.asarray(cols, dtype=np.int64)
        return self

    @property
    def shape(self) -> tuple[int, ...]:
        inner = self.row_shape if self.cols is None else (len(self.cols), *self.row_shape[1:])
        return (self._rows, *inner)

    @property
    def compressed_bytes(self) -> int:
        return sum(len(b) for b in self._blobs)

    def __len__(self) -> int:
        return self._rows

    def ordered_chunks(
        self, order: np.ndarray | None, chunk_rows: int, gather_bytes: int = GATHER_BYTES
    ) -> Iterator[np.ndarray]:
        """The rows `order[0:chunk_rows]`, `order[chunk_rows:2 * chunk_rows]`, ... (order None: as
        stored), each chunk a fresh array; every group of at most `gather_bytes` raw bytes (whole
        chunks) costs one pass over the compressed blocks."""
        self._flush()
        order = np.arange(self._rows) if order is None else np.asarray(order, dtype=np.int64)
        row_bytes = max(1, int(np.prod(self.shape[1:], dtype=np.int64)) * self.dtype.itemsize)
        group = max(1, gather_bytes // (row_bytes * chunk_rows)) * chunk_rows
        for a in range(0, len(order), group):
            out = self._gather(order[a : a + group])
            for s in range(0, len(out), chunk_rows):
                yield out[s : s + chunk_rows]

    def _gather(self, rows: np.ndarray) -> np.ndarray:
        """Rows `rows` (any order, repeats allowed) in one pass over the blocks."""
        out = np.empty((len(rows), *self.shape[1:]), dtype=self.dtype)
        if not len(rows):
            return out
        block_of = np.searchsorted(np.asarray(self._starts), rows, side="right") - 1
        by_block = np.argsort(block_of, kind="stable")
        bounds = np.searchsorted(block_of[by_block], np.arange(len(self._starts) + 1))
        for j in range(len(self._starts)):
            sel = by_block[bounds[j] : bounds[j + 1]]
            if len(sel):
                out[sel] = self._take(j, rows[sel] - self._starts[j])
        return out

    def __getitem__(self, rows: Any) -> np.ndarray:
        idx = row_indices(rows, len(self), "packed configs")
        if idx.ndim == 0:
            return self[idx[None]][0]
        self._flush()
        return self._gather(idx.reshape(-1)).reshape(*idx.shape, *self.shape[1:])

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[slice(None)]
        return out if dtype is None else out.astype(dtype)
