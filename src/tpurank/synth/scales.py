"""How many graphs of what size each scale generates.

`tiny` is for tests (seconds), `demo` for `./run.sh all` on 2 cores (about a minute to generate),
`full` mirrors the real dataset's file counts and size distribution (for benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpurank.core.collections import COLLECTIONS, SPLITS
from tpurank.core.errors import TpurankError

REAL_COUNTS: dict[str, tuple[int, int, int]] = {  # train / valid / test files of the real dataset
    "tile:xla": (5709, 676, 844),
    "layout:xla:random": (69, 7, 8),
    "layout:xla:default": (61, 7, 8),
    "layout:nlp:random": (207, 20, 17),
    "layout:nlp:default": (198, 20, 17),
}


@dataclass(frozen=True)
class Scale:
    """Sizes of one scale. Ranges are (low, high), drawn log-uniformly per graph.

    Args:
        counts: collection -> (train, valid, test) file counts.
        tile_nodes, tile_configs: nodes and configs per tile graph.
        layout_nodes: family ("xla", "nlp") -> nodes per layout graph.
        nodes_per_configurable: nodes per configurable node (the real files have 10-30).
        max_configurable: cap on configurable nodes.
        layout_configs: configs per train/valid layout graph.
        test_layout_configs: configs per test layout graph (None: drawn like train).
        dup_share: (low, high) share of duplicate rows in train/valid random files.
    """

    name: str
    counts: dict[str, tuple[int, int, int]]
    tile_nodes: tuple[int, int]
    tile_configs: tuple[int, int]
    layout_nodes: dict[str, tuple[int, int]]
    nodes_per_configurable: tuple[int, int]
    max_configurable: int
    layout_configs: tuple[int, int]
    test_layout_configs: int | None
    dup_share: tuple[float, float]

    def count(self, collection: str, split: str) -> int:
        return self.counts[collection][SPLITS.index(split)]


def _same(train: int, valid: int, test: int) -> dict[str, tuple[int, int, int]]:
    return {c: (train, valid, test) for c in COLLECTIONS[1:]}


SCALES: dict[str, Scale] = {
    "tiny": Scale(
        name="tiny",
        counts={"tile:xla": (12, 4, 4), **_same(4, 2, 2)},
        tile_nodes=(3, 30),
        tile_configs=(10, 60),
        layout_nodes={"xla": (60, 400), "nlp": (60, 400)},
        nodes_per_configurable=(10, 16),
        max_configurable=30,
        layout_configs=(30, 150),
        test_layout_configs=None,
        dup_share=(0.05, 0.3),
    ),
    "demo": Scale(
        name="demo",
        counts={"tile:xla": (400, 60, 60), **_same(20, 5, 5)},
        tile_nodes=(3, 60),
        tile_configs=(20, 300),
        layout_nodes={"xla": (300, 3000), "nlp": (300, 3000)},
        nodes_per_configurable=(10, 20),
        max_configurable=200,
        layout_configs=(300, 1500),
        test_layout_configs=1000,
        dup_share=(0.1, 0.5),
    ),
    "full": Scale(
        name="full",
        counts=dict(REAL_COUNTS),
        tile_nodes=(2, 100),
        tile_configs=(2, 7000),
        layout_nodes={
            "xla": (3000, 40000),
            "nlp": (500, 25000),
        },  # log-uniform means 14.3k and 6.3k (real: ~14k, ~5.7k)
        nodes_per_configurable=(10, 30),
        max_configurable=3000,
        layout_configs=(20, 100_000),
        test_layout_configs=1000,
        dup_share=(0.2, 0.95),
    ),
}


def log_uniform(rng: np.random.Generator, lo: int, hi: int) -> int:
    """An integer drawn log-uniformly from [lo, hi]: many small graphs, a few huge ones, like the real data."""
    return int(round(np.exp(rng.uniform(np.log(lo), np.log(hi)))))


def get_scale(name: str) -> Scale:
    if name not in SCALES:
        raise TpurankError(f"unknown scale {name!r}; expected one of {', '.join(SCALES)}")
    return SCALES[name]
