"""The Graph Segment Training branch of a training step, and head fine-tuning after it.

A graph is cut into segments (`gnn/gst/segments.py`). Per graph, `segments_per_step` segments run
forward and backward; every other segment's sums come from the table of stale embeddings
(`gnn/gst/embedding_table.py`), written whenever a segment was last trained under a config that
agrees with this one on that segment's configurable nodes. Where any config of the step has no
such entry, the segment's mean entry over the configs of its last training stands in for all of
them (stale config-specific entries for some configs and none for others made the loss spike on
demo data). Stale embedding dropout leaves each other segment out with probability
`stale_dropout` (a segment never trained yet is left out too): the means then run over the
segments kept, and the per-node cost sum is scaled up by all nodes / nodes kept. The decision is
one per segment, shared by the configs of the step: the configs are ranked against each other, and
a segment counted for one config but not for another would shift their costs apart for no reason
of theirs (per-config dropout made the ListMLE loss diverge on the demo data). The fresh sums are
written back. Fine-tuning: after training, the best weights' backbone is frozen and only the
prediction head (fuse, attention, head) trains for `finetune_steps` steps on fresh sums of all
segments, the embeddings scoring will give it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from tpurank.gnn.data import GraphData, batch_rows, make_batch
from tpurank.gnn.device import autocast
from tpurank.gnn.gst.segments import Segment, segment_batch
from tpurank.gnn.gst.state import GstState, SegmentKeys
from tpurank.gnn.gst.sums import fresh_costs, head_from_sums, segment_sums
from tpurank.gnn.nets import tile_inputs
from tpurank.gnn.recipe import Recipe
from tpurank.gnn.training.losses import ranking_loss


class SegmentStep(NamedTuple):
    """What a Graph Segment Training step trains on (the `train_step` branch it takes).

    Args:
        state: segments and the table of stale embeddings.
        graphs: this step's graphs; rows: their sampled unique-config rows.
        rng: this step's seeded generator (picks segments and the dropout mask).
    """

    state: GstState
    graphs: list[GraphData]
    rows: list[np.ndarray]
    rng: np.random.Generator


@dataclass
class Counted:
    """The readout sums a graph's costs are computed from: those of the segments counted.

    Args:
        total: (C, D) summed `segment_sums`.
        nodes: (C,) nodes in the segments counted; config_nodes: (C,) configurable nodes in them.
    """

    total: torch.Tensor
    nodes: torch.Tensor
    config_nodes: torch.Tensor


class SegmentSizes(NamedTuple):
    """Each segment's nodes and configurable nodes (float32: they weigh sums)."""

    nodes: np.ndarray
    config_nodes: np.ndarray


def segment_sizes(segments: list[Segment]) -> SegmentSizes:
    """The sizes of `segments`."""
    return SegmentSizes(
        np.array([s.num_nodes for s in segments], dtype=np.float32),
        np.array([len(s.config_cols) for s in segments], dtype=np.float32),
    )


def _add_stale(
    counted: Counted,
    state: GstState,
    keys: SegmentKeys,
    others: np.ndarray,
    counts: SegmentSizes,
    r: Recipe,
    rng: np.random.Generator,
    device: torch.device,
) -> Counted:
    """`counted` plus the stale sums of the segments `others` that stale embedding dropout keeps."""
    n_seg, k_seg = counts
    stale, found = state.table.get(keys.own[:, others])  # (C, O, D), (C, O)
    mean, trained = state.table.get(keys.mean[others])  # (O, D), (O,)
    # a segment's own entries only where every config of the step has one (else its mean for all)
    stale = torch.where(torch.from_numpy(found.all(0))[None, :, None], stale, mean.unsqueeze(0))
    keep = trained & (rng.random(len(others)) >= r.stale_dropout)  # one decision per segment
    kept = torch.from_numpy(keep.astype(np.float32))
    return Counted(
        total=counted.total + (stale * kept[None, :, None]).sum(1).to(device),
        nodes=counted.nodes + float(kept @ torch.from_numpy(n_seg[others])),
        config_nodes=counted.config_nodes + float(kept @ torch.from_numpy(k_seg[others])),
    )


def graph_loss(
    model: nn.Module,
    state: GstState,
    g: GraphData,
    rows: np.ndarray,
    r: Recipe,
    device: torch.device,
    precision: str,
    rng: np.random.Generator,
    scale: float = 1.0,
    update: bool = True,
) -> float:
    """Forward and backward of one graph's GST loss (gradients added, times `scale`); returns the loss.

    Args:
        model: a layout GnnRanker (not DDP-wrapped), in train mode.
        state: segments and the table of stale embeddings.
        g: the graph; rows: its sampled unique-config rows.
        r: loss, margin, segments_per_step, stale_dropout.
        device: where the model is; precision: autocast precision.
        rng: this step's generator (picks segments and the dropout mask).
        scale: weight of this graph's loss in the step (1 / graphs per step).
        update: write the fresh sums to the table.
    """
    full = make_batch([g], [rows], tile_inputs.wanted(model))
    segs = state.segments(g)
    pick = np.sort(rng.choice(len(segs), size=min(r.segments_per_step, len(segs)), replace=False))
    keys = state.keys(g, full)
    sizes = segment_sizes(segs)
    fresh_batch = segment_batch(full, [segs[i] for i in pick]).to(device)
    with autocast(device, precision):
        fresh = segment_sums(model, fresh_batch).float()  # (C, P, D)
    counted = _counted(fresh, pick, state, keys, sizes, r, rng, device)
    # only the step's labels go to the device: the segments above carried the graph itself
    mask, runtime, weight = (t.to(device) for t in (full.mask, full.runtime, full.weight))
    with autocast(device, precision):
        cost = head_from_sums(
            model,
            counted.total.unsqueeze(0),
            counted.nodes.unsqueeze(0).to(device),
            config_nodes=counted.config_nodes.unsqueeze(0).to(device),
            total_nodes=torch.tensor([[float(sizes.nodes.sum())]], device=device),
            mask=mask,
        )
    loss = ranking_loss(r.loss, cost.float(), runtime, mask=mask, margin=r.margin, weight=weight)
    (loss * scale).backward()
    if update:
        state.table.put(keys.own[:, pick], fresh.detach())
        state.table.put(keys.mean[pick], fresh.detach().mean(0))
    return float(loss.detach())


