"""Graph segments for Graph Segment Training (gnn/gst/): contiguous runs of nodes, at most N each.

A layout graph's nodes are in program order (computations in proto order, instructions in order),
and pruning keeps that order, so a contiguous run of nodes is a connected-ish piece of the program.
Like the official GST code for TpuGraphs (`thres` nodes per part, equal intervals), a graph of n
nodes becomes ceil(n / N) runs of equal size; edges between two segments are cut (each segment is
message-passed on its own, also at prediction time, so training and scoring see the same model).

Segments are computed when a graph is first trained or scored, not stored in the prepared cache:
they cost one pass over the edge list (milliseconds), and they depend on a training option
(`gnn.segment_nodes`) that should be tunable without re-running `prepare`. `node_splits` (the
computation boundaries) is not in the cache either: boundaries between computations often fall
inside one segment-sized run anyway, and equal runs keep every segment's memory the same.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from tpurank.gnn.data import Batch, GraphData


@dataclass
class Segment:
    """One run of nodes [start, stop) of a graph.

    Args:
        start, stop: node positions.
        edge_index: (2, m_s) long, the edges with both ends inside, in local numbering.
        config_pos: (k_s,) long local positions of the configurable nodes inside.
        config_cols: (k_s,) int64 their columns in the graph's configs (and in `config_nodes`).
    """

    start: int
    stop: int
    edge_index: torch.Tensor
    config_pos: torch.Tensor
    config_cols: np.ndarray

    @property
    def num_nodes(self) -> int:
        return self.stop - self.start


def segment_bounds(num_nodes: int, max_nodes: int) -> np.ndarray:
    """Boundaries of ceil(n / max_nodes) runs of (nearly) equal size, each at most `max_nodes`.

    Args:
        num_nodes: nodes in the graph.
        max_nodes: the most nodes per segment (0 = one segment).
    """
    parts = 1 if max_nodes <= 0 else max(1, -(-num_nodes // max_nodes))
    return np.linspace(0, num_nodes, parts + 1).round().astype(np.int64)


def split_graph(g: GraphData, max_nodes: int) -> list[Segment]:
    """The segments of one graph (every node in exactly one; edges between segments cut).

    Args:
        g: the graph.
        max_nodes: the most nodes per segment (0 = the whole graph as one segment).
    """
    bounds = segment_bounds(len(g.opcode), max_nodes)
    edges = g.edge_index.numpy()
    src_seg = np.searchsorted(bounds, edges[0], side="right") - 1
    dst_seg = np.searchsorted(bounds, edges[1], side="right") - 1
    inside = src_seg == dst_seg
    edges, edge_seg = edges[:, inside], src_seg[inside]
    cpos = g.config_nodes.numpy()
    cseg = np.searchsorted(bounds, cpos, side="right") - 1
    out = []
    for s in range(len(bounds) - 1):
        start, stop = int(bounds[s]), int(bounds[s + 1])
        cols = np.flatnonzero(cseg == s)
        out.append(
            Segment(
                start=start,
                stop=stop,
                edge_index=torch.from_numpy(np.ascontiguousarray(edges[:, edge_seg == s] - start)),
                config_pos=torch.from_numpy(cpos[cols] - start),
                config_cols=cols,
            )
        )
    return out


def cut_edges(g: GraphData, segments: list[Segment]) -> int:
    """Edges of `g` that run between two segments (dropped by segment-wise message passing)."""
    return int(g.edge_index.shape[1]) - sum(int(s.edge_index.shape[1]) for s in segments)


def segment_batch(full: Batch, segments: list[Segment]) -> Batch:
    """The given segments of a one-graph batch as one batch whose "graphs" are the segments.

    Args:
        full: `make_batch([g], [rows])` of one graph (its C config slots are kept).
        segments: some of that graph's segments.
    """
    feats, ops, edges, node_seg, cnodes, cseg, cols = [], [], [], [], [], [], []
    offset = 0
    for i, s in enumerate(segments):
        feats.append(full.node_feat[s.start : s.stop])
        ops.append(full.opcode[s.start : s.stop])
        edges.append(s.edge_index + offset)
        node_seg.append(torch.full((s.num_nodes,), i, dtype=torch.long))
        cnodes.append(s.config_pos + offset)
        cseg.append(torch.full((len(s.config_pos),), i, dtype=torch.long))
        cols.append(torch.from_numpy(s.config_cols))
        offset += s.num_nodes
    return Batch(
        node_feat=torch.cat(feats),
        opcode=torch.cat(ops),
        edge_index=torch.cat(edges, dim=1),
        node_graph=torch.cat(node_seg),
        num_graphs=len(segments),
        config_nodes=torch.cat(cnodes),
        config_graph=torch.cat(cseg),
        configs=full.configs[:, torch.cat(cols)],
        config_tile=None if full.config_tile is None else full.config_tile[:, torch.cat(cols)],
        runtime=full.runtime,
        mask=full.mask.expand(len(segments), -1),  # (segments, C): per-node attention indexes it by segment
        weight=full.weight,
    )
