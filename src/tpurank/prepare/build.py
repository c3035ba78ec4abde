"""Build the cache entry of one graph file: load, prune, transform features, deduplicate, save.

Runs inside a worker process; it returns the graph's index row (plain dict) and never raises for
a bad file without naming it (DataError).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.errors import DataError
from tpurank.core.identity import zip_identity
from tpurank.data.dataset import GraphFile
from tpurank.data.npz import NODE_FEAT_DIM, TileGraph, load_graph
from tpurank.prepare.cache import CACHE_FORMAT, SUMMARY_OPCODE, PreparedGraph, no_rows, save_prepared
from tpurank.prepare.dedup import dedup_layout, dedup_tile
from tpurank.prepare.node_features import FeatureRule
from tpurank.prepare.prune import prune

FORMAT_VERSION = CACHE_FORMAT  # bump CACHE_FORMAT when the layout or a build step changes: outputs rebuild


@dataclass(frozen=True)
class BuildParams:
    """What besides the input file decides an output (part of every output's build key)."""

    hops: int
    collapse: bool
    rule: FeatureRule


def input_identity(gf: GraphFile) -> str:
    """The npz's content identity (its zip directory: tpurank.core.identity); an unreadable file
    gets a marker, so it is built, and its build names the problem."""
    try:
        return zip_identity(gf.path)
    except DataError:
        return "unreadable"


def build_key(gf: GraphFile, params: BuildParams, eval_rows: np.ndarray | None = None) -> str:
    """The input's content identity plus every parameter that changes the output.

    Args:
        gf: the input file (tile graphs are never pruned, so hops and collapse do not enter their key).
        params: the stage parameters.
        eval_rows: the graph's official validation subset, if any.
    """
    parts: dict[str, Any] = {"input": input_identity(gf), "rule": params.rule.digest}
    if eval_rows is not None:
        parts["eval_rows"] = hashlib.sha256(np.asarray(eval_rows, dtype=np.int64).tobytes()).hexdigest()
    if gf.kind == "layout":
        parts.update(hops=params.hops, collapse=params.collapse)
    text = json.dumps({**parts, "format": FORMAT_VERSION}, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def build_graph(
    gf: GraphFile, params: BuildParams, eval_rows: np.ndarray | None = None
) -> tuple[PreparedGraph, dict[str, Any]]:
    """The prepared graph of one file and its index row (without path and bytes).

    Args:
        gf: the input file.
        params: pruning and feature parameters.
        eval_rows: the official validation subset of this graph (original config indices), if any.

    Raises:
        DataError: the file breaks the format.
    """
    g = load_graph(gf.path, gf.kind, config_dtype=None)
    n, m = g.num_nodes, len(g.edge_index)
    if isinstance(g, TileGraph):
        d = dedup_tile(g.config_feat, g.config_runtime, g.config_runtime_normalizers)
        node_map = np.arange(n, dtype=np.int64)
        edges = g.edge_index.astype(np.int32)
        config_nodes = np.zeros(0, dtype=np.int32)
        num_configurable = 0
    else:
        d = dedup_layout(
            gf.path, (g.num_configs, len(g.node_config_ids), 18), g.config_runtime.astype(np.float64)
        )
        p = prune(n, g.edge_index, g.node_config_ids, hops=params.hops, collapse=params.collapse)
        node_map, edges = p.node_map, p.edge_index
        position = np.full(n, -1, dtype=np.int64)
        real = node_map >= 0
        position[node_map[real]] = np.flatnonzero(real)
        config_nodes = position[g.node_config_ids[d.varying]].astype(np.int32)
        num_configurable = len(g.node_config_ids)
    real = node_map >= 0
    raw = np.zeros((len(node_map), NODE_FEAT_DIM), dtype=np.float32)
    raw[real] = g.node_feat[node_map[real]]
    opcode = np.full(len(node_map), SUMMARY_OPCODE, dtype=np.uint8)
    opcode[real] = g.node_opcode[node_map[real]]
    prepared = PreparedGraph(
        id=gf.id,
        collection=gf.collection,
        split=gf.split,
        stem=gf.stem,
        node_feat=params.rule.apply(raw),  # for callers; the file stores only raw + kept columns
        node_feat_raw=raw,
        node_opcode=opcode,
        edge_index=np.ascontiguousarray(edges, dtype=np.int32),
        node_map=node_map,
        config_nodes=config_nodes,
        configs=d.configs,
        runtime_min=d.runtime_min,
        runtime_mean=d.runtime_mean,
        count=d.count,
        inverse=d.inverse,
        config_runtime=np.asarray(d.runtime, dtype=np.float64),
        is_test=bool(g.is_test),
        eval_rows=_checked_rows(gf, eval_rows, g.num_configs),
    )
    row = {
        "collection": gf.collection,
        "split": gf.split,
        "id": gf.id,
        "stem": gf.stem,
        "nodes": n,
        "edges": m,
        "nodes_kept": len(node_map),
        "edges_kept": len(edges),
        "summary_nodes": int((~real).sum()),
        "configurable_nodes": num_configurable,
        "varying_nodes": len(config_nodes),
        "configs": g.num_configs,
        "configs_unique": len(d.count),
        "is_test": bool(g.is_test),
    }
    return prepared, row


def _checked_rows(gf: GraphFile, rows: np.ndarray | None, configs: int) -> np.ndarray:
    if rows is None:
        return no_rows()
    rows = np.asarray(rows, dtype=np.int64)
    if rows.size and (rows.min() < 0 or rows.max() >= configs):
        raise DataError(
            gf.path, f"its official eval_indices reach config {rows.max()}, the file has {configs}"
        )
    return rows


def build_file(
    gf: GraphFile, params: BuildParams, out: Path, key: str, eval_rows: np.ndarray | None = None
) -> dict[str, Any]:
    """Build one graph and write it atomically to `out`; return its full index row."""
    prepared, row = build_graph(gf, params, eval_rows)
    row.update(input=input_identity(gf), key=key)  # what predict checks the data against
    save_prepared(out, prepared, key=key, info=row, keep=params.rule.keep)
    return row
