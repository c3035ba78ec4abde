"""Collapse identical configurations of a graph to one row each, streaming and in bounded memory.

Random layout files repeat configurations heavily (one real file: ~100k rows, almost all
duplicates) and identical configs were measured with runtimes up to ~0.4% apart, so each unique
row keeps the min, mean and count of its runtimes. Rows are hashed block by block as they stream
out of the npz, so only the unique rows (as int8, compressed: `PackedRows`) are ever held, never
the float32 tensor.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.core.errors import DataError
from tpurank.data.npz import CONFIG_MAX, CONFIG_MIN, check_config_block, iter_rows
from tpurank.prepare.packed import PackedRows

CONFIG_CHUNK_BYTES = 16 << 20  # float32 bytes of node_config_feat decoded per step (peak-RSS vs speed)
HASH_BYTES = 16  # blake2b digest per row: collisions are out of reach (2^-64 at 2^32 rows)


@dataclass
class Dedup:
    """Unique configurations of one graph, in order of first appearance.

    `configs` keeps only the varying configurable nodes (layout); `varying` says which of the
    file's configurable nodes those are.
    """

    configs: np.ndarray | PackedRows  # layout int8 (u, k, 18), compressed; tile float32 (u, 24)
    varying: np.ndarray  # bool (nc,) layout; empty for tile
    runtime_min: np.ndarray  # float64 (u,)
    runtime_mean: np.ndarray  # float64 (u,)
    count: np.ndarray  # int32 (u,)
    inverse: np.ndarray  # int32 (c,)
    runtime: np.ndarray  # float64 (c,) each original config's own measurement (tile: normalized)


def unique_rows(blocks: Iterable[np.ndarray], keep: Callable[[np.ndarray], None]) -> tuple[int, np.ndarray]:
    """Unique rows of a stream of row blocks, first occurrence first, handed to `keep` block by block.

    Args:
        blocks: arrays sharing every axis but the first (a row may have any shape).
        keep: called with each block's new unique rows, in order (e.g. `PackedRows.append`).

    Returns:
        (number of unique rows; inverse: original row -> unique row, int64).
    """
    seen: dict[bytes, int] = {}
    inverse: list[np.ndarray] = []
    for block in blocks:
        flat = np.ascontiguousarray(block).reshape(len(block), -1)
        inv = np.empty(len(block), dtype=np.int64)
        new: list[int] = []
        for i in range(len(flat)):
            h = hashlib.blake2b(flat[i].data, digest_size=HASH_BYTES).digest()
            j = seen.get(h)
            if j is None:
                j = seen[h] = len(seen)
                new.append(i)
            inv[i] = j
        if new:
            keep(block[np.asarray(new)])
        inverse.append(inv)
    return len(seen), (np.concatenate(inverse) if inverse else np.zeros(0, dtype=np.int64))


def aggregate_runtimes(inverse: np.ndarray, runtime: np.ndarray, num_unique: int) -> tuple[np.ndarray, ...]:
    """(min, mean, count) of the runtimes that map to each unique row.

    Args:
        inverse: original row -> unique row.
        runtime: float64 runtime of each original row.
        num_unique: number of unique rows.
    """
    count = np.bincount(inverse, minlength=num_unique)
    mean = np.bincount(inverse, weights=runtime, minlength=num_unique) / np.maximum(count, 1)
    lo = np.full(num_unique, np.inf)
    np.minimum.at(lo, inverse, runtime)
    lo[count == 0] = 0.0
    return lo, mean, count.astype(np.int32)


def _int8_blocks(path: Path, chunk_rows: int) -> Iterator[np.ndarray]:
    """node_config_feat streamed as int8 blocks, each validated (finite integers in -1..5)."""
    for block in iter_rows(path, "node_config_feat", chunk_rows=chunk_rows):
        with np.errstate(invalid="ignore"):  # NaN or huge values are caught just below, by name
            small = block.astype(np.int8)
        # fast exact check: the int8 values convert back to the same floats and lie in range;
        # on failure the shared validator names the problem
        if not np.array_equal(small, block) or (
            small.size and (small.min() < CONFIG_MIN or small.max() > CONFIG_MAX)
        ):
            check_config_block(path, block)
            raise DataError(path, "node_config_feat: values must be integers in -1..5")
        yield small


class _Varying:
    """`keep` for unique_rows: each unique row goes on to `rows`, and the nodes whose config differs
    from the first row's anywhere are marked (they are the varying ones)."""

    def __init__(self, rows: PackedRows) -> None:
        self.rows, self.first = rows, None
        self.mask = np.zeros(rows.row_shape[0], dtype=bool)

    def __call__(self, block: np.ndarray) -> None:
        if self.first is None:
            self.first = block[0].copy()
        self.mask |= (block != self.first).any(axis=(0, 2))
        self.rows.append(block)


def dedup_layout(path: str | Path, config_shape: tuple[int, int, int], runtime: np.ndarray) -> Dedup:
    """Deduplicate a layout file's node_config_feat, streamed from the npz as int8.

    Configurable nodes whose config never varies carry no ranking signal and are left out of
    `configs` (they stay in the graph). The unique rows are kept compressed (`PackedRows`), so
    memory follows their compressed size, never the (configs x nodes x 18) tensor.

    Args:
        path: the npz file.
        config_shape: (configs, configurable nodes, 18) from its header.
        runtime: config_runtime, float64.
    """
    path = Path(path)
    c, nc, d = config_shape
    chunk_rows = max(1, CONFIG_CHUNK_BYTES // max(1, nc * d * 4))
    varying = _Varying(PackedRows((nc, d), np.int8))
    u, inverse = unique_rows(_int8_blocks(path, chunk_rows), varying)
    if len(inverse) != c:
        raise DataError(path, f"node_config_feat: streamed {len(inverse)} rows, expected {c}")
    lo, mean, count = aggregate_runtimes(inverse, runtime, u)
    return Dedup(
        varying.rows.select(np.flatnonzero(varying.mask)),
        varying.mask,
        lo,
        runtime_mean=mean,
        count=count,
        inverse=inverse.astype(np.int32),
        runtime=runtime,
    )


def unique_rows_in_memory(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unique rows of a small array held in memory, first occurrence first, compared byte for byte
    as `unique_rows` compares them, but in one vectorised np.unique (no Python loop per row).

    Returns:
        (the unique rows, inverse: original row -> unique row, int64).
    """
    flat = np.ascontiguousarray(x).reshape(len(x), -1)
    if not len(flat):
        return x[:0].copy(), np.zeros(0, dtype=np.int64)
    rows = flat.view(np.dtype((np.void, flat.shape[1] * flat.itemsize))).ravel()
    _, first, inverse = np.unique(rows, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")  # unique ids in order of first appearance
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    return x[first[order]].copy(), rank[inverse.reshape(-1)]


def dedup_tile(config_feat: np.ndarray, runtime: np.ndarray, normalizers: np.ndarray) -> Dedup:
    """Deduplicate tile configs; runtimes are normalized (runtime / normalizer) first.

    Args:
        config_feat: float32 (c, 24).
        runtime: int64 config_runtime.
        normalizers: int64 config_runtime_normalizers (all 1 in test files).
    """
    configs, inverse = unique_rows_in_memory(np.asarray(config_feat, dtype=np.float32))
    u = len(configs)
    y = runtime.astype(np.float64) / normalizers.astype(np.float64)
    lo, mean, count = aggregate_runtimes(inverse, y, u)
    return Dedup(
        configs,
        np.zeros(0, bool),
        lo,
        runtime_mean=mean,
        count=count,
        inverse=inverse.astype(np.int32),
        runtime=y,
    )
