"""Where the feature tables live and how later stages read them.

Per collection and split, under `features/tabular/<collection dir>/`:
`<split>.parquet` (one row per (graph, unique config)), two per-graph files keyed by graph stem:
`<split>.inverse.npz` (original config -> unique row, so predictions cover every original index)
and `<split>.runtime.npz` (each original config's measured runtime, what the metric scores), and
`<split>.json` (provenance sidecar holding the build key that makes the stage resumable).
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from tpurank.core.collections import collection_dir
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.paths import Paths

# not features: graph ID, unique-config row, runtime (mean over duplicates: the label), runtime_min
META_COLUMNS: tuple[str, ...] = ("graph", "row", "runtime", "runtime_min")
PER_GRAPH: tuple[str, ...] = ("inverse", "runtime")  # the per-graph files beside each table
TO_PANDAS = {"split_blocks": True, "self_destruct": True}  # read_table: the same frame, one copy


def table_dir(paths: Paths, collection: str) -> Path:
    return paths.tabular / collection_dir(collection)


def table_path(paths: Paths, collection: str, split: str) -> Path:
    return table_dir(paths, collection) / f"{split}.parquet"


def per_graph_path(paths: Paths, collection: str, split: str, what: str) -> Path:
    """`<split>.<what>.npz`, `what` one of PER_GRAPH."""
    return table_dir(paths, collection) / f"{split}.{what}.npz"


def meta_path(paths: Paths, collection: str, split: str) -> Path:
    return table_dir(paths, collection) / f"{split}.json"


def table_files(paths: Paths, collection: str, split: str) -> list[Path]:
    """The files of one finished table: its parquet and its per-graph files."""
    return [
        table_path(paths, collection, split),
        *(per_graph_path(paths, collection, split, w) for w in PER_GRAPH),
    ]


def stored_key(paths: Paths, collection: str, split: str) -> str | None:
    """The build key saved with a table (its sidecar is written last), None without one."""
    try:
        return json.loads(meta_path(paths, collection, split).read_text()).get("build_key")
    except (OSError, ValueError, AttributeError):
        return None


def feature_columns(df: pd.DataFrame) -> list[str]:
    """The model inputs of a feature table: every column except the META_COLUMNS."""
    return [c for c in df.columns if c not in META_COLUMNS]


def read_table(paths: Paths, collection: str, split: str, columns: list[str] | None = None) -> pd.DataFrame:
    """Read one feature table.

    Args:
        paths: the run's paths.
        collection: one of COLLECTIONS.
        split: train, valid or test.
        columns: restrict to these (default: all).

    Raises:
        TpurankError: when the table has not been built; DataError when it is unreadable.
    """
    path = table_path(paths, collection, split)
    if not path.exists():
        raise TpurankError(f"{path}: no feature table; run {command('features')} first")
    try:
        # each column converted zero-copy where it can be and freed from arrow as it goes, then
        # pyarrow's pool emptied: the frame alone stays resident, not beside the arrow table
        df = pd.read_parquet(path, columns=columns, to_pandas_kwargs=TO_PANDAS)
        pa.default_memory_pool().release_unused()
        return df
    except Exception as e:  # pyarrow raises several types for a damaged or mismatched file
        raise DataError(path, f"unreadable feature table ({e})") from None


def read_per_graph(paths: Paths, collection: str, split: str, what: str) -> dict[str, np.ndarray]:
    """Graph stem -> its `what` array (PER_GRAPH: "inverse" or "runtime") for one table."""
    path = per_graph_path(paths, collection, split, what)
    if not path.exists():
        raise TpurankError(f"{path}: no {what} file; run {command('features')} first")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(
            path, f"unreadable {what} file ({e}); delete {path.parent} and rerun {command('features')}"
        ) from None
