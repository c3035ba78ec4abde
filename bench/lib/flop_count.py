"""The FLOPs of a pass as torch's `FlopCounterMode` counts them, less what it counts for products with
a sparse matrix.

The counter reads a product's shapes only, so a CSR adjacency (N, N) times node states (N, D) counts
as the dense 2 * N * N * D, where the work is 2 * nnz * D: on a 223-node graph that is most of what
it counts per config. The neighbour sums it once did with index and scatter ops it never counted,
so the sparse products are left out too: one count for the same maths before and after the GNN's
message passing became CSR products, as `bench_gnn_pace.py --against` needs (both sides counted
alike) and `bench_gpu_projection.py`'s FLOP-bound times assume (the dense matmuls).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

SPARSE = (torch.sparse_csr, torch.sparse_coo, torch.sparse_csc)
PRODUCTS = {torch.ops.aten.mm.default: (0, 1), torch.ops.aten.addmm.default: (1, 2)}


@dataclass
class Count:
    """The count so far: `total` once the `counted` block has ended."""

    counted: int = 0
    sparse_as_dense: int = 0

    @property
    def total(self) -> int:
        return self.counted - self.sparse_as_dense


class _SparseProducts(TorchDispatchMode):
    """Adds up what the counter will count for each product with a sparse operand (as dense)."""

    def __init__(self, count: Count) -> None:
        super().__init__()
        self.count = count

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func in PRODUCTS:
            a, b = (args[i] for i in PRODUCTS[func])
            if a.layout in SPARSE or b.layout in SPARSE:
                self.count.sparse_as_dense += 2 * a.shape[0] * a.shape[1] * b.shape[1]
        return func(*args, **(kwargs or {}))


@contextmanager
def counted() -> Iterator[Count]:
    """FLOPs of what runs inside the block, products with a sparse matrix left out (see above)."""
    count = Count()
    with FlopCounterMode(display=False) as counter, _SparseProducts(count):
        yield count
    count.counted = counter.get_total_flops()
