"""Neighbour aggregation of the message-passing layers as one sparse product per direction.

A BiSAGE layer (`layers.py`) sums, at every node, its operands' states and its users' states
(or their means), for all C configs of a pass at once. torch_geometric's SAGEConv does it with a
gather of every edge's source state and a scatter-add into its target, over (C, N, H) states: two
passes over an (C, M, H) message tensor per direction, whose scatter is the slowest op of a pass.
Here the states are node-major, (N, C, H), so one node's C x H values are one contiguous row, and
the aggregation is a product with the (N, N) adjacency, normalised once per batch (each row by
the node's in-degree for "mean"): A @ X over (N, C*H). On the CPU the adjacency is a CSR matrix
(torch's sparse kernels stream each row once, and the backward is the product with the
transposed matrix, also precomputed); elsewhere (CUDA, the tests' meta tensors) the same sums
are an index_select and an index_add on the node axis, as before. Either way the numbers are
PyG's: duplicate edges count twice, a node without neighbours gets zeros.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import torch


class _SparseProduct(torch.autograd.Function):
    """A @ x for a CSR matrix A and dense x (N, D); the gradient of x is A^T @ grad (precomputed A^T)."""

    @staticmethod
    def forward(ctx, a: torch.Tensor, at: torch.Tensor, x: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        ctx.at = at
        return a @ x

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> tuple[None, None, torch.Tensor]:  # type: ignore[override]
        return None, None, ctx.at @ grad.contiguous()


@dataclass
class Direction:
    """Aggregation at `target` nodes of the states of `source` nodes over the edges of one direction.

    Args:
        source, target: (M,) the edges' ends.
        scale: (M,) each edge's weight (1/in-degree of its target for "mean", 1 for "sum").
        num_nodes: N.
        csr, csr_t: the (N, N) weighted adjacency and its transpose as CSR (CPU only, else None).
    """

    source: torch.Tensor
    target: torch.Tensor
    scale: torch.Tensor
    num_nodes: int
    csr: torch.Tensor | None
    csr_t: torch.Tensor | None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) node-major states -> (N, ...) aggregated neighbour states."""
        if self.csr is not None and x.dtype == self.csr.dtype:
            flat = x.reshape(x.shape[0], -1)
            return _SparseProduct.apply(self.csr, self.csr_t, flat).view(x.shape)
        msg = x.index_select(0, self.source)
        msg = msg * self.scale.to(x.dtype).view(-1, *([1] * (x.dim() - 1)))
        return torch.zeros_like(x).index_add_(0, self.target, msg)


def _direction(source: torch.Tensor, target: torch.Tensor, n: int, mean: bool) -> Direction:
    degree = torch.zeros(n, dtype=torch.float32, device=source.device)
    degree.index_add_(0, target, torch.ones(len(target), dtype=torch.float32, device=source.device))
    scale = (1.0 / degree.clamp(min=1))[target] if mean else torch.ones(len(target), device=source.device)
    csr = csr_t = None
    if source.device.type == "cpu":
        idx = torch.stack([target, source])
        a = torch.sparse_coo_tensor(
            idx, scale, (n, n), check_invariants=False
        ).coalesce()  # duplicates add up
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
            csr = a.to_sparse_csr()
            csr_t = a.t().coalesce().to_sparse_csr()
    return Direction(source, target, scale, n, csr, csr_t)


@dataclass
class Adjacency:
    """Both edge directions of a batch's graph, normalised for the layers' aggregation.

    Args:
        from_operands: aggregation at each user of its operands' states (the data-flow direction).
        from_users: aggregation at each operand of its users' states.
    """

    from_operands: Direction
    from_users: Direction

    @classmethod
    def build(cls, edge_index: torch.Tensor, num_nodes: int, aggr: str) -> Adjacency:
        """From a (2, M) [operand, user] edge_index over `num_nodes` nodes; `aggr` "sum" or "mean"."""
        operand, user = edge_index[0], edge_index[1]
        mean = aggr == "mean"
        return cls(_direction(operand, user, num_nodes, mean), _direction(user, operand, num_nodes, mean))
