"""Graph Segment Training (GST; Cao et al., NeurIPS 2023) for the layout GNN ranker.

A graph is cut into segments (gnn/segments.py). The ranker's readout is additive over nodes, so a
segment's contribution to one config is three sums over its nodes: node states (H), states at its
configurable nodes (H) and per-node costs (1) (`segment_sums`). A graph's embedding is the sum over
its segments divided by the node counts, which `head_from_sums` turns into costs exactly as
`GnnRanker._layout` does for the whole graph (with one segment the two are the same numbers).

A training step, per graph: `segments_per_step` segments run forward and backward; every other
segment's sums come from the historical table (gnn/history.py), written whenever a segment was
last trained under a config that agrees with this one on that segment's configurable nodes; where
any config of the step has no such entry, the segment's mean entry over the configs of its last
training stands in for all of them (stale config-specific entries for some configs and none for
others made the loss spike on demo data). Stale embedding dropout leaves each other segment out with probability `stale_dropout` (a
segment never trained yet is left out too): the means then run over the segments kept, and the
per-node cost sum is scaled up by all nodes / nodes kept. The decision is one per segment, shared
by the configs of the step: the configs are ranked against each other, and a segment counted for
one config but not for another would shift their costs apart for no reason of theirs (per-config
dropout made the ListMLE loss diverge on the demo data). The fresh sums are written back. Scoring (validation,
prediction) computes every segment fresh, one at a time, so memory is bounded by the segment size.
Fine-tuning: after training, the best weights' backbone is frozen and only the prediction head
(fuse, attention, head) trains for `finetune_steps` steps on fresh, non-stale sums of all segments.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch_geometric.nn import global_add_pool

from tpurank.gnn import tile_inputs
from tpurank.gnn.data import Batch, GraphData, make_batch
from tpurank.gnn.device import autocast
from tpurank.gnn.history import HistoryTable, segment_keys
from tpurank.gnn.losses import ranking_loss
from tpurank.gnn.recipe import Recipe
from tpurank.gnn.segments import Segment, segment_batch, split_graph
from tpurank.gnn.step import clip_gradients  # the same clipping as whole-graph steps


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


class GstState:
    """What GST keeps across steps: each graph's segments and the historical table.

    Args:
        recipe: gives segment_nodes, segments_per_step, stale_dropout, history_mb.
        hidden: the model's hidden width (entries hold 2 * hidden + 1 values).
    """

    def __init__(self, recipe: Recipe, hidden: int) -> None:
        self.recipe = recipe
        self.table = HistoryTable(2 * hidden + 1, recipe.history_mb)
        self._segments: dict[str, list[Segment]] = {}

    def segments(self, g: GraphData) -> list[Segment]:
        seg = self._segments.get(g.id)
        if seg is None:
            seg = self._segments[g.id] = split_graph(g, self.recipe.segment_nodes)
        return seg

    def keys(self, g: GraphData, full: Batch) -> tuple[np.ndarray, np.ndarray]:
        """(C, S) table keys of every segment of `g` under the batch's C configs, and (S,) the keys
        of each segment's mean entry."""
        configs = full.configs.numpy()
        segs = self.segments(g)
        own = np.stack([segment_keys(g.id, (s.start, s.stop), configs[:, s.config_cols]) for s in segs], 1)
        mean = segment_keys(f"{g.id}/mean", (0, 0), np.arange(len(segs))[:, None])
        return own, mean


