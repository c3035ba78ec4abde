"""One optimisation step of a GNN ranker: the optimizer, gradient clipping, micro-batches that
bound memory on big graphs, and the step itself (mixed precision with an optional grad scaler),
whole graphs or, as a branch of the same step, Graph Segment Training (`segment_step.py`)."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from torch import nn

from tpurank.gnn.data import Batch, GraphData, make_batch
from tpurank.gnn.device import autocast, unwrap
from tpurank.gnn.recipe import Recipe
from tpurank.gnn.training.losses import ranking_loss
from tpurank.gnn.training.segment_step import SegmentStep, segment_backward


def make_optimizer(model: nn.Module, r: Recipe) -> torch.optim.Optimizer:
    """The recipe's optimizer over every parameter of `model`."""
    if r.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=r.lr)
    return torch.optim.AdamW(model.parameters(), lr=r.lr, weight_decay=r.weight_decay)


def clip_gradients(model: nn.Module, r: Recipe) -> None:
    """Clip the gradients as the recipe says: each tensor on its own, or their global norm."""
    if r.clip_norm <= 0:
        return
    if r.clip_per_tensor:
        for p in model.parameters():
            if p.grad is not None:
                torch.nn.utils.clip_grad_norm_([p], r.clip_norm)
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), r.clip_norm)


def micro_batches(
    graphs: list[GraphData], rows: list[np.ndarray], max_nodes: int, tile: bool = False
) -> list[Batch]:
    """One step's graphs as batches of at most `max_nodes` nodes each (a bigger graph goes alone).

    Memory grows with configs x nodes, so a step that samples several big graphs is run as
    micro-batches whose gradients add up to those of the whole step.

    Args:
        graphs: this step's graphs.
        rows: their sampled unique-config rows.
        max_nodes: node budget per micro-batch (0 = no limit).
        tile: with the tile-aware inputs (`make_batch`).
    """
    groups: list[list[int]] = [[]]
    nodes = 0
    for i, g in enumerate(graphs):
        n = len(g.opcode)
        if groups[-1] and max_nodes > 0 and nodes + n > max_nodes:
            groups.append([])
            nodes = 0
        groups[-1].append(i)
        nodes += n
    return [make_batch([graphs[i] for i in grp], [rows[i] for i in grp], tile) for grp in groups]


def train_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    inputs: Batch | list[Batch] | SegmentStep,
    r: Recipe,
    device: torch.device,
    *,
    precision: str = "fp32",
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """One optimisation step (inputs moved to `device`); returns the step's loss.

    Whole graphs: each micro-batch's loss (a mean over its graphs) is weighted by its share of the
    step's graphs, so the gradient equals that of one batch holding all of them. Graph Segment
    Training (a `SegmentStep`): the unwrapped model's gradients from `segment_step.segment_backward`.
    Either way the gradients are then clipped and the optimizer steps.

    Args:
        model: the ranker (DDP-wrapped or not), in train mode.
        opt: its optimizer.
        inputs: the sampled configs of this step's graphs (see `micro_batches`), or a `SegmentStep`.
        r: loss, margin and clipping settings.
        device: where the model is.
        precision: bf16, fp16 or fp32 autocast (`gnn/device.py`).
        scaler: the fp16 gradient scaler (None or disabled: plain backward).
    """
    opt.zero_grad(set_to_none=True)
    if isinstance(inputs, SegmentStep):
        total = segment_backward(unwrap(model), inputs, r, device=device, precision=precision, scaler=scaler)
    else:
        batches = [inputs] if isinstance(inputs, Batch) else inputs
        total = _batches_backward(model, batches, r, device=device, precision=precision, scaler=scaler)
    if scaler is not None and scaler.is_enabled():
        scaler.unscale_(opt)  # clip the true gradients
        clip_gradients(model, r)
        scaler.step(opt)  # skips the step when a gradient overflowed
        scaler.update()
        return total
    clip_gradients(model, r)
    opt.step()
    return total


def _batches_backward(
    model: nn.Module,
    batches: list[Batch],
    r: Recipe,
    device: torch.device,
    precision: str,
    scaler: torch.amp.GradScaler | None,
) -> float:
    """The gradients of whole-graph micro-batches (see `train_step`); returns the step's loss."""
    total_graphs = sum(b.num_graphs for b in batches)
    total = 0.0
    for i, batch in enumerate(batches):
        batch = batch.to(device)
        last = i == len(batches) - 1
        sync = (
            model.no_sync() if isinstance(model, nn.parallel.DistributedDataParallel) and not last else None
        )
        with sync or contextlib.nullcontext():
            with autocast(device, precision):
                cost = model(batch)
            loss = ranking_loss(
                r.loss, cost.float(), batch.runtime, mask=batch.mask, margin=r.margin, weight=batch.weight
            )
            share = batch.num_graphs / total_graphs
            (scaler.scale(loss * share) if scaler is not None else loss * share).backward()
        total += float(loss.detach()) * share
    return total
