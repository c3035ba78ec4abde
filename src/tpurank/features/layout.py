"""Tabular features of layout configurations: one row per unique config of a graph.

A layout config gives each configurable node its output / input / kernel minor-to-major layout
(all -1 = the compiler's default). What makes one layout slow is mostly (a) padding: TPU memory tiles
the two most minor dimensions by (8, 128), so a minor dimension that is not a multiple of 128 wastes
space and bandwidth, and (b) copies: when a consumer asks for its operand in a layout other than the
one its producer wrote, the compiler inserts a transpose. Both are computed here for every config at
once with numpy (configs are processed in chunks so a 100k-config x 3k-node graph fits in memory).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
import scipy.sparse as sp

from tpurank.features.common import OWN_LAYOUT_COLS, element_bytes, log1p, node_shapes, padded
from tpurank.features.mxu import MxuDims, mxu_columns, mxu_flags
from tpurank.prepare.cache import PreparedGraph

OP_GROUPS: dict[int, str] = {26: "conv", 34: "dot", 41: "fusion", 75: "reshape"}  # the configurable opcodes
GROUP_NAMES: tuple[str, ...] = (*OP_GROUPS.values(), "other")
# Output layout pattern of a node: at default, minor dim = the last dim (row-major), second-to-last, other.
PATTERNS: tuple[str, ...] = ("def", "last", "second", "other")
LANE, SUBLANE = 128, 8  # TPU memory tile of the two most minor dimensions
CHUNK_CELLS = 2_000_000  # configs x (nodes + pairs) per numpy step (~85 bytes each: ~170 MB peak)


@dataclass
class LayoutNodes:
    """Per-configurable-node facts of one graph, computed once and shared by all its configs.

    Args:
        group: opcode group index into GROUP_NAMES (k,).
        dims: shape dims (k, 7) with a trailing 1 (index 6 stands for "no dimension").
        rank: (k,).
        numel: element count (k,).
        nbytes: tensor bytes (k,).
        own: the node's own layout (k, 6) int8, -1 beyond its rank (the layout used at default).
        direct: (P, 2) [producer, consumer] pairs of configurable nodes joined by an edge.
        two_hop: (Q, 2) pairs joined through exactly one non-configurable node.
        mxu: the contracted and feature dimensions of the convolutions and dots (`features/mxu.py`).
    """

    group: np.ndarray
    dims: np.ndarray
    rank: np.ndarray
    numel: np.ndarray
    nbytes: np.ndarray
    own: np.ndarray
    direct: np.ndarray
    two_hop: np.ndarray
    mxu: MxuDims


def configurable_pairs(
    edge_index: np.ndarray, config_nodes: np.ndarray, n: int
) -> tuple[np.ndarray, np.ndarray]:
    """Producer -> consumer pairs among configurable nodes, direct and through one other node.

    Args:
        edge_index: (m, 2) rows [user, operand] of the (pruned) graph.
        config_nodes: (k,) node positions of the configurable nodes.
        n: number of nodes.

    Returns:
        direct (P, 2) and two_hop (Q, 2) arrays of [producer, consumer] indices into 0..k-1.
    """
    k = len(config_nodes)
    if len(edge_index) == 0 or k == 0:
        empty = np.zeros((0, 2), dtype=np.int64)
        return empty, empty
    users, operands = edge_index[:, 0].astype(np.int64), edge_index[:, 1].astype(np.int64)
    a = sp.csr_matrix((np.ones(len(users)), (users, operands)), shape=(n, n))  # a[user, operand]
    is_cfg = np.zeros(n, dtype=bool)
    is_cfg[config_nodes] = True
    a_cc = a[config_nodes][:, config_nodes].tocoo()
    through = (a[config_nodes] @ sp.diags((~is_cfg).astype(np.float64)) @ a[:, config_nodes]).tocoo()

    def pairs(m: sp.coo_matrix) -> np.ndarray:
        keep = m.row != m.col
        out = np.stack([m.col[keep], m.row[keep]], axis=1).astype(np.int64)  # [producer, consumer]
        return np.unique(out, axis=0) if len(out) else out.reshape(0, 2)

    return pairs(a_cc), pairs(through)


def node_layout_facts(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(dims (k, 7) with a trailing 1, rank (k,), own layout (k, 6) int8, -1 beyond the rank) of nodes.

    Args:
        raw: node_feat_raw rows (k, 140) of the configurable nodes.
    """
    dims, rank, _ = node_shapes(raw)
    dims7 = np.concatenate([dims, np.ones((len(raw), 1), dtype=np.int64)], axis=1)
    own = raw[:, OWN_LAYOUT_COLS].astype(np.int8)
    own[np.arange(6)[None, :] >= rank[:, None]] = -1
    return dims7, rank, own