def _counts(segments: list[Segment]) -> tuple[np.ndarray, np.ndarray]:
    return (
        np.array([s.num_nodes for s in segments], dtype=np.float32),
        np.array([len(s.config_cols) for s in segments], dtype=np.float32),
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
        state: segments and the historical table.
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
    others = np.setdiff1d(np.arange(len(segs)), pick)
    keys, mean_keys = state.keys(g, full)  # (C, S), (S,)
    n_seg, k_seg = _counts(segs)
    fresh_batch = segment_batch(full, [segs[i] for i in pick]).to(device)
    with autocast(device, precision):
        fresh = segment_sums(model, fresh_batch).float()  # (C, P, D)
    total = fresh.sum(1)
    nodes = torch.full((len(rows),), float(n_seg[pick].sum()))
    cfg_nodes = torch.full((len(rows),), float(k_seg[pick].sum()))
    if len(others):
        stale, found = state.table.get(keys[:, others])  # (C, O, D), (C, O)
        mean, trained = state.table.get(mean_keys[others])  # (O, D), (O,)
        # a segment's own entries only where every config of the step has one (else its mean for all)
        stale = torch.where(torch.from_numpy(found.all(0))[None, :, None], stale, mean.unsqueeze(0))
        keep = trained & (rng.random(len(others)) >= r.stale_dropout)  # one decision per segment
        kept = torch.from_numpy(keep.astype(np.float32))
        total = total + (stale * kept[None, :, None]).sum(1).to(device)
        nodes = nodes + float(kept @ torch.from_numpy(n_seg[others]))
        cfg_nodes = cfg_nodes + float(kept @ torch.from_numpy(k_seg[others]))
    # only the step's labels go to the device: the segments above carried the graph itself
    mask, runtime, weight = (t.to(device) for t in (full.mask, full.runtime, full.weight))
    with autocast(device, precision):
        cost = head_from_sums(
            model,
            total.unsqueeze(0),
            nodes.unsqueeze(0).to(device),
            config_nodes=cfg_nodes.unsqueeze(0).to(device),
            total_nodes=torch.tensor([[float(n_seg.sum())]], device=device),
            mask=mask,
        )
    loss = ranking_loss(r.loss, cost.float(), runtime, mask=mask, margin=r.margin, weight=weight)
    (loss * scale).backward()
    if update:
        state.table.put(keys[:, pick], fresh.detach())
        state.table.put(mean_keys[pick], fresh.detach().mean(0))
    return float(loss.detach())


def _average_gradients(params: Iterable[nn.Parameter]) -> None:
    """Average the gradients of `params` over processes (GST runs the unwrapped model, outside DDP's
    hooks)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad, op=dist.ReduceOp.SUM)
            p.grad /= dist.get_world_size()


def train_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    *,
    state: GstState,
    graphs: list[GraphData],
    rows: list[np.ndarray],
    r: Recipe,
    device: torch.device,
    precision: str,
    scaler: torch.amp.GradScaler | None,
    rng: np.random.Generator,
) -> float:
    """One GST optimisation step over this step's graphs (each graph's loss weighs 1 / graphs).

    Args:
        model: the unwrapped layout GnnRanker, in train mode.
        opt: its optimizer; scaler: the fp16 gradient scaler (None or disabled: plain steps).
        state: segments and the historical table.
        graphs, rows: this step's graphs and their sampled unique-config rows.
        r: the recipe (loss, clipping, GST settings).
        device, precision: as for `step.train_step`.
        rng: this step's seeded generator.
    """
    opt.zero_grad(set_to_none=True)
    scaled = scaler is not None and scaler.is_enabled()
    total = 0.0
    for g, rws in zip(graphs, rows, strict=True):
        share = 1.0 / len(graphs)
        scale = float(scaler.get_scale()) * share if scaled else share
        loss = graph_loss(
            model, state, g, rows=rws, r=r, device=device, precision=precision, rng=rng, scale=scale
        )
        total += loss * share
    _average_gradients(model.parameters())
    if scaled:
        scaler.unscale_(opt)
        clip_gradients(model, r)
        scaler.step(opt)
        scaler.update()
        return total
    clip_gradients(model, r)
    opt.step()
    return total


@torch.no_grad()
def _all_sums(
    model: nn.Module,
    g: GraphData,
    segs: list[Segment],
    rows: np.ndarray,
    device: torch.device,
    precision: str,
) -> tuple[torch.Tensor, Batch]:
    """(C, D) sums over every segment of `g` for the given rows, one segment at a time; and the
    whole-graph batch on the CPU (its labels; only the segments go to the device)."""
    full = make_batch([g], [rows], tile_inputs.wanted(model))
    total = None
    for s in segs:
        with autocast(device, precision):
            part = segment_sums(model, segment_batch(full, [s]).to(device)).float()[:, 0]
        total = part if total is None else total + part
    return total, full


def fresh_costs(
    model: nn.Module,
    g: GraphData,
    segs: list[Segment],
    rows: np.ndarray,
    device: torch.device,
    precision: str,
) -> tuple[torch.Tensor, Batch]:
    """(1, len(rows)) costs from fresh sums of every segment, and the whole-graph batch on the CPU
    (its labels): what scoring uses (`scoring.score_rows`, without gradients) and what head
    fine-tuning trains on (the head keeps its gradients, the sums have none).

    Args:
        model: a layout GnnRanker.
        g: the graph; segs: its segments, as trained; rows: indices into its unique configs.
        device, precision: where the model is, and its autocast precision.
    """
    n, k = float(len(g.opcode)), float(len(g.config_nodes))
    sums, full = _all_sums(model, g, segs, rows=rows, device=device, precision=precision)
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
    return cost, full


def finetune_head(
    model: nn.Module,
    state: GstState,
    train: list[GraphData],
    r: Recipe,
    device: torch.device,
    precision: str,
    seed: int,
    sample: Callable[[GraphData, int, np.random.Generator], np.ndarray],
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
        sample: `data.sample_rows`.

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
            rows = sample(g, r.configs_per_graph, rng)
            cost, full = fresh_costs(
                model, g, state.segments(g), rows=rows, device=device, precision=precision
            )
            mask, runtime, weight = (t.to(device) for t in (full.mask, full.runtime, full.weight))
            loss = ranking_loss(r.loss, cost.float(), runtime, mask=mask, margin=r.margin, weight=weight)
            (loss / len(picks)).backward()
            total += float(loss.detach()) / len(picks)
        _average_gradients(params)  # the head's only: the frozen backbone keeps stale grads
        if r.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(params, r.clip_norm)
        opt.step()
        losses.append(total)
    return losses
