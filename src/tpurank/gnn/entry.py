"""The GNN rankers as the model registry (`tpurank.models.registry`) sees them: `GNN` and
`OFFICIAL`, each a model family's `ModelSpec` with the one `train` and `predict` they share, and
the declarations of what those read and write: both are a `tpurank.models.registry.Model`."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.core import declared
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.core.staleness import StageIO
from tpurank.gnn.families import baseline, gnn
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.recipe import ModelSpec
from tpurank.gnn.seeds import forget_seeds, predict_seeds, train_seeds, trained_seeds
from tpurank.gnn.training.collection import train_collection


@dataclass(frozen=True)
class Family:
    """One model family's `train` and `predict`, and their declarations: the same code for every family.

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

    def train_io(self, paths: Paths, starts: Iterable[Path] = ()) -> StageIO:
        """The train stage's declaration for this family (tpurank.core.declared's, by its name):
        the prepared cache, the checkpoints it starts from and its config sections, which key its
        models; its models' folder, which the stage locks while it trains.

        Args:
            paths: the run's resolved paths.
            starts: the checkpoints the network starts from (the family's `init_from`,
                `declared.starting_points`): their content keys the training like its data's.
        """
        return declared.train_io(paths, self.spec.name, starts)

    def predict_io(self, paths: Paths, split: str) -> StageIO:
        """The predict stage's declaration for this family and split (tpurank.core.declared's, by
        its name): the data, the prepared cache and its models, on which each collection's
        predictions are keyed; the predictions and the split's CSV it writes.

        Args:
            paths: the run's resolved paths.
            split: train, valid or test.
        """
        return declared.predict_io(paths, self.spec.name, split)


GNN = Family(gnn.SPEC)
OFFICIAL = Family(baseline.SPEC)
