"""The GNN rankers as the model registry (`tpurank.models.registry`) sees them: `GNN` and
`OFFICIAL`, each a model family's `ModelSpec` with the one `train` and `predict` they share: both
are a `tpurank.models.registry.Model`."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.gnn.families import baseline, gnn
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.recipe import ModelSpec
from tpurank.gnn.seeds import forget_seeds, predict_seeds, train_seeds, trained_seeds
from tpurank.gnn.training.collection import train_collection


@dataclass(frozen=True)
class Family:
    """One model family's `train` and `predict`, the same code for every family.

    Args:
        spec: the family.
    """

    spec: ModelSpec

    def train(self, paths: Paths, cfg: Config, collection: str) -> None:
        """Train on the prepared train split, early-stop on valid; writes models/<name>/<collection>/
        (one model, or one per seed averaged when the family's section asks for `seeds` > 1).

        Args:
            paths: resolved paths (reads `paths.prepared`, writes `paths.model_dir`).
            cfg: the collection's config (`Config.for_collection`: its overrides applied).
            collection: one of tpurank.core.collections.COLLECTIONS.
        """
        if self.spec.seeds(cfg) > 1:
            train_seeds(self.spec, paths, cfg, collection)
            return
        # first: an interrupted retrain must not leave stale members averaged
        forget_seeds(self.spec, paths, collection)
        train_collection(self.spec, paths, cfg, collection)

    def predict(self, paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
        """Graph ID -> cost per original config index (lower = predicted faster).

        Args:
            paths: resolved paths.
            cfg: the collection's config (only prediction settings are read; the architecture, and
                the number of seeds, come from what training wrote).
            collection: one of tpurank.core.collections.COLLECTIONS.
            split: train, valid or test.
        """
        if trained_seeds(self.spec, paths, collection):  # as many seeds as were trained (seeds.json)
            return predict_seeds(self.spec, paths, cfg, collection=collection, split=split)
        return predict_collection(self.spec, paths, cfg, collection=collection, split=split)


GNN = Family(gnn.SPEC)
OFFICIAL = Family(baseline.SPEC)
