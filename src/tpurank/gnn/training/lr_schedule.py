"""The learning-rate schedule of the GNN rankers: an optional linear warm-up, then cosine decay or a
constant rate over the rest of the budget.

The budget is steps (`max_steps`) or time (`time_budget_min`), whichever runs out first, and both
phases follow the larger of the two shares spent: the warm-up ends at `warmup_steps / max_steps` of
the budget and the cosine reaches a rate near 0 when it ends. Over steps alone a time-budgeted run
would see neither: a run whose minutes end after a few hundred of its `max_steps` would spend a
large share of them warming up, and its rate would never decay.
A resume restores the steps and seconds spent, and with them the rate. A warm-up keeps the first
AdamW steps small while its second-moment estimates are still noisy (the top solutions warmed up).
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
        max_steps: the step budget.
        warmup_steps: linear warm-up from 1/warmup_steps to 1 over this many steps, or over the same
            share of the time budget if that ends first (0 = none).
        schedule: "cosine" (to 0 when the budget ends) or "constant" after the warm-up.
        time_share: the share of the time budget spent (0 without one).
    """
    spent = min(1.0, time_share)
    warm = min(1.0, warmup_steps / max(1, max_steps))  # the warm-up's share of the budget
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
        r: gives max_steps, warmup_steps, schedule and time_budget_min.
        spent: seconds of training spent so far (resumes included); read at each step when the
            recipe has a time budget.
    """
    budget = r.time_budget_min * 60

    def factor(step: int) -> float:
        share = spent() / budget if budget > 0 and spent is not None else 0.0
        return lr_factor(step, r.max_steps, r.warmup_steps, r.schedule, time_share=share)

    return torch.optim.lr_scheduler.LambdaLR(opt, factor)
