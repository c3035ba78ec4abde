"""The learning-rate schedule of the GNN rankers: an optional linear warm-up, then cosine decay or a
constant rate over the rest of the step budget.

A warm-up keeps the first AdamW steps small while its second-moment estimates are still noisy (the
top solutions of the competition warmed up); without one the schedule is the plain cosine over
`max_steps` that the trainer always used.
"""

from __future__ import annotations

import math

import torch

from tpurank.gnn.recipe import Recipe


def lr_factor(step: int, max_steps: int, warmup_steps: int = 0, schedule: str = "cosine") -> float:
    """The multiplier of the base learning rate at optimizer step `step` (0-based).

    Args:
        step: steps already taken.
        max_steps: the training budget the decay spans.
        warmup_steps: linear warm-up from 1/warmup_steps to 1 over this many steps (0 = none).
        schedule: "cosine" (to 0 at `max_steps`) or "constant" after the warm-up.
    """
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule != "cosine":
        return 1.0
    span = max(1, max_steps - warmup_steps)
    done = min(step - warmup_steps, span)
    return 0.5 * (1.0 + math.cos(math.pi * done / span))


def make_scheduler(opt: torch.optim.Optimizer, r: Recipe) -> torch.optim.lr_scheduler.LambdaLR:
    """A per-step scheduler following `lr_factor` (stepped once per optimizer step; resumable).

    Args:
        opt: the optimizer.
        r: gives max_steps, warmup_steps and schedule.
    """
    return torch.optim.lr_scheduler.LambdaLR(
        opt, lambda step: lr_factor(step, r.max_steps, r.warmup_steps, r.schedule)
    )