def _counted(
    fresh: torch.Tensor,
    pick: np.ndarray,
    state: GstState,
    keys: SegmentKeys,
    sizes: SegmentSizes,
    r: Recipe,
    rng: np.random.Generator,
    device: torch.device,
) -> Counted:
    """The sums a graph's costs come from: the fresh sums of the segments `pick` trains, plus the
    stale ones of the other segments that stale embedding dropout keeps (`_add_stale`).

    Args:
        fresh: (C, P, D) the picked segments' sums, computed now.
        pick: the indices of those segments, sorted.
        state, keys: the table of stale embeddings and the graph's keys into it.
        sizes: every segment's sizes.
        r, rng, device: the recipe (stale_dropout), this step's generator, where the model is.
    """
    others = np.setdiff1d(np.arange(len(sizes.nodes)), pick)
    counted = Counted(
        total=fresh.sum(1),
        nodes=torch.full((fresh.shape[0],), float(sizes.nodes[pick].sum())),
        config_nodes=torch.full((fresh.shape[0],), float(sizes.config_nodes[pick].sum())),
    )
    if len(others):
        counted = _add_stale(counted, state, keys, others, sizes, r=r, rng=rng, device=device)
    return counted


def average_gradients(params: Iterable[nn.Parameter]) -> None:
    """Average the gradients of `params` over processes (GST runs the unwrapped model, outside DDP's
    hooks)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= dist.get_world_size()


def segment_backward(
    model: nn.Module,
    work: SegmentStep,
    r: Recipe,
    device: torch.device,
    precision: str,
    scaler: torch.amp.GradScaler | None,
) -> float:
    """The gradients of one GST step (each graph's loss weighs 1 / graphs), averaged over
    processes; returns the step's loss. The caller zeroes the gradients and steps the optimizer.

    Args:
        model: the unwrapped layout GnnRanker, in train mode.
        work: this step's graphs, rows, GST state and generator.
        r: the recipe (loss, GST settings).
        device, precision: where the model is and its autocast precision.
        scaler: the fp16 gradient scaler (None or disabled: plain gradients).
    """
    scaled = scaler is not None and scaler.is_enabled()
    total = 0.0
    for g, rws in zip(work.graphs, work.rows, strict=True):
        share = 1.0 / len(work.graphs)
        scale = float(scaler.get_scale()) * share if scaled else share
        loss = graph_loss(
            model, work.state, g, rows=rws, r=r, device=device, precision=precision, rng=work.rng, scale=scale
        )
        total += loss * share
    average_gradients(model.parameters())
    return total


def finetune_head(
    model: nn.Module,
    state: GstState,
    train: list[GraphData],
    r: Recipe,
    device: torch.device,
    precision: str,
    seed: int,
) -> list[float]:
    """Train only the prediction head (fuse, attention, head) on fresh sums of every segment.

    The backbone is frozen, so each step's segment sums are computed without gradients: the head
    learns from the embeddings scoring will give it instead of the stale mix it saw in training.

    Args:
        model: the unwrapped layout GnnRanker (its best weights).
        state: gives the segments.
        train: the training graphs.
        r: the recipe (finetune_steps, graphs_per_batch, configs_per_graph, lr, loss).
        device, precision: where and how to run.
        seed: the run's seed.

    Returns:
        The loss of every fine-tuning step.
    """
    head = [m for m in (model.fuse, model.attention, model.head) if m is not None]
    params = [p for m in head for p in m.parameters()]
    opt = torch.optim.AdamW(params, lr=r.lr, weight_decay=r.weight_decay)
    model.eval()  # the backbone computes the sums scoring will see (no dropout) ...
    for m in head:
        m.train()  # ... and only the head trains
    losses = []
    for step in range(r.finetune_steps):
        rng = np.random.default_rng([seed, 7_919, step])
        picks = rng.choice(len(train), size=min(r.graphs_per_batch, len(train)), replace=False)
        opt.zero_grad(set_to_none=True)
        total = 0.0
        for i in picks:
            g = train[int(i)]
            rows = batch_rows(g, r.configs_per_graph, rng)
            total += _head_loss(
                model, state, g, r, device=device, precision=precision, rows=rows, graphs=len(picks)
            )
        average_gradients(params)  # the head's only: the frozen backbone keeps stale grads
        if r.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, r.clip_norm)
        opt.step()
        losses.append(total)
    return losses


def _head_loss(
    model: nn.Module,
    state: GstState,
    g: GraphData,
    r: Recipe,
    device: torch.device,
    precision: str,
    rows: np.ndarray,
    graphs: int,
) -> float:
    """Forward and backward of one graph's fine-tuning loss (weighing 1 / `graphs`); its share of
    the step's loss."""
    cost, full = fresh_costs(model, g, state.segments(g), rows=rows, device=device, precision=precision)
    mask, runtime, weight = (t.to(device) for t in (full.mask, full.runtime, full.weight))
    loss = ranking_loss(r.loss, cost.float(), runtime, mask=mask, margin=r.margin, weight=weight)
    (loss / graphs).backward()
    return float(loss.detach()) / graphs
