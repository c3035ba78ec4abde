"""The bytes of one cache file: a zip of zstd-compressed blobs that configs can be read from by chunk.

Layout configs compress extremely well once transposed: a (config, node, slot) tensor holds few
distinct column sequences (the compiler ties many tensors to one decision), so each chunk of rows
is stored column-major as (nodes, 18, rows) and zstd finds the repeats: the cache is a small
fraction of the npz's size (figures: docs/scale.md).

Members (stored, not deflated: the blobs are compressed already):
- `meta.json`: everything small, plus the dtype and shape of every array.
- `arrays.zst`: every per-graph array, concatenated in the order `meta["arrays"]` lists them.
- `configs/NNNNN.zst`: chunk N of the unique configs (`meta["configs"]["chunk_rows"]` rows each).
Chunks hold about CHUNK_BYTES raw bytes, so a training batch decompresses a few MB, never a graph.
"""

from __future__ import annotations

import json
import threading
import zipfile
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pyarrow as pa

from tpurank.core.env import CHUNK_CACHE_MB
from tpurank.core.errors import DataError, command
from tpurank.core.identity import zip_identity

META_MEMBER = "meta.json"
ARRAYS_MEMBER = "arrays.zst"
CHUNK_MEMBER = "configs/{:05d}.zst"
CHUNK_BYTES = 4 << 20  # raw bytes per config chunk: small enough to decode per batch, big enough to compress
ZSTD_LEVEL = 3  # zstd's default: ~5x faster than deflate at a better ratio on these tensors

_CODEC = pa.Codec("zstd", compression_level=ZSTD_LEVEL)


def compress(data: bytes | memoryview) -> bytes:
    return _CODEC.compress(data, asbytes=True)


def decompress(data: bytes, size: int) -> bytes:
    return _CODEC.decompress(data, decompressed_size=size, asbytes=True)


def row_indices(rows: Any, length: int, where: str) -> np.ndarray:
    """Rows of an array-like of `length` rows as int64 indices, negatives counted from the end, as
    numpy indexes (a slice, an int, a list or an array; a 0-d result is one row).

    Raises:
        IndexError: a row outside -length..length-1, naming `where`.
    """
    if isinstance(rows, slice):
        rows = np.arange(*rows.indices(length))
    idx = np.asarray(rows, dtype=np.int64)
    if idx.size and (idx.min() < -length or idx.max() >= length):
        raise IndexError(f"{where}: config row out of range 0..{length - 1}")
    return np.where(idx < 0, idx + length, idx)


class OrderedRows(Protocol):
    """Config rows not held as one array (`tpurank.prepare.packed.PackedRows`): read back in any
    order, a chunk at a time."""

    shape: tuple[int, ...]
    dtype: np.dtype

    def __len__(self) -> int: ...

    def ordered_chunks(self, order: np.ndarray | None, chunk_rows: int) -> Iterator[np.ndarray]: ...


