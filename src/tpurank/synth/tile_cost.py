"""The hidden cost of a tile kernel under each tile-size choice.

The kernel's output (shape S) is cut into tiles t; runtime is
`n_tiles * (per-tile overhead + max(compute, memory) + overlap * min(...))`. Compute and traffic see
the tile padded to (8|16, 128) with the dataset's padding weights and mode (`Physics.pad`); the
on-chip allocation is the fully padded tile, and a tile whose double-buffered working set overflows
the dataset's vector memory spills: each doubling beyond it adds `spill_slope` times the tile's time.
Each kernel also deviates by a hidden per-kernel compute and memory efficiency (`graph_sigma`).
"""

from __future__ import annotations

import numpy as np

from tpurank.synth.hlo import HloGraph
from tpurank.synth.physics import LANES, REFERENCE, SUBLANES, Physics, graph_rng


def _kernel_efficiency(graph: HloGraph, ph: Physics) -> tuple[float, float]:
    """Hidden (compute, memory) multipliers of one kernel (1, 1 under the reference physics)."""
    if ph.seed < 0 or ph.graph_sigma == 0:
        return 1.0, 1.0
    rng = graph_rng(ph, graph.node_opcode, graph.edge_index, graph.node_feat)
    c, m = np.exp(rng.normal(0.0, ph.graph_sigma, 2))
    return float(c), float(m)


def tile_cost(graph: HloGraph, tiles: np.ndarray, physics: Physics | None = None) -> np.ndarray:
    """Noise-free runtime in ns of each tile-size choice for a tile kernel.

    Args:
        graph: the kernel (its root_shape, root_etype_bytes and flops_per_output are used).
        tiles: (configs, rank) tile sizes along the root's dimensions (1..size).
        physics: the dataset's physics (default: `REFERENCE`).
    """
    ph = physics or REFERENCE
    shape = np.array(graph.root_shape or (1,), dtype=np.float64)
    tiles = tiles.astype(np.float64)
    itemsize = graph.root_etype_bytes or 4
    rows = SUBLANES * max(1, 4 // itemsize)
    n_tiles = np.prod(np.ceil(shape / tiles), axis=1)
    real = np.prod(tiles, axis=1)
    alloc = real * np.ceil(tiles[:, -1] / LANES) * LANES / tiles[:, -1]
    seen = real * ph.pad(tiles[:, -1], LANES, lanes=True)  # what compute and traffic pay for
    if tiles.shape[1] > 1:
        alloc *= np.ceil(tiles[:, -2] / rows) * rows / tiles[:, -2]
        seen *= ph.pad(tiles[:, -2], rows, lanes=False)
    # inputs + output, double-buffered; contraction kernels read a deeper input slab
    depth = 2.0 * (2.0 + min(graph.flops_per_output, 4096.0) / 256.0)
    working_set = alloc * itemsize * depth
    eff_c, eff_m = _kernel_efficiency(graph, ph)
    compute = seen * graph.flops_per_output / ph.vpu_flops_per_ns * eff_c
    memory = seen * itemsize * depth / ph.bytes_per_ns * eff_m
    per_tile = np.maximum(compute, memory) + ph.overlap * np.minimum(compute, memory) + ph.tile_overhead_ns
    spill = 1.0 + ph.spill_slope * np.log2(np.maximum(1.0, working_set / ph.vmem_bytes))
    return n_tiles * per_tile * spill + 0.05 * graph.other_cost_ns