def effective_layout(configs: np.ndarray, own: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the output layout each node gets (u, k, 6), whether the config sets it (u, k)): a config's
    all -1 output layout means the node keeps its own."""
    out = configs[:, :, 0:6]
    out_set = (out != -1).any(-1)
    return np.where(out_set[..., None], out, own[None]), out_set


def minor_sizes(
    eff: np.ndarray, dims7: np.ndarray, rank: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(minor-most dim index (u, k), its size, the second-minor size) under the layouts `eff`:
    the two dimensions the TPU tiles by (8, 128). Sizes are >= 1; the second is 1 below rank 2."""
    node_ix = np.arange(eff.shape[1])[None, :]
    m0 = eff[..., 0].astype(np.int64)
    m1 = eff[..., 1].astype(np.int64)
    s0 = np.maximum(dims7[node_ix, np.where(m0 < 0, 6, m0)], 1).astype(np.float64)
    s1 = np.maximum(dims7[node_ix, np.where(m1 < 0, 6, m1)], 1).astype(np.float64)
    return m0, s0, np.where(rank[None, :] >= 2, s1, 1.0)


def layout_nodes(g: PreparedGraph) -> LayoutNodes:
    """Per-configurable-node facts of a prepared layout graph.

    Args:
        g: the prepared graph.
    """
    idx = g.config_nodes.astype(np.int64)
    raw = g.node_feat_raw[idx]
    dims7, rank, own = node_layout_facts(raw)
    numel = node_shapes(raw)[2]
    ops = g.node_opcode[idx].astype(np.int64)
    group = np.full(len(idx), len(GROUP_NAMES) - 1, dtype=np.int64)
    for i, op in enumerate(OP_GROUPS):
        group[ops == op] = i
    direct, two_hop = configurable_pairs(g.edge_index, idx, g.num_nodes)
    return LayoutNodes(
        group,
        dims7,
        rank,
        numel=numel,
        nbytes=numel * element_bytes(raw),
        own=own,
        direct=direct,
        two_hop=two_hop,
        mxu=MxuDims.from_raw(raw, g.node_opcode[idx]),
    )


def _pair_features(
    eff: np.ndarray, inp: np.ndarray, nodes: LayoutNodes, pairs: np.ndarray, name: str
) -> dict:
    """Copies forced by producer/consumer layout disagreement over `pairs`, per config."""
    uc = eff.shape[0]
    if len(pairs) == 0:
        z = np.zeros(uc)
        return {f"copies_{name}": z, f"copy_bytes_{name}_log": z, f"outdiff_{name}": z}
    p, q = pairs[:, 0], pairs[:, 1]
    out_p = eff[:, p]  # (uc, P, 6) what the producer writes
    in_q = inp[:, q]  # what the consumer asks for (-1 = accepts whatever it gets)
    copy = (in_q != -1).any(-1) & (in_q != out_p).any(-1)
    same_rank = nodes.rank[p] == nodes.rank[q]
    outdiff = same_rank[None, :] & (eff[:, q] != out_p).any(-1)
    return {
        f"copies_{name}": copy.sum(1).astype(np.float64),
        f"copy_bytes_{name}_log": log1p(copy @ nodes.nbytes[p]),
        f"outdiff_{name}": outdiff.sum(1).astype(np.float64),
    }


