"""The tabular feature tables: built from the prepared cache, each kept while its key holds.

One parquet per collection and split, written graph by graph (row groups) into a temporary file
that is renamed when complete, so memory stays at one graph and an interrupted run leaves nothing
half-written. A table is rebuilt only when its build key (the prepared files, the feature code
version and the features config) changed, which makes the stage resumable. A model that reads the
tables (LightGBM) asks `require_tables`, which never builds one.
"""

from __future__ import annotations

import time
import zlib
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from tpurank.core.atomic import atomic_path
from tpurank.core.collections import kind_of
from tpurank.core.config import Config
from tpurank.core.declared import features_io
from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.provenance import write_sidecar
from tpurank.core.staleness import SEED, current
from tpurank.features import io
from tpurank.features.layout import layout_features
from tpurank.features.tile import tile_features
from tpurank.prepare.cache import PreparedGraph, load_prepared, prepared_path, read_index

FEATURES_VERSION = 3  # bump when a feature's definition changes: invalidates every stored table
ROW_GROUP_ROWS = 50_000  # rows buffered before a parquet row group is written (per-call overhead vs memory)


def add_relative(names: list[str], x: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Append `<col>_rel` = value minus its graph mean for every per-config column (not `g_*`).

    Trees split on absolute thresholds; the offset from the graph's mean puts configs of
    different graphs on one scale, which is what a within-graph ranking needs.

    Args:
        names: column names of `x`.
        x: (rows of one graph, columns) feature values.
    """
    per_config = np.array([not n.startswith("g_") for n in names], dtype=bool)
    block = x[:, per_config]
    rel = block - block.mean(axis=0, keepdims=True) if len(x) else block
    rel_names = [f"{n}_rel" for n, keep in zip(names, per_config, strict=True) if keep]
    return names + rel_names, np.concatenate([x, rel], axis=1)


def table_rows(g: PreparedGraph, cap: int, seed: int, fastest_share: float = 0.0) -> np.ndarray:
    """The rows of `g` its feature table holds: all, or `cap` of them (train graphs only): the
    fastest `fastest_share` of the cap by mean runtime, then a uniform draw from the rest, so the
    ranking's top is always seen (it decides the tile score) and the rest stays an unbiased sample
    (Kendall tau counts all pairs).

    Args:
        g: the graph.
        cap: most rows per train graph (0 = all).
        seed: with the graph's ID, seeds the draw.
        fastest_share: share of the cap taken by the fastest configs, 0..1.
    """
    if g.split != "train" or cap <= 0 or g.num_unique <= cap:
        return np.arange(g.num_unique)
    fast = np.argsort(g.runtime_mean, kind="stable")[: int(round(cap * fastest_share))]
    rest = np.setdiff1d(np.arange(g.num_unique), fast, assume_unique=True)
    rng = np.random.default_rng([seed, zlib.crc32(g.id.encode())])
    drawn = rng.choice(rest, size=cap - len(fast), replace=False)
    return np.sort(np.concatenate([fast, drawn]))


@dataclass
class GraphRows:
    """The feature rows of one graph: META_COLUMNS as arrays, then a float32 feature block."""

    meta: dict[str, np.ndarray]
    names: list[str]
    x: np.ndarray


def graph_table(g: PreparedGraph, cfg: Config) -> GraphRows:
    """The feature rows of one graph (features as float32, with their `_rel` companions).

    Args:
        g: the prepared graph.
        cfg: the run's config (for the `features` section and the seed).
    """
    rows = table_rows(g, cfg.features.max_configs_per_graph, cfg.seed, cfg.features.fastest_share)
    if g.kind == "tile":
        feats = tile_features(g, rows)
    else:
        feats = layout_features(g, rows, chunk_cells=cfg.features.chunk_cells, mxu=cfg.features.mxu_columns)
    names, x = add_relative(list(feats.columns), feats.to_numpy(np.float64))
    meta = {
        "graph": np.full(len(rows), g.id, dtype=object),
        "row": rows.astype(np.int32),
        "runtime": g.runtime_mean[rows].astype(np.float64),  # the label: mean over duplicates
        "runtime_min": g.runtime_min[rows].astype(np.float64),
    }
    return GraphRows(meta, names, x.astype(np.float32))


def to_arrow(parts: list[GraphRows]) -> pa.Table:
    """One Arrow table from several graphs' rows (built column by column from numpy: no pandas)."""
    names = parts[0].names
    if any(p.names != names for p in parts):
        raise TpurankError("feature builders produced different columns for graphs of one collection")
    x = np.concatenate([p.x for p in parts])
    cols = [pa.array(np.concatenate([p.meta[k] for p in parts])) for k in io.META_COLUMNS]
    cols += [pa.array(x[:, j]) for j in range(x.shape[1])]
    return pa.Table.from_arrays(cols, names=[*io.META_COLUMNS, *names])


def build_key(paths: Paths, cfg: Config, collection: str, split: str, stems: list[str]) -> str:
    """The key of one table (`StageIO.piece_key` on the stage's declaration): its prepared files,
    the feature code's version, the seed and the `features` section."""
    parts = {"version": FEATURES_VERSION, "table": [collection, split]}
    files = [prepared_path(paths.prepared, collection, split, stem) for stem in sorted(stems)]
    return features_io(paths).piece_key(parts, files, cfg, (SEED, "features"))


def table_is_current(paths: Paths, collection: str, split: str, key: str) -> bool:
    """The table is built, and of `key` (`build_key`: these prepared graphs and this config)."""
    return current(io.stored_key(paths, collection, split), key, io.table_files(paths, collection, split))


def prepared_stems(paths: Paths, collection: str, splits: list[str]) -> dict[str, list[str]]:
    """Split -> the stems of its prepared graphs, for the requested splits that have any."""
    index = read_index(paths.prepared)
    mine = index[index["collection"] == collection]
    found = {s: sorted(mine.loc[mine["split"] == s, "stem"].astype(str)) for s in splits}
    return {s: stems for s, stems in found.items() if stems}


def require_tables(paths: Paths, cfg: Config, collection: str, splits: list[str]) -> list[str]:
    """The requested splits that have prepared graphs, each table checked current: a model reads
    what `features` built and never builds it itself.

    Raises:
        TpurankError: naming the table that is missing, or built from other graphs or settings.
    """
    found = prepared_stems(paths, collection, splits)
    for split, stems in found.items():
        if not table_is_current(paths, collection, split, build_key(paths, cfg, collection, split, stems)):
            whole = io.stored_key(paths, collection, split) is not None and all(
                f.exists() for f in io.table_files(paths, collection, split)
            )
            table = io.table_path(paths, collection, split)
            why = "built from other prepared graphs or settings" if whole else "missing or unfinished"
            raise TpurankError(
                f"{table}: feature table {why}; run {command(f'features --collections {collection}')} first"
            )
    return list(found)


def build_table(paths: Paths, cfg: Config, collection: str, split: str, stems: list[str], key: str) -> dict:
    """Featurise every graph of one collection and split and write the three files atomically.

    Returns:
        summary numbers (graphs, rows, seconds, rows per second) also stored in the sidecar.
    """
    start = time.perf_counter()
    io.meta_path(paths, collection, split).unlink(missing_ok=True)  # a half-rebuilt table never looks done
    per_graph: dict[str, dict[str, np.ndarray]] = {what: {} for what in io.PER_GRAPH}
    n_rows = 0
    writer: pq.ParquetWriter | None = None
    target = io.table_path(paths, collection, split)
    with atomic_path(target, suffix=".parquet") as tmp:
        try:
            buffer: list[GraphRows] = []
            buffered = 0
            for i, stem in enumerate(
                tqdm(stems, desc=f"features {collection} {split}", unit="graph", leave=False)
            ):
                g = load_prepared(prepared_path(paths.prepared, collection, split, stem))
                buffer.append(graph_table(g, cfg))
                buffered += len(buffer[-1].x)
                per_graph["inverse"][stem] = g.inverse.astype(np.int32)
                per_graph["runtime"][stem] = g.config_runtime
                if buffered >= ROW_GROUP_ROWS or i == len(stems) - 1:  # small graphs are written together
                    table = to_arrow(buffer)
                    if writer is None:
                        writer = pq.ParquetWriter(tmp, table.schema)
                    writer.write_table(table)
                    n_rows += table.num_rows
                    buffer, buffered = [], 0
        finally:
            if writer is not None:
                writer.close()
    for what, arrays in per_graph.items():
        with atomic_path(io.per_graph_path(paths, collection, split, what), suffix=".npz") as tmp:
            np.savez(tmp, **arrays)
    seconds = time.perf_counter() - start
    summary = {
        "graphs": len(stems),
        "rows": n_rows,
        "seconds": round(seconds, 3),
        "rows_per_s": round(n_rows / max(seconds, 1e-9), 1),
    }
    write_sidecar(io.meta_path(paths, collection, split), cfg, paths.data, build_key=key, **summary)
    return summary


def build_features(
    paths: Paths, cfg: Config, collections: list[str], splits: list[str], force: bool = False
) -> dict[tuple[str, str], dict]:
    """Build (or reuse) the feature table of every requested collection and split in the cache.

    Args:
        paths: the run's paths.
        cfg: the run's config (per-collection overrides are applied here).
        collections: collections to build.
        splits: splits to build.
        force: rebuild even when the stored build key matches.

    Returns:
        (collection, split) -> summary ({"reused": True} for an up-to-date table).
    """
    done: dict[tuple[str, str], dict] = {}
    for collection in collections:
        kind_of(collection)
        ccfg = cfg.for_collection(collection)
        for split, stems in prepared_stems(paths, collection, splits).items():
            key = build_key(paths, ccfg, collection, split, stems)
            if not force and table_is_current(paths, collection, split, key):
                done[(collection, split)] = {"reused": True, "graphs": len(stems)}
                continue
            done[(collection, split)] = build_table(
                paths, ccfg, collection, split=split, stems=stems, key=key
            )
    if not done:
        raise TpurankError(
            f"{paths.prepared}: no prepared graphs for {', '.join(collections)} / {', '.join(splits)}"
        )
    return done
