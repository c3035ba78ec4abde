"""The prepared cache: one compressed file per graph plus `index.parquet` (docs/architecture.md).

Each file (`tpurank.prepare.store`) holds the pruned graph, the unique configs in chunks that are
decoded on demand (`ConfigStore`), the key of the input and parameters it was built from (how
the stage decides an output can be reused) and its index row, so a reused output needs no
recomputation. Nothing that can be recomputed is stored: model-ready node features are derived
from the raw ones at load time with the feature rule's kept columns. Unique configs are stored
in a seeded random order, so any run of rows (a chunk) is a uniform sample of the graph's configs.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from tpurank.core.atomic import atomic_path
from tpurank.core.collections import collection_dir
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.prepare.node_features import model_features
from tpurank.prepare.packed import PackedRows
from tpurank.prepare.store import ConfigStore, read_arrays, read_meta, write_store

SUMMARY_OPCODE = 121  # one past the real opcode vocabulary (0..120): a collapsed run of pruned nodes
INDEX_FILE = "index.parquet"
CACHE_SUFFIX = ".tpg"  # a zip of zstd blobs (tpurank.prepare.store), not an npz
CACHE_FORMAT = (
    4  # stored in every file; a file of another format is rebuilt by `prepare` (4: rows name their input)
)

_STR_FIELDS = ("id", "collection", "split", "stem")
_BOOL_FIELDS = ("is_test",)
_DERIVED = ("node_feat", "configs")  # not in the arrays blob: recomputed, or stored in chunks


def no_rows() -> np.ndarray:
    """An empty int64 index array (a graph without an official validation subset)."""
    return np.zeros(0, dtype=np.int64)


@dataclass
class PreparedGraph:
    """One graph after pruning, feature transformation and deduplication.

    Field meanings, dtypes and shapes are the table in docs/architecture.md; `inverse` maps every
    original config index to its unique row, so every original index can be scored, and
    `config_runtime` keeps every original config's own measurement, which is what the metric scores.
    A loaded graph's `configs` is a `ConfigStore` (decoded by chunk on indexing).
    """

    id: str
    collection: str
    split: str
    stem: str
    node_feat: np.ndarray  # float32 (n, F)
    node_feat_raw: np.ndarray  # float32 (n, 140)
    node_opcode: np.ndarray  # uint8 (n,)
    edge_index: np.ndarray  # int32 (m, 2) [user, operand]
    node_map: np.ndarray  # int64 (n,), -1 for a summary node
    config_nodes: np.ndarray  # int32 (k,)
    configs: Any  # layout int8 (u, k, 18); tile float32 (u, 24): ndarray, PackedRows or ConfigStore
    runtime_min: np.ndarray  # float64 (u,)
    runtime_mean: np.ndarray  # float64 (u,)
    count: np.ndarray  # int32 (u,)
    inverse: np.ndarray  # int32 (c,)
    config_runtime: np.ndarray  # float64 (c,) each original config's measured runtime (tile: normalized)
    is_test: bool
    eval_rows: np.ndarray = field(default_factory=no_rows)  # official validation subset (original indices)

    @property
    def kind(self) -> str:
        return "tile" if self.collection.startswith("tile") else "layout"

    @property
    def num_nodes(self) -> int:
        return len(self.node_opcode)

    @property
    def num_unique(self) -> int:
        return len(self.count)

    @property
    def num_configs(self) -> int:
        """Configs in the original file."""
        return len(self.inverse)


FIELD_NAMES: tuple[str, ...] = tuple(f.name for f in fields(PreparedGraph))
_ARRAY_FIELDS = tuple(n for n in FIELD_NAMES if n not in (*_STR_FIELDS, *_BOOL_FIELDS, *_DERIVED))


def prepared_path(prepared_dir: Path, collection: str, split: str, stem: str) -> Path:
    """Where the cache file of one graph lives: `<prepared_dir>/<collection dir>/<split>/<stem>.tpg`."""
    return Path(prepared_dir) / collection_dir(collection) / split / f"{stem}{CACHE_SUFFIX}"


def shuffled_order(g: PreparedGraph) -> np.ndarray:
    """The seeded random order unique configs are stored in (seeded by the graph's ID)."""
    return np.random.default_rng(zlib.crc32(g.id.encode())).permutation(g.num_unique)


def save_prepared(
    path: str | Path,
    g: PreparedGraph,
    key: str = "",
    info: dict | None = None,
    keep: list[int] | None = None,
    shuffle: bool = True,
) -> None:
    """Write one graph atomically.

    Args:
        path: the target file.
        g: the graph.
        key: the build key (input file + stage parameters), for resumability.
        info: the graph's index row.
        keep: the feature rule's kept columns: `node_feat` is then recomputed from `node_feat_raw`
            at load time instead of stored (None: store `node_feat` as it is).
        shuffle: store the unique configs in `shuffled_order` (the saved graph stays consistent:
            the per-unique arrays and `inverse` are permuted alike).
    """
    arrays = {n: np.asarray(getattr(g, n)) for n in _ARRAY_FIELDS}
    order = shuffled_order(g) if shuffle and g.num_unique > 1 else None
    if order is not None:
        for n in ("runtime_min", "runtime_mean", "count"):
            arrays[n] = arrays[n][order]
        position = np.empty(len(order), dtype=np.int64)
        position[order] = np.arange(len(order))
        arrays["inverse"] = position[arrays["inverse"]].astype(np.int32)
    if keep is None:
        arrays["node_feat"] = np.asarray(g.node_feat, dtype=np.float32)
    meta = {
        "format": CACHE_FORMAT,
        **{n: str(getattr(g, n)) for n in _STR_FIELDS},
        **{n: bool(getattr(g, n)) for n in _BOOL_FIELDS},
        "key": key,
        "info": info or {},
        "keep": keep,
    }
    with atomic_path(path, suffix=CACHE_SUFFIX) as tmp:
        configs = g.configs if isinstance(g.configs, PackedRows) else np.asarray(g.configs)
        write_store(tmp, meta, arrays, configs, row_order=order)


def load_prepared(path: str | Path) -> PreparedGraph:
    """Read one cache file (configs stay on disk until indexed).

    Raises:
        DataError: if the file is missing, unreadable, of another format or lacks a field.
    """
    path = Path(path)
    meta, arrays = read_arrays(path)
    if meta.get("format") != CACHE_FORMAT:
        raise DataError(
            path,
            f"prepared cache format {meta.get('format')}, expected {CACHE_FORMAT}; rerun {command('prepare')}",
        )
    missing = [n for n in _ARRAY_FIELDS if n not in arrays]
    if missing:
        raise DataError(path, f"not a prepared cache file (missing {', '.join(missing)})")
    keep = meta.get("keep")
    if keep is not None:
        arrays["node_feat"] = model_features(arrays["node_feat_raw"], keep)
    values: dict[str, Any] = {n: meta[n] for n in (*_STR_FIELDS, *_BOOL_FIELDS)}
    values.update(arrays)
    values["configs"] = ConfigStore(path, meta["configs"])
    return PreparedGraph(**values)


class StoredBuild(NamedTuple):
    """What a cache file says it was built from: its build key and its index row."""

    key: str
    info: dict


def read_build(path: str | Path) -> StoredBuild | None:
    """The build key and index row stored in a cache file; None if absent, unreadable, keyless or
    of another format (so it is rebuilt)."""
    try:
        meta = read_meta(Path(path))
    except DataError:
        return None
    if meta.get("format") != CACHE_FORMAT or not meta.get("key"):
        return None
    return StoredBuild(str(meta["key"]), dict(meta.get("info") or {}))


def read_index(prepared_dir: str | Path) -> pd.DataFrame:
    """The index table of a prepared cache (one row per graph).

    Raises:
        TpurankError: if the cache has no index yet.
    """
    path = Path(prepared_dir) / INDEX_FILE
    if not path.exists():
        raise TpurankError(f"{path}: no prepared index; run {command('prepare')} first")
    try:
        return pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise DataError(path, f"unreadable index ({e})") from None


def iter_prepared(prepared_dir: str | Path, collection: str, split: str) -> Iterator[PreparedGraph]:
    """Every cached graph of one collection and split, ordered by stem.

    Args:
        prepared_dir: the cache root (`paths.prepared`).
        collection: one of COLLECTIONS.
        split: train, valid or test.
    """
    folder = Path(prepared_dir) / collection_dir(collection) / split
    files = sorted(folder.glob(f"*{CACHE_SUFFIX}"), key=lambda p: p.stem) if folder.is_dir() else []
    for f in files:
        if not f.name.startswith("."):  # an in-flight temporary file
            yield load_prepared(f)