def config_features(configs: np.ndarray, nodes: LayoutNodes, mxu: bool = False) -> dict[str, np.ndarray]:
    """Per-config feature columns for a block of configs.

    Args:
        configs: (u, k, 18) int8 layouts (output, input, kernel; -1 = default).
        nodes: the graph's per-node facts.
        mxu: add the MXU columns (`features/mxu.py`, `features.mxu_columns`).

    Returns:
        column name -> (u,) float64.
    """
    u, k = configs.shape[:2]
    inp = configs[:, :, 6:12]
    eff, out_set = effective_layout(configs, nodes.own)  # the layout each node actually gets
    m0, s0, s1 = minor_sizes(eff, nodes.dims, nodes.rank)
    f = _set_columns(configs, out_set, m0, nodes)
    f.update(_padding_columns(out_set, s0, s1, nodes))
    f.update(_pair_features(eff, inp, nodes, pairs=nodes.direct, name="direct"))
    f.update(_pair_features(eff, inp, nodes, pairs=nodes.two_hop, name="2hop"))
    if mxu:
        f.update(mxu_columns(mxu_flags(configs, eff, nodes.mxu), nodes.nbytes))
    means = configs.mean(1, dtype=np.float64) if k else np.zeros((u, 18))
    for j in range(18):
        f[f"pos{j}_mean"] = means[:, j]
    return f


def _set_columns(
    configs: np.ndarray, out_set: np.ndarray, m0: np.ndarray, nodes: LayoutNodes
) -> dict[str, np.ndarray]:
    """What each config sets: the nodes it sets a layout of (any, output, input, kernel; those set to
    their own layout), and per node group how the output layouts it sets order the dimensions
    (PATTERNS: not set, the last dimension minor, the second last, another).

    Args:
        configs: (u, k, 18) int8 layouts.
        out_set: (u, k) the nodes whose output layout the config sets (`effective_layout`).
        m0: (u, k) each node's minor dimension under the config (`minor_sizes`).
        nodes: the graph's per-node facts.
    """
    u, k = configs.shape[:2]
    out, inp = configs[:, :, 0:6], configs[:, :, 6:12]
    any_set = (configs != -1).any(-1)
    rank = nodes.rank[None, :]
    f: dict[str, np.ndarray] = {}
    f["n_set"] = any_set.sum(1).astype(np.float64)
    f["frac_default"] = 1.0 - any_set.mean(1) if k else np.ones(u)
    f["n_out_set"] = out_set.sum(1).astype(np.float64)
    f["n_in_set"] = (inp != -1).any(-1).sum(1).astype(np.float64)
    f["n_kernel_set"] = (configs[:, :, 12:18] != -1).any(-1).sum(1).astype(np.float64)
    f["n_same_as_own"] = (out_set & (out == nodes.own[None]).all(-1)).sum(1).astype(np.float64)
    pattern = np.where(~out_set, 0, np.where(m0 == rank - 1, 1, np.where(m0 == rank - 2, 2, 3)))
    n_codes = len(GROUP_NAMES) * len(PATTERNS)
    code = nodes.group[None, :] * len(PATTERNS) + pattern + n_codes * np.arange(u)[:, None]
    counts = np.bincount(code.ravel(), minlength=n_codes * u).reshape(u, n_codes).astype(np.float64)
    for gi, gname in enumerate(GROUP_NAMES):
        for pi, pname in enumerate(PATTERNS):
            f[f"n_{gname}_{pname}"] = counts[:, gi * len(PATTERNS) + pi]
    return f


