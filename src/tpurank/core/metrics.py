"""The competition metric and a few diagnostics, per graph and per collection.

A ranking is an `order`: config indices, fastest predicted first. Layout graphs are scored by
Kendall's tau-b between each config's predicted rank and its measured runtime; tile graphs by
`2 - min(y[top5]) / min(y)` on normalized runtimes `y = runtime / normalizer`.

Choices where the spec is silent (documented in docs/validation.md, "Scoring"):
- ties in runtime: tau-b handles them (tied pairs count as neither concordant nor discordant);
- constant runtimes (or fewer than 2 configs): tau is undefined (NaN); such graphs are left out
  of the collection mean and counted separately;
- fewer than 5 configs: top-k is all configs, so the tile score is 1.0;
- the overall score is the plain mean over the collections that have at least one scored graph.

scipy.stats is imported where it is used, not at the top: it holds ~60 MB, and `all`'s own
process, which imports this module but scores nothing itself, stays light beside the step it runs
(docs/scale.md, "Memory on the CPU"; tests/project/test_imports.py).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from tpurank.core.collections import COLLECTIONS, kind_of

TILE_TOP_K = 5  # the competition scores the best of the first 5 tile predictions


def rank_from_order(order: np.ndarray, n: int | None = None) -> np.ndarray:
    """Position of each config in `order` (0 = predicted fastest).

    Args:
        order: a permutation of 0..n-1, fastest first.
        n: number of configs (default: len(order)).
    """
    order = np.asarray(order, dtype=np.int64)
    n = len(order) if n is None else n
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(len(order))
    return rank


def order_from_costs(costs: np.ndarray) -> np.ndarray:
    """Config indices sorted by cost (lower = faster); ties keep index order (stable)."""
    return np.argsort(np.asarray(costs), kind="stable")


def kendall_tau(order: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall tau-b between the predicted rank (from `order`) and the measured runtimes.

    Args:
        order: permutation of the config indices, fastest predicted first.
        runtime: measured runtime per config index.

    Returns:
        tau in [-1, 1]; NaN when undefined (constant runtimes or fewer than 2 configs).
    """
    runtime = np.asarray(runtime, dtype=np.float64)
    if len(runtime) < 2 or np.all(runtime == runtime[0]):
        return math.nan
    from scipy.stats import kendalltau  # here: see the module docstring

    rank = rank_from_order(order, len(runtime))
    return float(kendalltau(rank, runtime, variant="b").statistic)


def pair_accuracy(order: np.ndarray, runtime: np.ndarray) -> float:
    """Share of config pairs with different runtimes that the ranking puts in the right order.

    Derived from tau-b in O(n log n): a permutation has no tied ranks, so with n0 pairs, n1 pairs
    tied in runtime, C concordant and D discordant pairs, C + D = n0 - n1 and
    C - D = tau_b * sqrt(n0 * (n0 - n1)).

    Args:
        order: permutation of the config indices, fastest predicted first.
        runtime: measured runtime per config index.
    """
    runtime = np.asarray(runtime, dtype=np.float64)
    tau = kendall_tau(order, runtime)
    if math.isnan(tau):
        return math.nan
    n = len(runtime)
    n0 = n * (n - 1) / 2
    _, counts = np.unique(runtime, return_counts=True)
    n1 = float((counts * (counts - 1) / 2).sum())
    untied = n0 - n1
    c_minus_d = tau * math.sqrt(n0 * untied)
    return float((untied + c_minus_d) / 2 / untied)


def slowdown_at_k(order: np.ndarray, runtime: np.ndarray, k: int) -> float:
    """min(runtime of the first k predicted) / min(runtime): 1.0 when the best is in the top k.

    Args:
        order: config indices, fastest predicted first (at least the first k are used).
        runtime: measured (tile: normalized) runtime per config index; must be positive.
        k: how many of the top predictions count (all when fewer configs).
    """
    runtime = np.asarray(runtime, dtype=np.float64)
    top = np.asarray(order[:k], dtype=np.int64)
    return float(runtime[top].min() / runtime.min())


def tile_score(order: np.ndarray, runtime: np.ndarray, k: int = TILE_TOP_K) -> float:
    """The competition's tile score `2 - min(y[top k]) / min(y)` (1.0 = best config in the top k).

    Args:
        order: config indices, fastest predicted first (5, or all when fewer).
        runtime: normalized runtime per config index (runtime / normalizer).
        k: the competition uses 5.
    """
    return 2.0 - slowdown_at_k(order, runtime, k)


def normalized_runtime(runtime: np.ndarray, normalizers: np.ndarray | None) -> np.ndarray:
    """Tile runtimes divided by their normalizers (the default config's runtime)."""
    runtime = np.asarray(runtime, dtype=np.float64)
    if normalizers is None:
        return runtime
    return runtime / np.asarray(normalizers, dtype=np.float64)


def graph_metrics(collection: str, order: np.ndarray, runtime: np.ndarray) -> dict[str, float]:
    """Every metric of one graph: `score` (the competition's) plus the diagnostics.

    Args:
        collection: one of COLLECTIONS (decides tile or layout scoring).
        order: the submitted ranking, fastest first (tile: the 5 submitted indices).
        runtime: runtime per config index (tile: already normalized).
    """
    order = np.asarray(order, dtype=np.int64)
    if len(runtime) == 0:  # a graph without configs has no score (counted as undefined)
        nan = float("nan")
        return {"slowdown@1": nan, "slowdown@5": nan, "score": nan} | (
            {} if kind_of(collection) == "tile" else {"pair_accuracy": nan}
        )
    out = {
        "slowdown@1": slowdown_at_k(order, runtime, 1),
        "slowdown@5": slowdown_at_k(order, runtime, TILE_TOP_K),
    }
    if kind_of(collection) == "tile":
        out["score"] = 2.0 - out["slowdown@5"]
    else:
        out["score"] = kendall_tau(order, runtime)
        out["pair_accuracy"] = pair_accuracy(order, runtime)
    return out


def mean_score(scores: Iterable[float]) -> tuple[float, int, int]:
    """(mean of the defined scores, how many were used, how many were NaN and left out)."""
    arr = np.asarray(list(scores), dtype=np.float64)
    defined = arr[~np.isnan(arr)]
    mean = float(defined.mean()) if len(defined) else math.nan
    return mean, int(len(defined)), int(len(arr) - len(defined))


def overall_score(collection_scores: Mapping[str, float]) -> float:
    """Plain mean over the five collections (those present and defined)."""
    vals = [collection_scores[c] for c in COLLECTIONS if c in collection_scores]
    vals = [v for v in vals if not math.isnan(v)]
    return float(np.mean(vals)) if vals else math.nan


def summarize(per_graph: Sequence[Mapping[str, object]]) -> dict[str, dict[str, float]]:
    """Collection means of every metric from per-graph rows (keys: collection, score, ...).

    Returns:
        {collection: {"score", "graphs", "undefined", and the mean of each diagnostic}}, in
        COLLECTIONS order, only for collections that appear.
    """
    out: dict[str, dict[str, float]] = {}
    for c in COLLECTIONS:
        rows = [r for r in per_graph if r["collection"] == c]
        if not rows:
            continue
        score, used, undefined = mean_score(float(r["score"]) for r in rows)  # type: ignore[arg-type]
        entry: dict[str, float] = {"score": score, "graphs": used, "undefined": undefined}
        for key in ("pair_accuracy", "slowdown@1", "slowdown@5"):
            if key in rows[0]:
                entry[key] = mean_score(float(r[key]) for r in rows)[0]  # type: ignore[arg-type]
        out[c] = entry
    return out
