"""A segment's readout as sums, and the prediction head run on summed readouts (Graph Segment
Training, GST; Cao et al., NeurIPS 2023).

The layout network's readout is additive over nodes, so a segment's contribution to one config is
three sums over its nodes: node states (H), states at its configurable nodes (H) and per-node costs
(1) (`segment_sums`). A graph's embedding is the sum over its segments divided by the node counts,
which `head_from_sums` turns into costs exactly as `GnnRanker._layout` does for the whole graph
(with one segment the two are the same numbers). Scoring (validation, prediction) computes every
segment fresh, one at a time, so memory is bounded by the segment size (`fresh_costs`); the
training step mixes fresh and stale sums (`gnn/training/segment_step.py`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch
from torch import nn
from torch_geometric.nn import global_add_pool

from tpurank.gnn.data import Batch, GraphData, make_batch
from tpurank.gnn.device import autocast
from tpurank.gnn.gst.segments import Segment, segment_batch
from tpurank.gnn.nets import tile_inputs


class Summed(NamedTuple):
    """Sums over every segment of a graph, and the whole-graph batch they came from.

    Args:
        sums: (C, D) per config slot, summed over the segments.
        full: the whole-graph batch on the CPU (its labels; only the segments went to the device).
    """

    sums: torch.Tensor
    full: Batch


class FreshCosts(NamedTuple):
    """Costs from fresh sums of every segment, and the whole-graph batch.

    Args:
        cost: (1, C) per config slot.
        full: the whole-graph batch on the CPU (its labels).
    """

    cost: torch.Tensor
    full: Batch


def segment_sums(model: nn.Module, batch: Batch) -> torch.Tensor:
    """(C, S, 2H + 1): per config slot and per "graph" of the batch (a segment), the sums of node
    states, of states at configurable nodes, and of per-node costs (GnnRanker's layout readout).

    Args:
        model: a layout GnnRanker (not DDP-wrapped).
        batch: from `segments.segment_batch` (or `make_batch`: each graph is then one segment).
    """
    x = model.layout_states(batch, model.encode_nodes(batch))  # the model's own stack, per segment
    s = batch.num_graphs
    nodes = global_add_pool(x, batch.node_graph, size=s)
    at_configs = global_add_pool(x[:, batch.config_nodes], batch.config_graph, size=s)
    costs = global_add_pool(model.node_cost(x), batch.node_graph, size=s)
    return torch.cat([nodes, at_configs, costs], dim=-1)


def head_from_sums(
    model: nn.Module,
    sums: torch.Tensor,
    nodes: torch.Tensor,
    config_nodes: torch.Tensor,
    total_nodes: torch.Tensor,
    mask: torch.Tensor,
) -> torch.Tensor:
    """(B, C) costs from summed segment readouts: the prediction head of GnnRanker's layout path.

    Args:
        model: a layout GnnRanker.
        sums: (B, C, 2H + 1) summed `segment_sums` of the segments counted.
        nodes: (B, C) nodes in the segments counted; config_nodes: (B, C) configurable nodes in them.
        total_nodes: (B, 1) nodes of each whole graph (the per-node cost sum is scaled to it).
        mask: (B, C) real config slots (for attention).
    """
    hidden = (sums.shape[-1] - 1) // 2
    n = nodes.to(sums.dtype).clamp(min=1).unsqueeze(-1)
    pooled = sums[..., :hidden] / n
    at_configs = sums[..., hidden : 2 * hidden] / config_nodes.to(sums.dtype).clamp(min=1).unsqueeze(-1)
    g = model.fuse(torch.cat([pooled, at_configs], dim=-1))
    if model.attention is not None:
        g = model.attention(g, mask)
    node_costs = sums[..., -1] * total_nodes.to(sums.dtype) / n.squeeze(-1)
    return model.head(g).squeeze(-1) + node_costs


@torch.no_grad()
def all_sums(
    model: nn.Module,
    g: GraphData,
    segs: list[Segment],
    rows: np.ndarray,
    device: torch.device,
    precision: str,
) -> Summed:
    """Sums over every segment of `g` for the given rows, one segment at a time."""
    full = make_batch([g], [rows], tile_inputs.wanted(model))
    total = None
    for s in segs:
        with autocast(device, precision):
            part = segment_sums(model, segment_batch(full, [s]).to(device)).float()[:, 0]
        total = part if total is None else total + part
    return Summed(total, full)


def fresh_costs(
    model: nn.Module,
    g: GraphData,
    segs: list[Segment],
    rows: np.ndarray,
    device: torch.device,
    precision: str,
) -> FreshCosts:
    """Costs of `rows` from fresh sums of every segment: what scoring uses (`scoring.score_rows`, without gradients) and what head
    fine-tuning trains on (the head keeps its gradients, the sums have none).

    Args:
        model: a layout GnnRanker.
        g: the graph; segs: its segments, as trained; rows: indices into its unique configs.
        device, precision: where the model is, and its autocast precision.
    """
    n, k = float(len(g.opcode)), float(len(g.config_nodes))
    sums, full = all_sums(model, g, segs, rows=rows, device=device, precision=precision)
    ones = torch.ones((1, len(rows)), device=device)
    with autocast(device, precision):
        cost = head_from_sums(
            model,
            sums[None],
            ones * n,
            config_nodes=ones * k,
            total_nodes=ones[:, :1] * n,
            mask=full.mask.to(device),
        )
    return FreshCosts(cost, full)
