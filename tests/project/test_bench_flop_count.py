"""bench/lib/flop_count.py: torch's FLOP counter less its dense reading of sparse products, so the
GNN's FLOPs per config read the same whether its neighbour sums are scatters or CSR products."""

from __future__ import annotations

import pytest
import torch
from helpers import bench_on_path

bench_on_path()
import flop_count  # noqa: E402


@pytest.mark.parametrize("grad", [False, True])
def test_a_sparse_product_counts_nothing_and_the_dense_ones_what_torch_counts(grad: bool) -> None:
    nodes, width, out = 50, 8, 4
    adj = torch.eye(nodes).to_sparse_csr()
    x = torch.randn(nodes, width, requires_grad=grad)
    w = torch.randn(width, out)
    with flop_count.counted() as count:
        y = (adj @ x) @ w
        if grad:
            y.sum().backward()
    dense = 2 * nodes * width * out  # (adj @ x) @ w forward; its backward to adj @ x is as many
    assert count.total == dense * (2 if grad else 1)
    assert count.sparse_as_dense == 2 * nodes * nodes * width * (2 if grad else 1)


def test_the_scatter_form_of_the_same_sums_counts_the_same() -> None:
    nodes, width, out = 30, 8, 4
    edges = torch.randint(0, nodes, (2, 90))
    x, w = torch.randn(nodes, width), torch.randn(width, out)
    values = torch.ones(edges.shape[1])
    adj = torch.sparse_coo_tensor(edges, values, (nodes, nodes)).coalesce().to_sparse_csr()
    with flop_count.counted() as sparse:
        a = (adj @ x) @ w
    with flop_count.counted() as scatter:
        b = torch.zeros(nodes, width).index_add_(0, edges[0], x[edges[1]]) @ w
    torch.testing.assert_close(a, b)
    assert sparse.total == scatter.total == 2 * nodes * width * out