def chunk_rows_for(row_bytes: int) -> int:
    """Rows per config chunk for rows of this many bytes (at least 64, so transposing pays off)."""
    return max(64, CHUNK_BYTES // max(1, row_bytes))


def to_columns(block: np.ndarray) -> np.ndarray:
    """(rows, ...) -> (..., rows): what is written; contiguous."""
    return np.ascontiguousarray(np.moveaxis(block, 0, -1))


def write_store(
    path: Path,
    meta: dict[str, Any],
    arrays: dict[str, np.ndarray],
    configs: np.ndarray | OrderedRows,
    row_order: np.ndarray | None = None,
) -> None:
    """Write one cache file (the caller makes it atomic).

    Args:
        path: the file to write.
        meta: JSON-able fields; `arrays` and `configs` entries are added here.
        arrays: per-graph arrays (any dtype, any shape).
        configs: the unique configs, (u, ...) of any dtype, in memory or kept compressed
            (`OrderedRows`, e.g. `PackedRows`: gathered a group of chunks at a time).
        row_order: which config row goes to stored position i (default: as given); read chunk by
            chunk, so a permutation never copies the whole tensor.
    """
    names = list(arrays)
    blob = b"".join(np.ascontiguousarray(arrays[n]).tobytes() for n in names)
    u = len(configs)
    row_bytes = int(np.prod(configs.shape[1:], dtype=np.int64)) * configs.dtype.itemsize
    rows = chunk_rows_for(row_bytes)
    meta = {
        **meta,
        "arrays": [[n, arrays[n].dtype.str, list(arrays[n].shape)] for n in names],
        "configs": {
            "dtype": configs.dtype.str,
            "shape": list(configs.shape),
            "chunk_rows": rows,
            "chunks": -(-u // rows),
        },
    }
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED) as zf:
        _put(zf, META_MEMBER, json.dumps(meta, sort_keys=True).encode())
        _put(zf, ARRAYS_MEMBER, compress(blob))
        for i, block in enumerate(_ordered_chunks(configs, row_order, rows)):
            _put(zf, CHUNK_MEMBER.format(i), compress(to_columns(block).data))


def _ordered_chunks(
    configs: np.ndarray | OrderedRows, row_order: np.ndarray | None, rows: int
) -> Iterator[np.ndarray]:
    """The config rows in stored order, `rows` at a time."""
    if not isinstance(configs, np.ndarray):
        yield from configs.ordered_chunks(row_order, rows)
        return
    for start in range(0, len(configs), rows):
        sel = slice(start, min(len(configs), start + rows))
        yield configs[sel] if row_order is None else configs[row_order[sel]]


def _put(zf: zipfile.ZipFile, name: str, data: bytes) -> None:
    """One stored member with a fixed timestamp: the same graph always gives the same bytes."""
    zf.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), data)


def _open(path: Path) -> zipfile.ZipFile:
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise DataError(path, f"no such prepared file (run {command('prepare')})") from None
    except (OSError, zipfile.BadZipFile) as e:
        raise DataError(path, f"unreadable prepared file ({e})") from None


def read_meta(path: Path) -> dict[str, Any]:
    """The meta.json of one cache file.

    Raises:
        DataError: missing, unreadable, or not a cache file.
    """
    with _open(path) as zf:
        try:
            return json.loads(zf.read(META_MEMBER))
        except KeyError:
            raise DataError(path, "not a prepared cache file (no meta.json)") from None
        except (OSError, ValueError, zipfile.BadZipFile) as e:
            raise DataError(path, f"unreadable prepared file ({e})") from None


