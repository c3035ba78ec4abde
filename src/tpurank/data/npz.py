"""Read, validate and write the dataset's npz files as typed records.

Every rule of the format (docs/data.md, "The npz format") is checked here; any violation raises one
`DataError` naming the file and the problem. `node_config_feat` (up to 2.6 GB as float32) can be
streamed in row chunks straight from the zip member and converted to int8 on the way, so it is
never held whole as float32.
"""

from __future__ import annotations

import zipfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path
from typing import IO

import numpy as np

from tpurank.core.atomic import atomic_path
from tpurank.core.errors import DataError
from tpurank.core.identity import regular_file

NODE_FEAT_DIM = 140
TILE_CONFIG_DIM = 24
LAYOUT_CONFIG_DIM = 18
NUM_OPCODES = 121
CONFIG_MIN, CONFIG_MAX = -1, 5  # layout config values: -1 (default / padding) .. 5 (a dimension)
STREAM_CHUNK_BYTES = 64 << 20  # float32 bytes of node_config_feat decoded per step

# key -> dtype, in the order the real files store them.
TILE_KEYS: dict[str, np.dtype] = {
    "node_feat": np.dtype(np.float32),
    "node_opcode": np.dtype(np.uint8),
    "edge_index": np.dtype(np.int64),
    "config_feat": np.dtype(np.float32),
    "config_runtime": np.dtype(np.int64),
    "config_runtime_normalizers": np.dtype(np.int64),
}
LAYOUT_KEYS: dict[str, np.dtype] = {
    "node_feat": np.dtype(np.float32),
    "node_opcode": np.dtype(np.uint8),
    "edge_index": np.dtype(np.int64),
    "node_config_feat": np.dtype(np.float32),
    "node_config_ids": np.dtype(np.int64),
    "config_runtime": np.dtype(np.int64),
    "node_splits": np.dtype(np.int64),
}


class _Counts:
    """What both record kinds answer the same way."""

    node_opcode: np.ndarray
    config_runtime: np.ndarray

    @property
    def num_nodes(self) -> int:
        return len(self.node_opcode)

    @property
    def num_configs(self) -> int:
        return len(self.config_runtime)

    @property
    def is_test(self) -> bool:
        """Test files carry no runtimes: all zero."""
        return self.num_configs > 0 and not self.config_runtime.any()


@dataclass
class TileGraph(_Counts):
    """A tile:xla file: one kernel graph and its tile-size configurations.

    edge_index rows are [user, operand]; config_feat rows are the 24 tile values of one config.
    """

    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    config_feat: np.ndarray
    config_runtime: np.ndarray
    config_runtime_normalizers: np.ndarray

    kind = "tile"


@dataclass
class LayoutGraph(_Counts):
    """A layout file: one program graph and per-node layout configurations.

    node_config_feat is (configs, configurable nodes, 18): float32 as stored, or int8 when loaded
    with `config_dtype=np.int8` (the values are integers in -1..5 either way).
    """

    node_feat: np.ndarray
    node_opcode: np.ndarray
    edge_index: np.ndarray
    node_config_feat: np.ndarray
    node_config_ids: np.ndarray
    config_runtime: np.ndarray
    node_splits: np.ndarray

    kind = "layout"


Graph = TileGraph | LayoutGraph


# ----------------------------------------------------------------------------- reading members


def _open_zip(path: Path) -> zipfile.ZipFile:
    regular_file(Path(path))  # a FIFO named .npz would block the reader forever
    try:
        return zipfile.ZipFile(path)
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    except (zipfile.BadZipFile, EOFError) as e:
        raise DataError(path, f"not a readable npz (zip) file: {e}") from None
    except OSError as e:  # permission denied, a folder named .npz: the reason, not "[Errno N]"
        raise DataError(path, f"cannot read it ({e.strerror or e})") from None


def _member_header(path: Path, fh: IO[bytes], key: str) -> tuple[tuple[int, ...], np.dtype, bool]:
    try:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
    except (ValueError, EOFError, zlib.error, OSError) as e:
        raise DataError(path, f"{key}: unreadable array header ({e})") from None
    return tuple(shape), np.dtype(dtype), bool(fortran)


