"""Prepared graphs (`tpurank.prepare.cache.PreparedGraph`) as tensors, and the batches a network
scores (`nets.batch.Batch`): which configs a step samples, which configs validation scores, and
one split's graphs read from the cache.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch

from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.data.subsets import spread_configs
from tpurank.gnn.nets.batch import Batch
from tpurank.gnn.nets.tile_inputs import NodeShapes, node_tile_inputs, tile_inputs
from tpurank.prepare.cache import PreparedGraph, iter_prepared, no_rows


@dataclass
class GraphData:
    """One prepared graph, structure as tensors, configs kept compact in numpy until batched.

    Args:
        id: submission ID.
        kind: "layout" or "tile".
        node_feat: (n, F) float32 model-ready node features.
        opcode: (n,) long opcode ids.
        edge_index: (2, m) long, rows [operand, user]: the direction data flows.
        config_nodes: (k,) long positions of the configurable nodes (layout; empty for tile).
        configs: unique configs, layout int8 (u, k, 18) or tile float32 (u, 24): an ndarray, or the
            cache's `ConfigStore`, which decodes only the chunks a batch indexes.
        runtime: (u,) float64 training target per unique config: the mean of its measurements
            (0 for test).
        count: (u,) how many original configs each unique row stands for.
        inverse: (c,) original config index -> unique row.
        config_runtime: (c,) float64 each original config's own measurement: what validation scores.
        is_test: runtimes unknown.
        eval_rows: the official validation subset (original indices); empty where there is none.
        shapes: layout: the configurable nodes' shapes and own layouts (`tile_inputs.py`).
    """

    id: str
    kind: str
    node_feat: torch.Tensor
    opcode: torch.Tensor
    edge_index: torch.Tensor
    config_nodes: torch.Tensor
    configs: np.ndarray
    runtime: np.ndarray
    count: np.ndarray
    inverse: np.ndarray
    config_runtime: np.ndarray
    is_test: bool
    eval_rows: np.ndarray = field(default_factory=no_rows)
    shapes: NodeShapes | None = None

    @property
    def num_unique(self) -> int:
        return len(self.configs)

    @property
    def rankable(self) -> bool:
        """Has at least two configs with different runtimes (otherwise there is nothing to learn)."""
        return not self.is_test and self.num_unique >= 2 and bool(np.ptp(self.runtime) > 0)


def from_prepared(g: PreparedGraph, dim_features: bool = False) -> GraphData:
    """Convert one cache entry. The target is the mean of each config's measurements: the min of
    many noisy measurements is biased fast against configs measured once.

    Args:
        g: a graph from `tpurank.prepare.cache.load_prepared`.
        dim_features: append each node's dimensions against the 128-lane tile to its features
            (`gnn.dim_features`, `tile_inputs.node_tile_inputs`).
    """
    edges = np.asarray(g.edge_index, dtype=np.int64).reshape(-1, 2)
    feat = np.asarray(g.node_feat, dtype=np.float32)
    if dim_features:
        feat = np.concatenate([feat, node_tile_inputs(g.node_feat_raw)], axis=1)
    cfg_nodes = np.asarray(g.config_nodes, dtype=np.int64)
    return GraphData(
        id=g.id,
        kind=g.kind,
        node_feat=torch.from_numpy(np.ascontiguousarray(feat)),
        opcode=torch.from_numpy(np.asarray(g.node_opcode, dtype=np.int64)),
        edge_index=torch.from_numpy(
            np.stack([edges[:, 1], edges[:, 0]])
        ),  # [user, operand] -> [operand, user]
        config_nodes=torch.from_numpy(cfg_nodes),
        configs=g.configs,
        runtime=np.asarray(g.runtime_mean, dtype=np.float64),
        count=np.asarray(g.count, dtype=np.float32),
        inverse=np.asarray(g.inverse, dtype=np.int64),
        config_runtime=np.asarray(g.config_runtime, dtype=np.float64),
        is_test=g.is_test,
        eval_rows=np.asarray(g.eval_rows, dtype=np.int64),
        shapes=NodeShapes.from_raw(g.node_feat_raw[cfg_nodes], g.node_opcode[cfg_nodes])
        if g.kind == "layout"
        else None,
    )


def make_batch(graphs: list[GraphData], rows: list[np.ndarray], tile: bool = False) -> Batch:
    """Batch graphs with the given unique-config rows each (padded to the longest, masked).

    Args:
        graphs: the B graphs (all layout or all tile).
        rows: per graph, indices into its unique configs (at least one each).
        tile: layout: also compute the tile-aware inputs (a model with `gnn.tile_features` reads them).
    """
    c = max(len(r) for r in rows)
    kind = graphs[0].kind
    feats, ops, edges, node_graph, cnodes, cgraph, cfgs, tiles = [], [], [], [], [], [], [], []
    runtime = np.zeros((len(graphs), c), dtype=np.float64)
    mask = np.zeros((len(graphs), c), dtype=bool)
    weight = np.zeros((len(graphs), c), dtype=np.float32)
    offset = 0
    for b, (g, r) in enumerate(zip(graphs, rows, strict=True)):
        r = np.asarray(r, dtype=np.int64)
        padded = np.concatenate([r, np.full(c - len(r), r[0], dtype=np.int64)])
        n = len(g.opcode)
        feats.append(g.node_feat)
        ops.append(g.opcode)
        edges.append(g.edge_index + offset)
        node_graph.append(torch.full((n,), b, dtype=torch.long))
        cnodes.append(g.config_nodes + offset)
        cgraph.append(torch.full((len(g.config_nodes),), b, dtype=torch.long))
        cfgs.append(g.configs[padded])  # layout (C, k, 18); tile (C, 24)
        if tile and kind == "layout":
            if g.shapes is None:
                raise ValueError(f"{g.id}: no node shapes for the tile-aware inputs")
            tiles.append(tile_inputs(cfgs[-1], g.shapes))
        runtime[b] = g.runtime[padded]
        mask[b, : len(r)] = True
        weight[b, : len(r)] = g.count[r]
        offset += n
    if kind == "layout":
        configs = torch.from_numpy(np.concatenate(cfgs, axis=1))  # (C, K, 18)
    else:
        configs = torch.from_numpy(np.stack(cfgs).astype(np.float32))  # (B, C, 24)
    return Batch(
        node_feat=torch.cat(feats),
        opcode=torch.cat(ops),
        edge_index=torch.cat(edges, dim=1),
        node_graph=torch.cat(node_graph),
        num_graphs=len(graphs),
        config_nodes=torch.cat(cnodes),
        config_graph=torch.cat(cgraph),
        configs=configs,
        runtime=torch.from_numpy(runtime),
        mask=torch.from_numpy(mask),
        weight=torch.from_numpy(weight),
        config_tile=torch.from_numpy(np.concatenate(tiles, axis=1)) if tiles else None,
    )


WINDOW = 4  # a batch's rows of a graph come from a run of stored rows this many times `count` long


def batch_rows(g: GraphData, count: int, rng: np.random.Generator) -> np.ndarray:
    """The rows of `g` one training batch takes: `count` distinct ones drawn at random (all of them
    when the graph has fewer).

    The cache stores unique configs in a seeded random order, so a run of consecutive rows is a
    uniform sample of the graph's configs: rows are drawn from one random window of WINDOW x count
    rows (wrapping around), so a step decodes one or two config chunks instead of up to `count`.

    Args:
        g: the graph.
        count: configs per graph per step.
        rng: the caller's seeded generator.
    """
    u = g.num_unique
    if u <= count:
        return rng.permutation(u)
    window = min(u, WINDOW * count)
    start = int(rng.integers(u))
    return (start + rng.choice(window, size=count, replace=False)) % u


def eval_configs(g: GraphData, limit: int) -> np.ndarray:
    """Original config indices used for validation: the official subset where the cache has one,
    else all, or `limit` spread evenly (deterministic).

    Validation scores the original config list (duplicates included), as the competition does.

    Args:
        g: the graph.
        limit: the most configs to score (0 = all); the official validation uses at most 1000.
    """
    if len(g.eval_rows):
        return g.eval_rows
    return spread_configs(len(g.inverse), limit)


def load_split(
    paths: Paths, collection: str, split: str, progress: bool = True, dim_features: bool = False
) -> list[GraphData]:
    """Every prepared graph of a collection and split as GraphData (structure only: configs stay in
    the cache until a batch indexes them); `dim_features` as in `from_prepared` (the recipe's).

    Raises:
        TpurankError: when the cache holds no graph for it.
    """
    graphs = [
        from_prepared(g, dim_features)
        for g in tqdm(
            iter_prepared(paths.prepared, collection, split),
            desc=f"load {collection} {split}",
            unit="graph",
            disable=not progress,
            leave=False,
        )
    ]
    if not graphs:
        raise TpurankError(
            f"{paths.prepared}: no prepared {split} graphs for {collection}; run {command('prepare')}"
        )
    return graphs