def read_arrays(path: Path) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(meta, every per-graph array) of one cache file.

    Raises:
        DataError: missing, unreadable or inconsistent.
    """
    with _open(path) as zf:
        try:
            meta = json.loads(zf.read(META_MEMBER))
            specs = [(n, np.dtype(d), tuple(s)) for n, d, s in meta["arrays"]]
            size = sum(int(np.prod(s, dtype=np.int64)) * d.itemsize for _, d, s in specs)
            blob = decompress(zf.read(ARRAYS_MEMBER), size)
        except (KeyError, TypeError, ValueError, OSError, zipfile.BadZipFile, pa.ArrowException) as e:
            raise DataError(path, f"unreadable prepared file ({e})") from None
    arrays, offset = {}, 0
    for name, dtype, shape in specs:
        count = int(np.prod(shape, dtype=np.int64))
        arrays[name] = np.frombuffer(blob, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
        offset += count * dtype.itemsize
    return meta, arrays


def cache_bytes() -> int:
    """Bytes of decoded chunks kept (LRU): $TPURANK_CHUNK_CACHE_MB, checked by core/env.py and read
    when the cache is first used, never at import (a bad value is then the CLI's one line)."""
    return int(CHUNK_CACHE_MB.read()) << 20


class _ChunkCache:
    """Decoded config chunks of every open store, least recently used dropped past its budget
    (`cache_bytes()`, read on first use unless given)."""

    def __init__(self, budget: int | None = None) -> None:
        self._budget = budget
        self.items: OrderedDict[tuple, np.ndarray] = OrderedDict()
        self.bytes = 0
        self.lock = threading.Lock()

    def get(self, key: tuple) -> np.ndarray | None:
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    @property
    def budget(self) -> int:
        if self._budget is None:
            self._budget = cache_bytes()
        return self._budget

    def clear(self) -> None:
        """Drop every decoded chunk (`all`, between steps: the next step reads other graphs)."""
        with self.lock:
            self.items.clear()
            self.bytes = 0

    def put(self, key: tuple, value: np.ndarray) -> None:
        with self.lock:
            if key in self.items or value.nbytes > self.budget:
                return
            self.items[key] = value
            self.bytes += value.nbytes
            while self.bytes > self.budget:
                _, old = self.items.popitem(last=False)
                self.bytes -= old.nbytes


CHUNKS = _ChunkCache()


class ConfigStore:
    """The unique configs of one cache file, read a chunk at a time; indexes like an ndarray.

    `store[rows]` decodes only the chunks those rows live in (through a shared LRU of decoded
    chunks), `np.asarray(store)` reads all, so a model holds one batch of configs, never a
    collection's tensors.

    Args:
        path: the cache file.
        spec: `meta["configs"]` of that file (dtype, shape, chunk_rows, chunks).
    """

    def __init__(self, path: Path, spec: dict[str, Any]) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(spec["dtype"])
        self.shape: tuple[int, ...] = tuple(int(s) for s in spec["shape"])
        self.chunk_rows = int(spec["chunk_rows"])
        self.num_chunks = int(spec["chunks"])
        self._key = (str(self.path), zip_identity(self.path))  # a rebuilt file never hits old chunks

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def chunk(self, i: int) -> np.ndarray:
        """Rows [i * chunk_rows, (i + 1) * chunk_rows) as (rows, ...)."""
        key = (*self._key, i)
        cached = CHUNKS.get(key)
        if cached is not None:
            return cached
        start = i * self.chunk_rows
        rows = min(self.chunk_rows, self.shape[0] - start)
        inner = self.shape[1:]
        size = rows * int(np.prod(inner, dtype=np.int64)) * self.dtype.itemsize
        with _open(self.path) as zf:
            try:
                raw = decompress(zf.read(CHUNK_MEMBER.format(i)), size)
            except (KeyError, OSError, zipfile.BadZipFile, pa.ArrowException) as e:
                raise DataError(self.path, f"config chunk {i} unreadable ({e})") from None
        cols = np.frombuffer(raw, dtype=self.dtype).reshape(*inner, rows)
        block = np.ascontiguousarray(np.moveaxis(cols, -1, 0))
        block.setflags(write=False)
        CHUNKS.put(key, block)
        return block

    def iter_chunks(self) -> Iterator[tuple[int, np.ndarray]]:
        """(first row, block) of every chunk in order."""
        for i in range(self.num_chunks):
            yield i * self.chunk_rows, self.chunk(i)

    def __getitem__(self, rows: Any) -> np.ndarray:
        idx = row_indices(rows, len(self), str(self.path))
        if idx.ndim == 0:
            return self[idx[None]][0]
        out = np.empty((len(idx), *self.shape[1:]), dtype=self.dtype)
        which = idx // self.chunk_rows
        for c in np.unique(which):
            sel = which == c
            out[sel] = self.chunk(int(c))[idx[sel] - c * self.chunk_rows]
        return out

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        out = self[slice(None)]
        return out if dtype is None else out.astype(dtype)


def iter_blocks(configs: np.ndarray | ConfigStore) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, block) over an ndarray (one block) or a ConfigStore (chunk by chunk): for code
    that reads every config of a graph without holding them all at once."""
    if isinstance(configs, ConfigStore):
        yield from configs.iter_chunks()
    else:
        yield 0, np.asarray(configs)
