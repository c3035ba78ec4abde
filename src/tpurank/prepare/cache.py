"""The prepared cache: one uncompressed npz per graph plus `index.parquet` (docs/architecture.md).

Uncompressed so that a model can load a graph without inflating it; strings and bools are stored as
0-d arrays so no pickle is ever needed. Each file also holds the key of the input and parameters it
was built from (member `_key`), which is how the stage decides an output can be reused, and its
index row (member `_info`, JSON), so a reused output needs no recomputation.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from tpurank.atomic import atomic_path
from tpurank.dataset import collection_dir
from tpurank.errors import DataError, TpurankError

SUMMARY_OPCODE = 121  # one past the real opcode vocabulary (0..120): a collapsed run of pruned nodes
INDEX_FILE = "index.parquet"
KEY_MEMBER = "_key"  # the build key stored beside the fields (not part of PreparedGraph)
INFO_MEMBER = "_info"  # the graph's index row as JSON

_STR_FIELDS = ("id", "collection", "split", "stem")
_BOOL_FIELDS = ("is_test",)


@dataclass
class PreparedGraph:
    """One graph after pruning, feature transformation and deduplication.

    Field meanings, dtypes and shapes are the table in docs/architecture.md; `inverse` maps every
    original config index to its unique row, so every original index can be scored, and
    `config_runtime` keeps every original config's own measurement, which is what the metric scores.
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
    configs: np.ndarray  # layout int8 (u, k, 18); tile float32 (u, 24)
    runtime_min: np.ndarray  # float64 (u,)
    runtime_mean: np.ndarray  # float64 (u,)
    count: np.ndarray  # int32 (u,)
    inverse: np.ndarray  # int32 (c,)
    config_runtime: np.ndarray  # float64 (c,) each original config's measured runtime (tile: normalized)
    is_test: bool

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


def prepared_path(prepared_dir: Path, collection: str, split: str, stem: str) -> Path:
    """Where the cache file of one graph lives: `<prepared_dir>/<collection dir>/<split>/<stem>.npz`."""
    return Path(prepared_dir) / collection_dir(collection) / split / f"{stem}.npz"


def save_prepared(path: str | Path, g: PreparedGraph, key: str = "", info: dict | None = None) -> None:
    """Write one graph atomically as an uncompressed npz.

    Args:
        path: the target file.
        g: the graph.
        key: the build key (input file + stage parameters) stored as member `_key` for resumability.
        info: the graph's index row, stored as JSON in member `_info`.
    """
    arrays: dict[str, np.ndarray] = {}
    for name in FIELD_NAMES:
        value = getattr(g, name)
        if name in _STR_FIELDS:
            arrays[name] = np.array(str(value))
        elif name in _BOOL_FIELDS:
            arrays[name] = np.array(bool(value))
        else:
            arrays[name] = np.ascontiguousarray(value)
    arrays[KEY_MEMBER] = np.array(key)
    arrays[INFO_MEMBER] = np.array(json.dumps(info or {}, sort_keys=True))
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez(tmp, **arrays)


def load_prepared(path: str | Path) -> PreparedGraph:
    """Read one cache file.

    Raises:
        DataError: if the file is missing, unreadable or lacks a field.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            missing = [n for n in FIELD_NAMES if n not in z.files]
            if missing:
                raise DataError(path, f"not a prepared cache file (missing {', '.join(missing)})")
            values: dict[str, object] = {}
            for name in FIELD_NAMES:
                arr = z[name]
                if name in _STR_FIELDS:
                    values[name] = str(arr)
                elif name in _BOOL_FIELDS:
                    values[name] = bool(arr)
                else:
                    values[name] = arr
    except FileNotFoundError:
        raise DataError(path, "no such prepared file (run `python -m tpurank prepare`)") from None
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(path, f"unreadable prepared file ({e})") from None
    return PreparedGraph(**values)  # type: ignore[arg-type]


def read_build(path: str | Path) -> tuple[str, dict] | None:
    """(build key, index row) stored in a cache file; None if absent, unreadable or keyless."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if KEY_MEMBER not in z.files or INFO_MEMBER not in z.files:
                return None
            return str(z[KEY_MEMBER]), json.loads(str(z[INFO_MEMBER]))
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None


def read_index(prepared_dir: str | Path) -> pd.DataFrame:
    """The index table of a prepared cache (one row per graph).

    Raises:
        TpurankError: if the cache has no index yet.
    """
    path = Path(prepared_dir) / INDEX_FILE
    if not path.exists():
        raise TpurankError(f"{path}: no prepared index; run `python -m tpurank prepare` first")
    try:
        return pd.read_parquet(path)
    except Exception as e:  # pyarrow raises several types for a damaged file
        raise DataError(path, f"unreadable index ({e})") from None


def iter_prepared(prepared_dir: str | Path, collection: str, split: str) -> Iterator[PreparedGraph]:
    """Every cached graph of one collection and split, ordered by stem.

    Args:
        prepared_dir: the cache root (`paths.prepared`).
        collection: one of dataset.COLLECTIONS.
        split: train, valid or test.
    """
    folder = Path(prepared_dir) / collection_dir(collection) / split
    files = sorted(folder.glob("*.npz"), key=lambda p: p.stem) if folder.is_dir() else []
    for f in files:
        if not f.name.startswith("."):  # an in-flight temporary file
            yield load_prepared(f)
