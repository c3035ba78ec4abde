"""Build the cache entry of one graph file: load, prune, transform features, deduplicate, save.

Runs inside a worker process; it returns the graph's index row (plain dict) and never raises for
a bad file without naming it (DataError).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.errors import DataError
from tpurank.core.identity import zip_identity
from tpurank.core.staleness import StageIO
from tpurank.data.dataset import GraphFile
from tpurank.data.npz import NODE_FEAT_DIM, LayoutGraph, TileGraph, load_graph
from tpurank.prepare.cache import CACHE_FORMAT, SUMMARY_OPCODE, PreparedGraph, no_rows, save_prepared
from tpurank.prepare.dedup import Dedup, dedup_layout, dedup_tile
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


def build_key(io: StageIO, gf: GraphFile, params: BuildParams, eval_rows: np.ndarray | None = None) -> str:
    """The key of one cache file (`StageIO.piece_key` on the stage's declaration `io`): the input's
    content identity plus every parameter that changes the output.

    Args:
        io: the prepare stage's declaration.
        gf: the input file (tile graphs are never pruned, so hops and collapse do not enter their key).
        params: the stage parameters (the values of the `prepare` section that change this file:
            `prepare.jobs`, say, changes none).
        eval_rows: the graph's official validation subset, if any.
    """
    parts: dict[str, Any] = {"rule": params.rule.digest}
    if eval_rows is not None:
        parts["eval_rows"] = hashlib.sha256(np.asarray(eval_rows, dtype=np.int64).tobytes()).hexdigest()
    if gf.kind == "layout":
        parts.update(hops=params.hops, collapse=params.collapse)
    return io.piece_key({**parts, "format": FORMAT_VERSION}, [gf.path])


@dataclass(frozen=True)
class _Structure:
    """What pruning and deduplication keep of one graph: the kept nodes, their edges and the
    unique configurations (tile graphs keep every node and have no configurable ones)."""

    dedup: Dedup
    node_map: np.ndarray  # kept node -> original node (-1: a summary node)
    edges: np.ndarray
    config_nodes: np.ndarray  # kept position of each varying configurable node
    num_configurable: int


def _tile_structure(g: TileGraph) -> _Structure:
    d = dedup_tile(g.config_feat, g.config_runtime, g.config_runtime_normalizers)
    return _Structure(
        dedup=d,
        node_map=np.arange(g.num_nodes, dtype=np.int64),
        edges=g.edge_index.astype(np.int32),
        config_nodes=np.zeros(0, dtype=np.int32),
        num_configurable=0,
    )


def _layout_structure(gf: GraphFile, g: LayoutGraph, params: BuildParams) -> _Structure:
    n = g.num_nodes
    d = dedup_layout(
        gf.path, (g.num_configs, len(g.node_config_ids), 18), g.config_runtime.astype(np.float64)
    )
    p = prune(n, g.edge_index, g.node_config_ids, hops=params.hops, collapse=params.collapse)
    position = np.full(n, -1, dtype=np.int64)
    real = p.node_map >= 0
    position[p.node_map[real]] = np.flatnonzero(real)
    return _Structure(
        dedup=d,
        node_map=p.node_map,
        edges=p.edge_index,
        config_nodes=position[g.node_config_ids[d.varying]].astype(np.int32),
        num_configurable=len(g.node_config_ids),
    )


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
    st = _tile_structure(g) if isinstance(g, TileGraph) else _layout_structure(gf, g, params)
    d, node_map, edges, config_nodes = st.dedup, st.node_map, st.edges, st.config_nodes
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
    return prepared, _index_row(gf, g, st)


def _index_row(gf: GraphFile, g: LayoutGraph | TileGraph, st: _Structure) -> dict[str, Any]:
    """The graph's index row: its sizes before and after pruning and deduplication."""
    return {
        "collection": gf.collection,
        "split": gf.split,
        "id": gf.id,
        "stem": gf.stem,
        "nodes": g.num_nodes,
        "edges": len(g.edge_index),
        "nodes_kept": len(st.node_map),
        "edges_kept": len(st.edges),
        "summary_nodes": int((st.node_map < 0).sum()),
        "configurable_nodes": st.num_configurable,
        "varying_nodes": len(st.config_nodes),
        "configs": g.num_configs,
        "configs_unique": len(st.dedup.count),
        "is_test": bool(g.is_test),
    }


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
