"""The learning-rate schedule of the GNN rankers: an optional linear warm-up, then cosine decay or a
constant rate over the rest of the training's planned steps.

A training's steps are fixed by its plan before it starts (`max_steps`: the config's, or those its
time budget pays at the planned pace, tpurank.train.pace), so the rate at a step is a function of
that step and the plan alone: the same plan trains the same model, however fast the machine ran. A
time budget only caps a training on a machine slower than its plan; the rate is then cut off
before it has decayed, and the training's one line says so. A resume restores the step, and with
it the rate. A warm-up keeps the first AdamW steps small while its second-moment estimates are
still noisy (the top solutions warmed up).

A caller with no plan, whose length is wall time alone (a user's program fine-tuned in `rank`),
passes the seconds spent (`spent`): its rate then follows the larger of the two shares spent.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from tpurank.gnn.recipe import Recipe


def lr_factor(
    step: int, max_steps: int, warmup_steps: int = 0, schedule: str = "cosine", time_share: float = 0.0
) -> float:
    """The multiplier of the base learning rate at optimizer step `step` (0-based).

    Args:
        step: steps already taken.
        max_steps: the planned steps (the cosine reaches ~0 at the last).
        warmup_steps: linear warm-up from 1/warmup_steps to 1 over this many steps (0 = none).
        schedule: "cosine" (to 0 at the last planned step) or "constant" after the warm-up.
        time_share: the share of a time budget spent, for a caller without a plan (0: the steps alone).
    """
    spent = min(1.0, time_share)
    warm = min(1.0, warmup_steps / max(1, max_steps))  # the warm-up's share of the steps
    if step < warmup_steps and spent < warm:
        return max((step + 1) / warmup_steps, spent / warm)
    if schedule != "cosine":
        return 1.0
    span = max(1, max_steps - warmup_steps)
    by_steps = max(0, min(step - warmup_steps, span)) / span
    by_time = (spent - warm) / (1.0 - warm) if warm < 1.0 else 1.0
    done = max(by_steps, by_time)
    return 0.5 * (1.0 + math.cos(math.pi * done))


def make_scheduler(
    opt: torch.optim.Optimizer, r: Recipe, spent: Callable[[], float] | None = None
) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step scheduler following `lr_factor` (stepped once per optimizer step; resumable).

    Args:
        opt: the optimizer.
        r: gives max_steps (the planned steps), warmup_steps, schedule and time_budget_min.
        spent: seconds spent so far, for a caller without a plan (its length is wall time): read at
            each step when the recipe has a time budget. None (a planned training): the schedule
            is a function of the step alone.
    """
    budget = r.time_budget_min * 60

    def factor(step: int) -> float:
        share = spent() / budget if budget > 0 and spent is not None else 0.0
        return lr_factor(step, r.max_steps, r.warmup_steps, r.schedule, time_share=share)

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)
