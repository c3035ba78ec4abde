"""Prune a layout graph to the k-hop neighbourhood of its configurable nodes.

Layout graphs have up to ~40k nodes but only the nodes near a configurable node see its layout
(the 1st-place solution kept 1 hop: 4x less memory, 5x faster). Optionally every connected run of
removed nodes becomes one summary node, so paths between configurable nodes survive pruning.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components


@dataclass
class Pruned:
    """The kept part of a graph.

    node_map holds the original id of each kept node, -1 for a summary node (summaries come last,
    ordered by their smallest original member); edge_index is re-indexed into kept positions.
    """

    node_map: np.ndarray  # int64 (n_kept,)
    edge_index: np.ndarray  # int32 (m_kept, 2) [user, operand]
    num_summary: int

    @property
    def num_nodes(self) -> int:
        return len(self.node_map)


def _undirected(num_nodes: int, edge_index: np.ndarray) -> sp.csr_matrix:
    """Boolean adjacency in both directions: products stay boolean (an int8 count would wrap at 128)."""
    u, v = edge_index[:, 0], edge_index[:, 1]
    data = np.ones(2 * len(u), dtype=bool)
    return sp.csr_matrix(
        (data, (np.concatenate([u, v]), np.concatenate([v, u]))), shape=(num_nodes, num_nodes)
    )


def khop_mask(num_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int) -> np.ndarray:
    """Nodes within `hops` edges of any seed, edges followed in both directions.

    Args:
        num_nodes: nodes in the graph.
        edge_index: (m, 2) edges.
        seeds: node ids to start from.
        hops: the radius; negative keeps every node.
    """
    if hops < 0:
        return np.ones(num_nodes, dtype=bool)
    mask = np.zeros(num_nodes, dtype=bool)
    mask[np.asarray(seeds, dtype=np.int64)] = True
    if hops == 0 or len(edge_index) == 0:
        return mask
    adj = _undirected(num_nodes, edge_index)
    frontier = mask.copy()
    for _ in range(hops):
        reached = adj @ frontier  # bool: True where any neighbour is in the frontier
        frontier = reached & ~mask
        if not frontier.any():
            break
        mask |= frontier
    return mask


def prune(
    num_nodes: int, edge_index: np.ndarray, seeds: np.ndarray, hops: int, collapse: bool = False
) -> Pruned:
    """Keep the seeds and their k-hop neighbourhood; re-index the edges.

    Args:
        num_nodes: nodes in the graph.
        edge_index: (m, 2) edges [user, operand].
        seeds: the configurable nodes (always kept).
        hops: neighbourhood radius (negative: keep the whole graph).
        collapse: replace each connected component of removed nodes by one summary node wired to
            the kept nodes it touched (directions preserved), instead of dropping it.
    """
    edge_index = np.asarray(edge_index, dtype=np.int64).reshape(-1, 2)
    keep = khop_mask(num_nodes, edge_index, seeds, hops)
    kept = np.flatnonzero(keep)
    new_id = np.full(num_nodes, -1, dtype=np.int64)
    new_id[kept] = np.arange(len(kept))
    num_summary = 0
    if collapse and not keep.all():
        removed = np.flatnonzero(~keep)
        internal = ~keep[edge_index[:, 0]] & ~keep[edge_index[:, 1]]
        sub = _undirected(num_nodes, edge_index[internal])[removed][:, removed]
        num_summary, label = connected_components(sub, directed=False)
        # number components by their smallest member: `removed` is ascending, so first hits give it
        _, first = np.unique(label, return_index=True)
        order = np.empty(num_summary, dtype=np.int64)
        order[np.argsort(first, kind="stable")] = np.arange(num_summary)
        new_id[removed] = len(kept) + order[label]
    e = new_id[edge_index]
    e = e[(e >= 0).all(axis=1) & (e[:, 0] != e[:, 1])]
    if num_summary:
        e = np.unique(e, axis=0)  # many edges into one summary become one
    node_map = np.concatenate([kept, np.full(num_summary, -1, dtype=np.int64)])
    return Pruned(node_map=node_map, edge_index=e.astype(np.int32), num_summary=int(num_summary))
