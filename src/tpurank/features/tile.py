"""Tabular features of tile configurations: one row per unique config of a kernel graph.

A tile config is 24 numbers: kernel, output and input tile bounds, each 6 dims + sum + product.
How well the output bounds divide the kernel's output shape (tiles per dimension, padding waste)
is what separates fast from slow tilings; graph aggregates let one model serve every kernel.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from tpurank.features.common import NUM_OPCODES, ROOT_COL, log1p, node_shapes
from tpurank.prepare.cache import PreparedGraph

BLOCKS: tuple[str, ...] = ("k", "o", "i")  # kernel, output, input bounds (columns 0-7, 8-15, 16-23)
PARAMETER_OPCODE = 63


def config_columns() -> list[str]:
    """Names of the 24 raw config values: `<block>_b0..b5`, `<block>_sum`, `<block>_prod`."""
    return [f"{b}_{n}" for b in BLOCKS for n in (*(f"b{d}" for d in range(6)), "sum", "prod")]


def output_node(g: PreparedGraph) -> int:
    """The kernel's output node: the first root, else the last node."""
    roots = np.flatnonzero(g.node_feat_raw[:, ROOT_COL] > 0.5)
    return int(roots[0]) if len(roots) else g.num_nodes - 1


def tiling(shape: np.ndarray, bounds: np.ndarray) -> dict[str, np.ndarray]:
    """How a block of bounds tiles a shape, per config.

    Args:
        shape: (6,) output shape dims (0 = absent).
        bounds: (u, 6) tile bounds (0 = absent).

    Returns:
        tiles per dim `o_tiles<d>` = ceil(shape / bound), total tiles, and the padding waste
        prod(ceil(shape / bound) * bound) / prod(shape) - 1, over the dims where both are set.
    """
    shape = np.asarray(shape, dtype=np.float64)[None, :]
    both = (bounds > 0) & (shape > 0)
    safe = np.where(both, bounds, 1.0)
    tiles = np.where(both, np.ceil(shape / safe), 1.0)
    covered = np.where(both, tiles * safe, 1.0)
    real = np.where(both, shape, 1.0)
    out = {f"o_tiles{d}": tiles[:, d] for d in range(6)}
    out["o_tiles_log"] = np.log(tiles).sum(1)
    out["o_pad_waste"] = np.exp(np.log(covered).sum(1) - np.log(real).sum(1)) - 1.0
    out["o_dims_tiled"] = both.sum(1).astype(np.float64)
    return out


def graph_context(g: PreparedGraph) -> dict[str, float]:
    """Graph-level columns shared by every config: sizes, opcode histogram, shape statistics."""
    dims, rank, numel = node_shapes(g.node_feat_raw)
    root = output_node(g)
    ctx: dict[str, float] = {"g_nodes": float(g.num_nodes), "g_edges": float(len(g.edge_index))}
    for d in range(6):
        ctx[f"g_out_dim{d}_log"] = float(log1p(dims[root, d]))
    ctx["g_out_rank"] = float(rank[root])
    ctx["g_out_numel_log"] = float(log1p(numel[root]))
    order = np.argsort(-numel, kind="stable")
    ctx["g_max_numel_log"] = float(log1p(numel[order[0]])) if len(order) else 0.0
    ctx["g_max_rank"] = float(rank[order[0]]) if len(order) else 0.0
    ctx["g_sum_numel_log"] = float(log1p(numel.sum()))
    ctx["g_params"] = float((g.node_opcode == PARAMETER_OPCODE).sum())
    hist = np.bincount(g.node_opcode.astype(np.int64), minlength=NUM_OPCODES)[:NUM_OPCODES]
    for op in range(NUM_OPCODES):
        ctx[f"g_op{op}"] = float(hist[op])
    return ctx


def tile_features(g: PreparedGraph, rows: np.ndarray | None = None) -> pd.DataFrame:
    """Feature table of a tile graph: one row per unique config (or per row in `rows`).

    Args:
        g: the prepared tile graph.
        rows: unique-config indices to featurise (default: all).
    """
    rows = np.arange(g.num_unique) if rows is None else np.asarray(rows)
    cfg = g.configs[rows].astype(np.float64).reshape(len(rows), 24)
    cols: dict[str, np.ndarray] = dict(zip(config_columns(), cfg.T, strict=True))
    for bi, b in enumerate(BLOCKS):
        block = cfg[:, bi * 8 : bi * 8 + 8]
        cols[f"{b}_sum_log"] = log1p(block[:, 6])
        cols[f"{b}_prod_log"] = log1p(block[:, 7])
        cols[f"{b}_ndims"] = (block[:, :6] > 0).sum(1).astype(np.float64)
    dims, _, _ = node_shapes(g.node_feat_raw)
    cols.update(tiling(dims[output_node(g)], cfg[:, 8:14]))
    df = pd.DataFrame(cols, index=pd.RangeIndex(len(rows)))
    count = g.count[rows].astype(np.float64)
    df["count"] = count
    df["count_log"] = np.log(np.maximum(count, 1.0))
    context = pd.DataFrame({k: np.full(len(rows), v) for k, v in graph_context(g).items()})
    return pd.concat([df, context], axis=1)
