"""Scoring configs with a trained ranker, and the validation metric that early stopping watches."""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

import numpy as np
import torch
from torch import nn

from tpurank.core.memory import fit_mmap_threshold
from tpurank.core.metrics import kendall_tau, order_from_costs, tile_score
from tpurank.gnn.data import GraphData, eval_configs, make_batch
from tpurank.gnn.device import autocast
from tpurank.gnn.gst.segments import split_graph
from tpurank.gnn.gst.sums import fresh_costs
from tpurank.gnn.nets import tile_inputs
from tpurank.gnn.recipe import Recipe

# The CPU budgets keep one graph's scoring far below the 4 GB stage target (docs/scale.md, memory).
PASS_NODE_BUDGET = 500_000  # configs x nodes per scoring pass: (C, N, 64) float32 states stay ~128 MB
# heads x configurable nodes x C^2 attention scores per pass (`gnn.layer_attention`): ~64 MB float32.
# torch's CPU attention materialises them, so without this bound a large nlp graph's pass takes GBs
PASS_ATTENTION_BUDGET = 16_000_000
# On a GPU the budgets follow the device's free memory instead (the 1st place scored 128-256 configs
# per pass): a pass may take this share of it, half for the states and half for attention scores.
PASS_DEVICE_SHARE = 0.5
STATE_COPIES = 9  # live (C, N, H) tensors of a pass: 1.12 GB peak / 128 MB of states at the CPU budget
SCORE_COPIES = 4  # live copies of the attention scores (softmax and its input): 2.52 GB peak at 184M scores
FLOAT_BYTES = 4


class PassBudgets(NamedTuple):
    """What one scoring pass may hold: configs x nodes of (C, N, H) states, and attention scores."""

    nodes: int
    attention_scores: int


