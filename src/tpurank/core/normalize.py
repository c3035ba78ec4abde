"""Per-graph normalisation of predicted costs, so rankers on different scales can be averaged
(the ensemble's members, the GNN's seed members). scipy.stats is imported where it is used, as in
tpurank.core.metrics: `all`'s own process imports this module and must stay light."""

from __future__ import annotations

import numpy as np

from tpurank.core.errors import TpurankError


def normalize(cost: np.ndarray, how: str) -> np.ndarray:
    """Per-graph normalized cost: ranks in [0, 1] or z-scores (a constant graph maps to zeros).

    NaN marks a config that was not scored (a neural ranker's valid predictions score only the configs
    that validation scores: `data.subsets.scored_configs`): it stays NaN, and the others are
    normalized among themselves.
    """
    cost = np.asarray(cost, dtype=np.float64)
    scored = ~np.isnan(cost)
    if not scored.all():
        out = np.full(len(cost), np.nan)
        out[scored] = normalize(cost[scored], how)
        return out
    if how == "rank":
        from scipy.stats import rankdata  # here: see the module docstring

        return (rankdata(cost) - 1) / max(1, len(cost) - 1)
    if how == "zscore":
        std = cost.std()
        return (cost - cost.mean()) / std if std > 0 else np.zeros_like(cost)
    raise TpurankError(f"config: ensemble.normalize must be 'rank' or 'zscore', got {how!r}")
