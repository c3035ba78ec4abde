"""Queries and relevance labels for LightGBM's ranking objectives.

A query is a set of rows ranked against each other: the configs of one graph. LightGBM refuses
queries over 10,000 rows, so bigger graphs are split into random disjoint queries (each still a
uniform sample of the graph's configs). Labels are integer grades of the runtime rank inside each
query (fastest = highest grade), at most `levels` of them, as label_gain needs one entry per grade.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
from scipy.stats import rankdata

from tpurank.core.errors import TpurankError

LIGHTGBM_MAX_QUERY_ROWS = 10_000  # hard limit in LightGBM's lambdarank / rank_xendcg
LIGHTGBM_MAX_LABEL = 31  # the default label_gain table has 31 entries


@dataclass
class Queries:
    """Rows regrouped into queries: `order` lists row indices query by query; `sizes` per query.

    Args:
        order: (N,) row indices of the original table, grouped by query.
        sizes: (Q,) rows per query, summing to N.
    """

    order: np.ndarray
    sizes: np.ndarray


def split_queries(graph: np.ndarray, max_rows: int, seed: int = 0) -> Queries:
    """Group rows by graph; split each graph over `max_rows` rows into near-equal random queries.

    Args:
        graph: (N,) graph ID of each row.
        max_rows: the largest query allowed (<= 10,000).
        seed: seeds the shuffle of each split graph (with the graph ID, so it is order-independent).
    """
    if not 1 <= max_rows <= LIGHTGBM_MAX_QUERY_ROWS:
        raise TpurankError(f"lgbm.max_query_rows must be 1..{LIGHTGBM_MAX_QUERY_ROWS}, got {max_rows}")
    graph = np.asarray(graph)
    ids, first, codes = np.unique(graph, return_index=True, return_inverse=True)
    by_graph = np.argsort(codes, kind="stable")
    bounds = np.cumsum(np.bincount(codes, minlength=len(ids)))
    order: list[np.ndarray] = []
    sizes: list[int] = []
    for gi in np.argsort(first):  # graphs in order of first appearance
        rows = by_graph[(bounds[gi - 1] if gi else 0) : bounds[gi]]
        if len(rows) > max_rows:
            rng = np.random.default_rng([seed, zlib.crc32(str(ids[gi]).encode())])
            rows = rng.permutation(rows)
            for part in np.array_split(rows, -(-len(rows) // max_rows)):
                order.append(part)
                sizes.append(len(part))
        else:
            order.append(rows)
            sizes.append(len(rows))
    if not order:
        return Queries(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64))
    return Queries(np.concatenate(order).astype(np.int64), np.asarray(sizes, dtype=np.int64))


def grades(runtime: np.ndarray, levels: int) -> np.ndarray:
    """Integer relevance of each row of ONE query: levels-1 for the fastest down to 0.

    The runtime rank (ties share the best rank) is cut into `levels` equal-width bins of the
    rank percentile, so every grade spans the same share of the query.

    Args:
        runtime: (n,) runtimes of the query's rows.
        levels: number of grades, 2..31.
    """
    if not 2 <= levels <= LIGHTGBM_MAX_LABEL:
        raise TpurankError(f"lgbm.relevance_levels must be 2..{LIGHTGBM_MAX_LABEL}, got {levels}")
    n = len(runtime)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    rank = rankdata(runtime, method="min") - 1  # 0 = fastest
    return (levels - 1 - np.floor(rank * levels / n)).astype(np.int32)


def query_labels(runtime: np.ndarray, sizes: np.ndarray, levels: int) -> np.ndarray:
    """Grades for rows already arranged query by query (as `Queries.order` arranges them).

    Args:
        runtime: (N,) runtimes in query order.
        sizes: (Q,) rows per query.
        levels: number of grades.
    """
    out = np.empty(len(runtime), dtype=np.int32)
    start = 0
    for size in sizes:
        out[start : start + size] = grades(runtime[start : start + size], levels)
        start += size
    return out


def label_gain(levels: int, kind: str) -> list[float]:
    """LightGBM's `label_gain`: the gain of each grade.

    Args:
        levels: number of grades.
        kind: "linear" (gain i: every position counts, as in Kendall tau) or "exp" (2^i - 1:
            the top counts most, as in the tile score).
    """
    if kind == "linear":
        return [float(i) for i in range(levels)]
    if kind == "exp":
        return [float(2**i - 1) for i in range(levels)]
    raise TpurankError(f"lgbm.label_gain must be 'linear' or 'exp', got {kind!r}")