def _read_exact(path: Path, fh: IO[bytes], key: str, nbytes: int) -> bytes:
    try:
        buf = fh.read(nbytes)
    except (zlib.error, EOFError, OSError, zipfile.BadZipFile) as e:
        raise DataError(path, f"{key}: truncated or corrupt data ({e})") from None
    if len(buf) != nbytes:
        raise DataError(path, f"{key}: truncated data ({len(buf)} of {nbytes} bytes)")
    return buf


def _read_member(path: Path, zf: zipfile.ZipFile, key: str) -> np.ndarray:
    """Read one array into a fresh writable buffer, decompressing in blocks (no extra copy)."""
    with zf.open(f"{key}.npy") as fh:
        shape, dtype, fortran = _member_header(path, fh, key)
        if dtype.hasobject:
            raise DataError(path, f"{key}: object arrays are not allowed")
        out = np.empty(shape[::-1] if fortran else shape, dtype=dtype)
        raw = out.reshape(-1).view(np.uint8)
        for start in range(0, raw.size, STREAM_CHUNK_BYTES):
            stop = min(raw.size, start + STREAM_CHUNK_BYTES)
            raw[start:stop] = np.frombuffer(_read_exact(path, fh, key, stop - start), np.uint8)
    return out.T if fortran else out


def read_node_feat(path: str | Path) -> np.ndarray:
    """Only the node_feat array of a file (what fitting the feature rule needs), shape-checked.

    Raises:
        DataError: the file or the array is unreadable, or not (n, 140) float32.
    """
    path = Path(path)
    with _open_zip(path) as zf:
        try:
            feat = _read_member(path, zf, "node_feat")
        except KeyError:
            raise DataError(path, "missing array node_feat") from None
    if feat.ndim != 2 or feat.shape[1] != NODE_FEAT_DIM or feat.dtype != np.float32:
        raise DataError(
            path, f"node_feat: expected float32 (n, {NODE_FEAT_DIM}), got {feat.dtype} {feat.shape}"
        )
    return feat


def member_shapes(path: str | Path) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """Shape and dtype of every array in an npz, read from the headers alone (cheap)."""
    path = Path(path)
    out = {}
    with _open_zip(path) as zf:
        for name in zf.namelist():
            if not name.endswith(".npy"):
                raise DataError(path, f"unexpected member {name!r} (an npz holds only .npy arrays)")
            with zf.open(name) as fh:
                shape, dtype, _ = _member_header(path, fh, name[:-4])
            out[name[:-4]] = (shape, dtype)
    return out


