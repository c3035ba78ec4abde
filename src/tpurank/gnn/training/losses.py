"""Ranking losses over the sampled configs of each graph in a batch.

Every loss takes `cost` (B, C) predicted by the model (lower = predicted faster), `runtime` (B, C)
measured, and `mask` (B, C) marking real (not padding) configs; each graph contributes equally.
The pairwise hinge can weight each config by how many original configs it stands for (its duplicate
count), so a pair counts as often as in the Kendall tau over the original config list.
"""

from __future__ import annotations

import torch

from tpurank.core.errors import TpurankError

LOSSES = ("hinge", "listmle")
AUTO_LOSS = {"layout": "listmle", "tile": "hinge"}  # what `loss = "auto"` means for each kind


def resolve_loss(name: str, kind: str) -> str:
    """The loss a config's `loss` names for a collection kind ("auto" picks by kind).

    Raises:
        TpurankError: for an unknown name.
    """
    resolved = AUTO_LOSS[kind] if name == "auto" else name
    if resolved not in LOSSES:
        raise TpurankError(f"config: unknown loss {name!r}; expected auto, {', '.join(LOSSES)}")
    return resolved


def pairwise_hinge(
    cost: torch.Tensor,
    runtime: torch.Tensor,
    mask: torch.Tensor,
    margin: float,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Mean over graphs of the weighted mean over ordered pairs (i faster than j) of
    max(0, margin - (cost_j - cost_i)), with pair weight w_i * w_j (1 without `weight`).

    Args:
        cost: (B, C) predicted cost.
        runtime: (B, C) measured runtime; pairs with equal runtimes are ignored.
        mask: (B, C) bool, True for real configs.
        margin: how much larger a slower config's cost must be before the pair stops contributing.
        weight: (B, C) optional per-config weight (the duplicate count).
    """
    cost = cost.float()
    w = ((runtime[:, :, None] < runtime[:, None, :]) & mask[:, :, None] & mask[:, None, :]).float()
    if weight is not None:
        w = w * (weight[:, :, None] * weight[:, None, :]).float()
    gap = cost[:, None, :] - cost[:, :, None]  # [b, i, j] = cost_j - cost_i
    loss = torch.relu(margin - gap) * w
    pairs = w.sum(dim=(1, 2))
    per_graph = loss.sum(dim=(1, 2)) / pairs.clamp(min=1e-12)
    has_pairs = pairs > 0
    return per_graph[has_pairs].mean() if has_pairs.any() else cost.sum() * 0.0


def listmle(cost: torch.Tensor, runtime: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """ListMLE: negative log-likelihood of the true order (fastest first) under a Plackett-Luce model.

    With scores s = -cost sorted by true runtime, a graph's loss is sum_i [logsumexp(s_i..s_n) - s_i],
    divided by its number of real configs. Ties in runtime are broken by position.

    Args:
        cost: (B, C) predicted cost.
        runtime: (B, C) measured runtime.
        mask: (B, C) bool, True for real configs.
    """
    score = (-cost.float()).masked_fill(~mask, -1e9)  # finite: exp() is 0, gradients stay finite
    key = runtime.double().masked_fill(~mask, float("inf"))
    order = torch.sort(key, dim=1, stable=True).indices
    s = torch.gather(score, 1, order)
    m = torch.gather(mask, 1, order)
    # logsumexp over the suffix s_i..s_n: a reversed cumulative logsumexp
    suffix = torch.logcumsumexp(s.flip(1), dim=1).flip(1)
    terms = torch.where(m, suffix - s, torch.zeros_like(s))
    n = m.sum(dim=1)
    per_graph = terms.sum(dim=1) / n.clamp(min=1)
    keep = n > 1
    return per_graph[keep].mean() if keep.any() else cost.sum() * 0.0


def ranking_loss(
    name: str,
    cost: torch.Tensor,
    runtime: torch.Tensor,
    mask: torch.Tensor,
    margin: float = 0.1,
    weight: torch.Tensor | None = None,
) -> torch.Tensor:
    """Dispatch by the config's loss name ("hinge" or "listmle").

    Args:
        name: one of LOSSES.
        cost, runtime, mask: see `pairwise_hinge`.
        margin: hinge margin (ignored by ListMLE).
        weight: per-config weights of the hinge (ListMLE, the likelihood of one order, ignores them).
    """
    if name == "hinge":
        return pairwise_hinge(cost, runtime, mask, margin=margin, weight=weight)
    if name == "listmle":
        return listmle(cost, runtime, mask)
    raise TpurankError(f"config: unknown gnn.loss {name!r}; expected one of {', '.join(LOSSES)}")
