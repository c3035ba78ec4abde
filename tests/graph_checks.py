"""Checks of prepared graphs that the prepare tests share: one graph equal to another field by
field, and a plain breadth-first search that pruning is held against."""

from __future__ import annotations

from collections import deque

import numpy as np

from tpurank.prepare.cache import FIELD_NAMES, PreparedGraph


def assert_same_graph(a: PreparedGraph, b: PreparedGraph) -> None:
    for name in FIELD_NAMES:
        x, y = getattr(a, name), getattr(b, name)
        if name == "configs":  # a loaded graph's configs are a ConfigStore
            x, y = np.asarray(x), np.asarray(y)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


def assert_same_graph_field(a: PreparedGraph, b: PreparedGraph, name: str) -> None:
    x, y = getattr(a, name), getattr(b, name)
    if isinstance(x, np.ndarray):
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    else:
        assert x == y, name


def bfs(num_nodes: int, edges: np.ndarray, seeds: np.ndarray, hops: int) -> set[int]:
    """Plain breadth-first search over edges in both directions (independent of the code under test)."""
    nbrs: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in edges.tolist():
        nbrs[u].append(v)
        nbrs[v].append(u)
    dist = {int(s): 0 for s in seeds}
    queue = deque(dist)
    while queue:
        x = queue.popleft()
        if dist[x] == hops:
            continue
        for y in nbrs[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                queue.append(y)
    return set(dist)
