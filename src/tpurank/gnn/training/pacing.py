"""The step budget of a training run: which graphs a step takes, when to validate, when time is up.

Training length is a budget (`Recipe.max_steps` optimizer steps, planned before the training
starts: tpurank.train.pace; `Recipe.time_budget_min` minutes, a cap), not epochs: collections differ
80-fold in size, so an epoch means nothing across them.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.distributed as dist

from tpurank.gnn.data import GraphData, eval_configs
from tpurank.gnn.device import Runtime
from tpurank.gnn.recipe import Recipe

AUTO_EVAL_MAX = 200  # eval_every = 0: about one pass over the train configs, but at most this many steps
# a scored config's forward pass against a trained one's forward, backward and recomputation: about a
# third, counted high, so a run reserves enough for its closing validation before any validation timed it
FORWARD_SHARE = 0.5


def step_graphs(order: np.ndarray, step: int, rt: Runtime, per_rank: int) -> list[int]:
    """This rank's graphs of one step: consecutive slices of the round's shuffled order, wrapping."""
    start = step * per_rank * rt.world + rt.rank * per_rank
    return [int(order[(start + i) % len(order)]) for i in range(per_rank)]


def eval_interval(train: list[GraphData], r: Recipe, world: int) -> int:
    """Steps between validations: `eval_every`, or (0) about one pass over the unique train configs
    (each step takes C configs of B graphs per process), at most AUTO_EVAL_MAX and `max_steps`."""
    if r.eval_every > 0:
        return min(r.eval_every, r.max_steps)
    per_step = r.configs_per_graph * r.graphs_per_batch * world
    configs = sum(g.num_unique for g in train)
    graphs = math.ceil(len(train) / (r.graphs_per_batch * world))
    return max(1, min(AUTO_EVAL_MAX, r.max_steps, max(graphs, math.ceil(configs / per_step))))


def synced_seconds(seconds: float, rt: Runtime) -> float:
    """Training seconds spent, the same on every rank (the slowest rank's): the time budget's cap
    must stop every process at the same step."""
    if rt.world > 1:
        box = torch.tensor([seconds], dtype=torch.float64, device=rt.device)
        dist.all_reduce(box, op=dist.ReduceOp.MAX)
        seconds = float(box.item())
    return seconds


def out_of_time(r: Recipe, seconds: float) -> bool:
    """True once the time budget is spent (`seconds` from `synced_seconds`)."""
    return r.time_budget_min > 0 and seconds >= r.time_budget_min * 60


def step_share(r: Recipe, step: int) -> float:
    """The share of the planned steps taken: what patience waits for (a function of the plan)."""
    return min(1.0, step / max(1, r.max_steps))


def budget_share(r: Recipe, step: int, seconds: float) -> float:
    """The share of the budget spent, the larger of the steps' and the time's: when a progress line
    is printed (what the run tells, never what it trains)."""
    share = step_share(r, step)
    if r.time_budget_min > 0:
        share = max(share, seconds / (r.time_budget_min * 60))
    return min(1.0, share)


def validation_work(valid: list[GraphData], r: Recipe) -> int:
    """Configs x nodes one validation scores: the unique configs it scores on each rankable graph."""
    rankable = [g for g in valid if g.rankable]
    return sum(
        len(np.unique(g.inverse[eval_configs(g, r.eval_max_configs)])) * len(g.opcode) for g in rankable
    )


def closing_estimate(work: int, trained: int, seconds: float) -> float:
    """The closing validation's seconds before any validation measured them: its configs x nodes
    (`validation_work`) at the rate training went through `trained` configs x nodes in `seconds`,
    times FORWARD_SHARE. Without it a run validated only at its end overran its share by that end."""
    return FORWARD_SHARE * work * seconds / trained if trained > 0 else 0.0
