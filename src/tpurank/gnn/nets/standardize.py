"""Node-feature standardisation fitted on the train graphs only.

The prepared node features differ in scale by orders of magnitude between columns (sizes, counts,
flags); `gnn.standardize` centres and scales each column with the mean and standard deviation of
all train-graph nodes. The statistics are model buffers, so they are saved in `model.pt` and
applied unchanged to valid and test graphs: nothing is fitted on the graphs being ranked.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np
import torch
from torch import nn

STATISTICS = ("feat_mean", "feat_std")  # the buffers fit_train_stats sets: each training's own

MIN_STD = 1e-6  # a constant column is centred, not scaled


class HasNodeFeatures(Protocol):
    """A graph as standardisation reads it (`gnn.data.GraphData`): its (n, F) node features."""

    node_feat: torch.Tensor


def feature_stats(graphs: Sequence[HasNodeFeatures]) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean, std) per node-feature column over every node of `graphs` (float64 sums, float32 out).

    Args:
        graphs: the train graphs (each node counts once).
    """
    width = int(graphs[0].node_feat.shape[1])
    total, sq, n = np.zeros(width), np.zeros(width), 0
    for g in graphs:
        x = g.node_feat.numpy().astype(np.float64)
        total += x.sum(0)
        sq += (x * x).sum(0)
        n += len(x)
    mean = total / max(n, 1)
    std = np.sqrt(np.maximum(sq / max(n, 1) - mean * mean, 0.0))
    std = np.where(std < MIN_STD, 1.0, std)
    return torch.from_numpy(mean.astype(np.float32)), torch.from_numpy(std.astype(np.float32))


def fit_train_stats(model: nn.Module, train: Sequence[HasNodeFeatures]) -> None:
    """Set a model's `feat_mean`/`feat_std` buffers from the train graphs (no-op without them).

    Args:
        model: a GnnRanker (built with standardize=True to have the buffers).
        train: the train graphs the model is about to learn from.
    """
    if getattr(model, "feat_mean", None) is None:
        return
    mean, std = feature_stats(train)
    model.feat_mean.copy_(mean)
    model.feat_std.copy_(std)
