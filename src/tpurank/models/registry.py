"""`REGISTRY`: model name -> a typed loader of the `Model` that trains and predicts it.

Each loader imports its model's module only when called: the stages' faces and a train stage that
only waits on its collections' processes read `MODEL_NAMES` and `check_name` here without loading
torch, LightGBM or pandas (tests/project/test_imports.py). The loaders name their modules in
plain imports, so go-to-definition runs from a stage through `get_model` to the model's code.

What a model reads and writes is part of `Model` (`train_io`, `predict_io`), and each model's
answer is tpurank.core.declared's for its name: the declarations live there, below every stage, so
that `all` and a waiting stage know them without importing any model, and a caller that holds the
model already asks the model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from tpurank.core.errors import TpurankError

if TYPE_CHECKING:
    from pathlib import Path

    import numpy as np

    from tpurank.core.config import Config
    from tpurank.core.paths import Paths
    from tpurank.core.staleness import StageIO


@runtime_checkable
class Model(Protocol):
    """A ranker as `train`, `predict` and the ensemble call it, with the declarations of what its
    training and its predictions read and write: an object with these methods, or a module with
    these functions (`tpurank.lgbm.model`, `tpurank.models.ensemble`).

    `cfg` is the collection's config (`Config.for_collection`): the callers (the train, predict and
    ensemble stages) apply the per-collection overrides, once.
    """

    def train(self, paths: Paths, cfg: Config, collection: str) -> None:
        """Train on `collection`, writing `models/<name>/<collection>/` under `paths`.

        Args:
            paths: the run's resolved paths.
            cfg: the collection's config.
            collection: one of tpurank.core.collections.COLLECTIONS.
        """

    def predict(self, paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
        """Graph ID -> cost per original config index (lower = predicted faster).

        Args:
            paths: the run's resolved paths.
            cfg: the collection's config.
            collection: one of tpurank.core.collections.COLLECTIONS.
            split: train, valid or test.
        """

    def train_io(self, paths: Paths, starts: Iterable[Path] = ()) -> StageIO:
        """The train stage's declaration for this model (tpurank.core.declared's `train_io` of its
        name): what its training reads, so a change to any of it makes the model stale, and the
        folder it writes, which the stage locks while it trains.

        Args:
            paths: the run's resolved paths.
            starts: the checkpoints a network starts from (`starting_points`): read like its data.
        """

    def predict_io(self, paths: Paths, split: str) -> StageIO:
        """The predict stage's declaration for this model and split (tpurank.core.declared's
        `predict_io` of its name): the files and config sections each collection's predictions
        are keyed on, and the predictions and CSV it writes.

        Args:
            paths: the run's resolved paths.
            split: train, valid or test.
        """


# Each loader imports its model when called, never when this module is: a face or a waiting stage
# stays light (the module docstring).
def random() -> Model:
    """`random`: a seeded random order per graph."""
    from tpurank.models.untrained import RANDOM  # numpy and the prepared cache: loaded when used

    return RANDOM


def heuristic() -> Model:
    """`heuristic`: the fewer layout changes, the larger the tile, the faster."""
    from tpurank.models.untrained import HEURISTIC  # numpy and the prepared cache: loaded when used

    return HEURISTIC


def lgbm() -> Model:
    """`lgbm`: LightGBM LambdaRank on the feature tables."""
    from tpurank.lgbm import model  # LightGBM and pandas: loaded when used

    return model


def gnn() -> Model:
    """`gnn`: the tpurank GNN."""
    from tpurank.gnn.entry import GNN  # torch and PyG: loaded when used

    return GNN


def baseline() -> Model:
    """`baseline`: the official TpuGraphs early-join GraphSAGE."""
    from tpurank.gnn.entry import OFFICIAL  # torch and PyG: loaded when used

    return OFFICIAL


def ensemble() -> Model:
    """`ensemble`: the members' normalized predictions, averaged with weights fitted on valid."""
    from tpurank.models import ensemble as members  # numpy and the prepared cache: loaded when used

    return members


REGISTRY: dict[str, Callable[[], Model]] = {
    "random": random,
    "heuristic": heuristic,
    "lgbm": lgbm,
    "gnn": gnn,
    "baseline": baseline,
    "ensemble": ensemble,
}
MODEL_NAMES: tuple[str, ...] = tuple(REGISTRY)


def check_name(name: str) -> Callable[[], Model]:
    """The loader of a model name, nothing imported (a stage that only waits on its training
    processes stays light).

    Raises:
        TpurankError: for an unknown name.
    """
    load = REGISTRY.get(name)
    if load is None:
        raise TpurankError(f"unknown model {name!r}; expected one of {', '.join(MODEL_NAMES)}")
    return load


def get_model(name: str) -> Model:
    """The model of a name, its module imported now.

    Raises:
        TpurankError: for an unknown name or a module missing from this version.
    """
    load = check_name(name)
    try:
        return load()
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("tpurank."):  # not a library: a module this install lacks
            raise TpurankError(f"model {name!r} ({e.name}) is not available in this version") from None
        raise
