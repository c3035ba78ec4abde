"""What a network scores: B graphs with C config slots each.

A batch is the disjoint union of B graphs plus C config slots: slot c of graph b holds one of b's
unique configs. Layout configs are a (C, K, 18) tensor over the K configurable nodes of the whole
batch, so a network scores all C configs of every graph in one pass over one shared edge_index.
Graphs with fewer than C configs are padded with their first row and masked out
(`gnn/data.py` builds batches from prepared graphs).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import torch


@dataclass
class Batch:
    """B graphs with C config slots each (see the module docstring).

    Args:
        node_feat: (N, F); opcode: (N,); edge_index: (2, M) [operand, user] in batch node numbering.
        node_graph: (N,) graph of each node; num_graphs: B.
        config_nodes: (K,) batch positions of configurable nodes; config_graph: (K,) their graph.
        configs: layout (C, K, 18) int8; tile (B, C, 24) float32.
        runtime: (B, C) float64; mask: (B, C) bool, False on padding slots.
        weight: (B, C) float32 duplicate count of each slot's config (0 on padding).
        config_tile: layout (C, K, TILE_INPUTS) float32 tile-aware inputs, where asked for (`make_batch`).
    """

    node_feat: torch.Tensor
    opcode: torch.Tensor
    edge_index: torch.Tensor
    node_graph: torch.Tensor
    num_graphs: int
    config_nodes: torch.Tensor
    config_graph: torch.Tensor
    configs: torch.Tensor
    runtime: torch.Tensor
    mask: torch.Tensor
    weight: torch.Tensor
    config_tile: torch.Tensor | None = None

    def to(self, device: torch.device | str) -> Batch:
        moved = {
            f.name: (v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v)
            for f in fields(self)
            for v in [getattr(self, f.name)]
        }
        return Batch(**moved)