def iter_rows(path: str | Path, key: str, chunk_rows: int | None = None) -> Iterator[np.ndarray]:
    """Yield consecutive row blocks (along axis 0) of one array, decompressing as it goes.

    Memory stays at one block (default: about STREAM_CHUNK_BYTES) whatever the array's size.
    """
    path = Path(path)
    with _open_zip(path) as zf, zf.open(f"{key}.npy") as fh:
        shape, dtype, fortran = _member_header(path, fh, key)
        if fortran and len(shape) > 1:
            raise DataError(path, f"{key}: Fortran-ordered arrays cannot be streamed")
        row_items = int(np.prod(shape[1:], dtype=np.int64)) if len(shape) > 1 else 1
        row_bytes = max(1, row_items * dtype.itemsize)
        step = chunk_rows or max(1, STREAM_CHUNK_BYTES // row_bytes)
        for start in range(0, shape[0], step):
            rows = min(step, shape[0] - start)
            buf = _read_exact(path, fh, key, rows * row_bytes)
            yield np.frombuffer(buf, dtype=dtype).reshape((rows, *shape[1:]))


# ----------------------------------------------------------------------------- validation


def _check_finite(path: Path, key: str, arr: np.ndarray) -> None:
    if not np.isfinite(arr).all():
        bad = int((~np.isfinite(arr)).sum())
        raise DataError(path, f"{key}: {bad} NaN or infinite values")


def _check_config_values(path: Path, block: np.ndarray) -> None:
    _check_finite(path, "node_config_feat", block)
    if block.size and (block.min() < CONFIG_MIN or block.max() > CONFIG_MAX):
        raise DataError(
            path,
            f"node_config_feat: values must lie in {CONFIG_MIN}..{CONFIG_MAX}, "
            f"found {block.min():g}..{block.max():g}",
        )
    if block.dtype.kind == "f" and not np.array_equal(block, np.round(block)):
        raise DataError(path, "node_config_feat: values must be integers")


def check_config_block(path: str | Path, block: np.ndarray) -> None:
    """Validate one streamed block of node_config_feat (finite integers in -1..5)."""
    _check_config_values(Path(path), block)


def _expect_kind(path: Path, names: set[str], kind: str | None) -> str:
    found = "tile" if "config_feat" in names else "layout" if "node_config_feat" in names else None
    if found is None:
        raise DataError(path, "neither config_feat (tile) nor node_config_feat (layout) present")
    if kind is not None and kind != found:
        raise DataError(path, f"a {found} file where a {kind} file belongs")
    return found


def _check_keys_and_dtypes(path: Path, headers: dict, spec: dict[str, np.dtype]) -> None:
    missing = [k for k in spec if k not in headers]
    if missing:
        raise DataError(path, f"missing key(s): {', '.join(missing)}")
    extra = [k for k in headers if k not in spec]
    if extra:
        raise DataError(path, f"unexpected key(s): {', '.join(extra)}")
    for key, want in spec.items():
        got = headers[key][1]
        if got != want:
            raise DataError(path, f"{key}: dtype {got}, expected {want}")


def _check_shapes(path: Path, kind: str, shapes: dict[str, tuple[int, ...]]) -> None:
    def expect(key: str, ok: bool, what: str) -> None:
        if not ok:
            raise DataError(path, f"{key}: shape {shapes[key]}, expected {what}")

    nf = shapes["node_feat"]
    expect("node_feat", len(nf) == 2 and nf[1] == NODE_FEAT_DIM, f"(nodes, {NODE_FEAT_DIM})")
    n = nf[0]
    expect("node_feat", n >= 1, "at least one node")
    expect("node_opcode", shapes["node_opcode"] == (n,), f"({n},) like node_feat")
    ei = shapes["edge_index"]
    expect("edge_index", len(ei) == 2 and ei[1] == 2, "(edges, 2)")
    c = shapes["config_runtime"]
    expect("config_runtime", len(c) == 1, "(configs,)")
    c = c[0]
    if kind == "tile":
        expect("config_feat", shapes["config_feat"] == (c, TILE_CONFIG_DIM), f"({c}, {TILE_CONFIG_DIM})")
        expect("config_runtime_normalizers", shapes["config_runtime_normalizers"] == (c,), f"({c},)")
    else:
        ids = shapes["node_config_ids"]
        expect("node_config_ids", len(ids) == 1, "(configurable nodes,)")
        want = (c, ids[0], LAYOUT_CONFIG_DIM)
        expect("node_config_feat", shapes["node_config_feat"] == want, str(want))
        ns = shapes["node_splits"]
        expect("node_splits", len(ns) == 2 and ns[0] == 1 and ns[1] >= 2, "(1, k) with k >= 2")


def _check_values(path: Path, g: Graph) -> None:
    n = g.num_nodes
    _check_finite(path, "node_feat", g.node_feat)
    if g.node_opcode.size and g.node_opcode.max() >= NUM_OPCODES:
        raise DataError(path, f"node_opcode: id {int(g.node_opcode.max())} >= {NUM_OPCODES}")
    ei = g.edge_index
    if ei.size and (ei.min() < 0 or ei.max() >= n):
        raise DataError(path, f"edge_index: node id out of range 0..{n - 1} (found {ei.min()}..{ei.max()})")
    rt = g.config_runtime
    if rt.size and rt.min() < 0:
        raise DataError(path, f"config_runtime: {int((rt < 0).sum())} negative runtimes")
    if isinstance(g, TileGraph):
        _check_finite(path, "config_feat", g.config_feat)
        norm = g.config_runtime_normalizers
        if norm.size and norm.min() <= 0:
            raise DataError(path, "config_runtime_normalizers: values must be positive")
        if g.is_test and not (norm == 1).all():
            raise DataError(path, "config_runtime_normalizers: a test file must hold all 1")
        return
    ids = g.node_config_ids
    if ids.size and (ids.min() < 0 or ids.max() >= n):
        raise DataError(path, f"node_config_ids: id out of range 0..{n - 1}")
    if ids.size > 1 and not (np.diff(ids) > 0).all():
        raise DataError(path, "node_config_ids: not strictly ascending")
    splits = g.node_splits[0]
    if splits[0] != 0 or splits[-1] != n:
        raise DataError(path, f"node_splits: must start at 0 and end at {n}, got {splits[0]}..{splits[-1]}")
    if (np.diff(splits) < 0).any():
        raise DataError(path, "node_splits: not non-decreasing")
    if g.node_config_feat.dtype.kind == "f":  # int8 was already checked while streaming
        _check_config_values(path, g.node_config_feat)


# ----------------------------------------------------------------------------- public API


def read_header(path: str | Path, kind: str | None = None) -> tuple[str, dict[str, tuple[int, ...]]]:
    """Validate keys, dtypes and shapes from the array headers alone; return (kind, shapes)."""
    path = Path(path)
    headers = member_shapes(path)
    kind = _expect_kind(path, set(headers), kind)
    _check_keys_and_dtypes(path, headers, TILE_KEYS if kind == "tile" else LAYOUT_KEYS)
    shapes = {k: v[0] for k, v in headers.items()}
    _check_shapes(path, kind, shapes)
    return kind, shapes


def load_graph(
    path: str | Path,
    kind: str | None = None,
    config_dtype: type | np.dtype | None = np.float32,
) -> Graph:
    """Load and fully validate one npz file.

    Args:
        path: the npz file.
        kind: "tile" or "layout" if known (a file of the other kind is then an error).
        config_dtype: dtype of the returned node_config_feat; np.int8 streams and converts in
            chunks, so peak memory is the int8 array plus one chunk. None skips it (an empty
            (0, nodes, 18) int8 placeholder) for a caller that streams it with `iter_rows` and
            checks each block with `check_config_block`.

    Raises:
        DataError: on any violation of the format, naming the file and the problem.
    """
    path = Path(path)
    kind, shapes = read_header(path, kind)
    spec = TILE_KEYS if kind == "tile" else LAYOUT_KEYS
    arrays: dict[str, np.ndarray] = {}
    with _open_zip(path) as zf:
        for key in spec:
            if key == "node_config_feat" and (config_dtype is None or np.dtype(config_dtype) != np.float32):
                continue
            arrays[key] = _read_member(path, zf, key)
    if kind == "layout" and config_dtype is None:
        arrays["node_config_feat"] = np.empty((0, *shapes["node_config_feat"][1:]), dtype=np.int8)
    elif kind == "layout" and "node_config_feat" not in arrays:
        out = np.empty(shapes["node_config_feat"], dtype=config_dtype)
        row = 0
        for block in iter_rows(path, "node_config_feat"):
            _check_config_values(path, block)
            out[row : row + len(block)] = block
            row += len(block)
        arrays["node_config_feat"] = out
    graph = TileGraph(**arrays) if kind == "tile" else LayoutGraph(**arrays)
    _check_values(path, graph)
    return graph


def validate_file(path: str | Path, kind: str | None = None) -> Graph:
    """Validate a file with bounded memory (configs streamed as int8); return the loaded graph."""
    return load_graph(path, kind, config_dtype=np.int8)


def save_graph(path: str | Path, graph: Graph) -> None:
    """Write a graph in the dataset's exact format (keys, order, dtypes, DEFLATE), atomically."""
    spec = TILE_KEYS if isinstance(graph, TileGraph) else LAYOUT_KEYS
    arrays = {f.name: getattr(graph, f.name) for f in fields(graph)}
    ordered = {k: np.ascontiguousarray(arrays[k], dtype=spec[k]) for k in spec}
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(tmp, **ordered)
