"""Two rankers without learning, reported beside every model so a score has a floor to beat.

- `random`: a seeded random order per graph (the seed is `cfg.seed` mixed with the graph ID, so
  a graph's order does not depend on which other graphs are ranked).
- `heuristic`: layout: the fewer configurable nodes changed from the compiler default (all -1),
  the faster (ties keep config order); tile: the larger the output tile (product of the output
  bounds), the faster, then the larger kernel tile: bigger tiles mean fewer loop iterations.

Both score the unique configs of the prepared cache and map them back through `inverse`, so
duplicate configs always get identical costs. `train` is a no-op.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.core import declared
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.core.staleness import StageIO
from tpurank.prepare.cache import PreparedGraph, iter_prepared
from tpurank.prepare.store import iter_blocks

LAYOUT_DEFAULT = -1  # the value of every layout dimension in the compiler's default config
TILE_KERNEL_PRODUCT, TILE_OUTPUT_PRODUCT = 7, 15  # config_feat columns: blocks of (6 dims, sum, product)
TILE_SECOND_KEY = 1e-3  # weight of the kernel tile: it only breaks ties between equal output tiles


def random_costs(g: PreparedGraph, seed: int) -> np.ndarray:
    """A seeded random cost per unique config, broadcast to every original config index."""
    rng = np.random.default_rng([seed, zlib.crc32(g.id.encode())])
    return rng.random(g.num_unique)[g.inverse]


def heuristic_costs(g: PreparedGraph) -> np.ndarray:
    """The no-learning rule of the module docstring, per original config index (lower = faster)."""
    if g.kind == "layout":
        unique = np.zeros(g.num_unique)
        for start, block in iter_blocks(g.configs):  # chunk by chunk: never the whole tensor
            if block.size:
                unique[start : start + len(block)] = (block != LAYOUT_DEFAULT).any(axis=2).sum(axis=1)
    else:
        feat = np.asarray(g.configs, dtype=np.float64)
        unique = -np.log1p(np.maximum(feat[:, TILE_OUTPUT_PRODUCT], 0)) - TILE_SECOND_KEY * np.log1p(
            np.maximum(feat[:, TILE_KERNEL_PRODUCT], 0)
        )
    return unique[g.inverse]


@dataclass(frozen=True)
class BaselineRanker:
    """One baseline as a model object with the registry's `Model` interface.

    Args:
        name: "random" or "heuristic".
    """

    name: str

    def train(self, paths: Paths, cfg: Config, collection: str) -> None:
        """Nothing to learn."""

    def train_io(self, paths: Paths, starts: Iterable[Path] = ()) -> StageIO:
        """The train stage's declaration for this ranker (tpurank.core.declared's, by its name):
        it reads the prepared cache; its training writes nothing, yet the stage locks its folder.

        Args:
            paths: the run's resolved paths.
            starts: the checkpoints it starts from: none (an untrained ranker has no `init_from`).
        """
        return declared.train_io(paths, self.name, starts)

    def predict_io(self, paths: Paths, split: str) -> StageIO:
        """The predict stage's declaration for this ranker and split (tpurank.core.declared's, by
        its name): its costs depend on the prepared cache and the `prepare` section alone.

        Args:
            paths: the run's resolved paths.
            split: train, valid or test.
        """
        return declared.predict_io(paths, self.name, split)

    def predict(self, paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
        """Graph ID -> cost per original config index for every cached graph of the split."""
        out = {}
        for g in iter_prepared(paths.prepared, collection, split):
            out[g.id] = random_costs(g, cfg.seed) if self.name == "random" else heuristic_costs(g)
        return out


RANDOM = BaselineRanker("random")
HEURISTIC = BaselineRanker("heuristic")