def pass_budgets(device: torch.device, hidden: int) -> PassBudgets:
    """What one scoring pass may hold on `device`.

    The CPU keeps the fixed budgets (the 4 GB per-stage target); a CUDA device gets budgets from
    its free memory now (torch.cuda.mem_get_info), so a bigger GPU scores more configs per pass.
    """
    if device.type != "cuda":
        return PassBudgets(PASS_NODE_BUDGET, PASS_ATTENTION_BUDGET)
    free, _ = torch.cuda.mem_get_info(device)
    half = PASS_DEVICE_SHARE * free / 2
    nodes = int(half // (FLOAT_BYTES * STATE_COPIES * max(1, hidden)))
    scores = int(half // (FLOAT_BYTES * SCORE_COPIES))
    return PassBudgets(
        max(PASS_NODE_BUDGET * 64 // max(64, hidden), nodes), max(PASS_ATTENTION_BUDGET, scores)
    )


def pass_configs(
    model: nn.Module, g: GraphData, chunk: int, pass_nodes: int, device: torch.device | None = None
) -> int:
    """Configs per scoring pass: `chunk`, lowered so the (C, N, H) states and, with attention across
    configs at every configurable node, the (heads x K, C, C) attention scores stay within the
    device's budgets (`pass_budgets`)."""
    hidden = int(getattr(model, "hidden", 64))
    node_budget, attention_budget = pass_budgets(device or torch.device("cpu"), hidden)
    c = min(chunk, node_budget // pass_nodes)
    if rows := _attention_rows(model, g):
        c = min(c, math.isqrt(attention_budget // rows))
    return max(1, c)


def pass_lanes(
    model: nn.Module, configs: int, pass_nodes: int, passes: int, most: int, device: torch.device
) -> int:
    """Scoring passes run side by side (each on the caller's torch threads): at most `most`, and as
    many as the CPU's node budget holds (`pass_budgets`: it bounds the (C, N, H) states of every pass
    in flight together, so a graph's scoring holds what one pass at the budget holds). The attention
    scores' budget sizes a pass, not the lanes: on the CPU a pass's attention runs on torch's flash
    kernel, which never holds the (C, C) scores. A GPU takes one pass at a time.

    Args:
        model: the ranker.
        configs: configs per pass (`pass_configs`).
        pass_nodes: nodes per pass.
        passes: the passes to run.
        most: the most side by side (the caller's cores over its threads).
        device: where the model is.
    """
    if device.type != "cpu" or most <= 1 or passes <= 1:
        return 1
    node_budget, _ = pass_budgets(device, int(getattr(model, "hidden", 64)))
    return max(1, min(most, passes, node_budget // (configs * pass_nodes)))


def _attention_rows(model: nn.Module, g: GraphData) -> int:
    """heads x configurable nodes: the (C, C) attention score matrices a pass holds (0: no attention
    across configs on this graph)."""
    attention = getattr(model, "layer_attention", None)
    if attention is None or g.kind != "layout" or not len(g.config_nodes):
        return 0
    return attention[0].attn.num_heads * len(g.config_nodes)


@torch.no_grad()
def score_rows(
    model: nn.Module,
    g: GraphData,
    rows: np.ndarray,
    chunk: int,
    device: torch.device,
    precision: str = "fp32",
    segment_nodes: int = 0,
    lanes: int = 1,
) -> np.ndarray:
    """Costs of the given unique-config rows of one graph, `chunk` configs per forward pass.

    Args:
        model: a ranker in eval mode.
        g: the graph.
        rows: indices into its unique configs.
        chunk: configs per pass (bounds memory; lowered further on big graphs: `pass_configs`).
        device: where the model is.
        precision: bf16, fp16 or fp32 (`gnn/device.py`), as the model was trained.
        segment_nodes: the model was trained with Graph Segment Training on segments of at most this
            many nodes (layout; 0 = whole graphs): each segment is then scored on its own (`gnn/gst/sums.py`).
        lanes: at most this many passes side by side, each on the caller's torch threads (`pass_lanes`):
            the same passes, so the same bytes, as one after another.
    """
    pass_nodes = max(1, len(g.opcode))
    if segment_nodes > 0 and g.kind == "layout":  # one segment at a time (gnn/gst/sums.py)
        segs = split_graph(g, segment_nodes)
        pass_nodes, lanes = min(segment_nodes, pass_nodes), 1

        def costs(part: np.ndarray) -> torch.Tensor:
            return fresh_costs(model, g, segs, rows=part, device=device, precision=precision).cost[0]
    else:

        def costs(part: np.ndarray) -> torch.Tensor:
            with torch.no_grad(), autocast(device, precision):  # per thread: a lane's thread too
                return model(make_batch([g], [part], tile_inputs.wanted(model)).to(device))[0, : len(part)]

    chunk = pass_configs(model, g, chunk, pass_nodes, device)
    parts = [rows[start : start + chunk] for start in range(0, len(rows), chunk)]
    if device.type == "cpu":  # each pass reuses the last one's heap (tpurank.core.memory)
        fit_mmap_threshold(
            min(chunk, len(rows)) * pass_nodes * int(getattr(model, "hidden", 64)) * FLOAT_BYTES
        )
    lanes = pass_lanes(model, chunk, pass_nodes, len(parts), lanes, device)
    if lanes == 1:
        done = [costs(part).float().cpu().numpy() for part in parts]
    else:
        with ThreadPoolExecutor(lanes, thread_name_prefix="tpurank-scoring") as pool:
            done = list(pool.map(lambda part: costs(part).float().cpu().numpy(), parts))
    return np.concatenate(done).astype(np.float64) if done else np.empty(0, dtype=np.float64)


def graph_score(kind: str, cost: np.ndarray, runtime: np.ndarray) -> float:
    """The competition metric of one graph from predicted costs (tau for layout, tile score for tile)."""
    order = order_from_costs(cost)
    return tile_score(order, runtime) if kind == "tile" else kendall_tau(order, runtime)


def evaluate(
    model: nn.Module, graphs: list[GraphData], recipe: Recipe, device: torch.device, precision: str = "fp32"
) -> float:
    """Mean validation metric over graphs with something to rank (NaN graphs left out), on the
    original config lists (at most `eval_max_configs` per graph), duplicates included, each config
    against its own measurement: the competition's score, as the validation report computes it.

    Args:
        model: the ranker (switched to eval mode here, restored after).
        graphs: validation graphs.
        recipe: gives eval_max_configs and predict_chunk.
        device: where the model is.
        precision: bf16, fp16 or fp32 (as training runs).
    """
    was_training = model.training
    model.eval()
    scores = []
    for g in graphs:
        if not g.rankable:
            continue
        configs = eval_configs(g, recipe.eval_max_configs)
        rows, back = np.unique(g.inverse[configs], return_inverse=True)  # score each unique config once
        cost = score_rows(
            model,
            g,
            rows,
            chunk=recipe.predict_chunk,
            device=device,
            precision=precision,
            segment_nodes=recipe.segment_nodes,
        )[back]
        s = graph_score(g.kind, cost, g.config_runtime[configs])
        if not math.isnan(s):
            scores.append(s)
    model.train(was_training)
    return float(np.mean(scores)) if scores else math.nan