def _padding_columns(
    out_set: np.ndarray, s0: np.ndarray, s1: np.ndarray, nodes: LayoutNodes
) -> dict[str, np.ndarray]:
    """How each config's layouts fit the TPU's tiles: the changed nodes whose minor dimensions align
    to LANE and SUBLANE, their bytes, and the bytes padding to the tiles wastes.

    Args:
        out_set: (u, k) the nodes whose output layout the config sets.
        s0, s1: (u, k) each node's minor and second-minor sizes under the config (`minor_sizes`).
        nodes: the graph's per-node facts.
    """
    u = len(out_set)
    rank = nodes.rank[None, :]
    pad0 = np.where(rank >= 1, padded(s0, LANE), s0)
    pad1 = np.where(rank >= 2, padded(s1, SUBLANE), s1)
    numel = nodes.numel[None, :]
    padded_numel = np.where(numel > 0, numel / (s0 * s1) * pad0 * pad1, 0.0)
    waste = (padded_numel - numel) * (nodes.nbytes / np.maximum(nodes.numel, 1.0))[None, :]
    changed = out_set & (rank >= 1)
    f: dict[str, np.ndarray] = {}
    f["chg_minor_aligned128"] = (changed & (s0 % LANE == 0)).sum(1).astype(np.float64)
    f["chg_minor_small"] = (changed & (s0 < LANE)).sum(1).astype(np.float64)
    f["chg_second_aligned8"] = (changed & (rank >= 2) & (s1 % SUBLANE == 0)).sum(1).astype(np.float64)
    f["chg_bytes_log"] = log1p(changed @ nodes.nbytes)
    f["chg_pad_waste_log"] = log1p((waste * changed).sum(1))
    f["pad_waste_log"] = log1p(waste.sum(1))
    total = nodes.nbytes.sum()
    f["pad_ratio"] = (total + waste.sum(1)) / total if total > 0 else np.ones(u)
    has_dim = rank >= 1
    n_dim = max(int(has_dim.sum()), 1)
    f["minor_aligned128_frac"] = (has_dim & (s0 % LANE == 0)).sum(1) / n_dim
    return f


def graph_context(g: PreparedGraph, nodes: LayoutNodes) -> dict[str, float]:
    """Graph-level columns shared by every config of the graph."""
    ctx: dict[str, float] = {
        "g_nodes": float(g.num_nodes),
        "g_edges": float(len(g.edge_index)),
        "g_cfg_nodes": float(len(g.config_nodes)),
        "g_cfg_bytes_log": float(log1p(nodes.nbytes.sum())),
        "g_pairs_direct": float(len(nodes.direct)),
        "g_pairs_2hop": float(len(nodes.two_hop)),
        "g_unique_configs": float(g.num_unique),
        "g_configs": float(g.num_configs),
    }
    for gi, gname in enumerate(GROUP_NAMES):
        ctx[f"g_cfg_{gname}"] = float((nodes.group == gi).sum())
    return ctx


def layout_features(
    g: PreparedGraph, rows: np.ndarray | None = None, chunk_cells: int = CHUNK_CELLS, mxu: bool = False
) -> pd.DataFrame:
    """Feature table of a layout graph: one row per unique config (or per row in `rows`).

    Args:
        g: the prepared layout graph.
        rows: unique-config indices to featurise (default: all).
        chunk_cells: configs x (nodes + pairs) per numpy step; bounds peak memory.
        mxu: add the MXU columns (`features/mxu.py`).

    Returns:
        a DataFrame with per-config columns, `count`/`count_log` and the graph context columns.
    """
    rows = np.arange(g.num_unique) if rows is None else np.asarray(rows)
    nodes = layout_nodes(g)
    width = max(len(g.config_nodes) + len(nodes.direct) + len(nodes.two_hop), 1)
    step = max(1, chunk_cells // width)
    parts: list[dict[str, np.ndarray]] = []
    for a in range(0, max(len(rows), 1), step):  # at least one (maybe empty) block, so columns exist
        parts.append(config_features(g.configs[rows[a : a + step]], nodes, mxu=mxu))
    cols = {name: np.concatenate([p[name] for p in parts]) for name in parts[0]}
    df = pd.DataFrame(cols, index=pd.RangeIndex(len(rows)))
    count = g.count[rows].astype(np.float64)
    df["count"] = count
    df["count_log"] = np.log(np.maximum(count, 1.0))
    for name, value in graph_context(g, nodes).items():
        df[name] = value
    return df
