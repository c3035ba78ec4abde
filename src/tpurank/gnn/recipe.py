"""How a GNN ranker is trained and run (`Recipe`), and what a model family is (`ModelSpec`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Generic, TypeVar

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.nets.standardize import HasNodeFeatures

S = TypeVar("S")  # a family's config section (`GnnConfig`, `BaselineConfig`)


@dataclass
class Recipe:
    """How a model is trained and run; each family builds it from its config section, field by
    field (`ModelSpec.section_recipe`), so no field has a default a config could silently miss.

    Training length is a budget, not epochs: at most `max_steps` optimizer steps and at most
    `time_budget_min` minutes, validating every `eval_every` steps (0: about one pass over the
    train configs, at most 200 steps) and stopping after `patience` validations without a gain.
    Saved whole in each checkpoint (`dataclasses.asdict`); `from_saved` reads it back.
    """

    loss: str  # "hinge" or "listmle" (resolved: never "auto")
    margin: float
    configs_per_graph: int
    graphs_per_batch: int
    optimizer: str  # "adamw" or "adam"
    lr: float
    weight_decay: float
    schedule: str  # "cosine" (over max_steps) or "constant"
    clip_norm: float  # 0 = off
    clip_per_tensor: bool  # clip each gradient tensor on its own (the official trainer) or the global norm
    max_steps: int
    eval_every: int
    time_budget_min: float  # 0 = no time limit
    patience: int
    eval_max_configs: int
    predict_chunk: int
    bf16: bool
    max_batch_nodes: int  # nodes per training forward pass; 0 = the whole step at once
    # Graph Segment Training (gnn/gst/, gnn/training/segment_step.py; layout only): 0 = off
    segment_nodes: int
    segments_per_step: int
    stale_dropout: float
    finetune_steps: int
    history_mb: int
    warmup_steps: int  # linear learning-rate warm-up before the schedule (gnn/training/lr_schedule.py)
    min_train_share: float  # patience stops no run before this share of its budget
    dim_features: bool  # node inputs: dimensions against the 128-lane tile (gnn/nets/tile_inputs.py)

    # fields added after checkpoints were first written, and what a training ran with before each
    # existed: a checkpoint without one reads back as it was trained
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "max_batch_nodes": 0,
        "segment_nodes": 0,
        "segments_per_step": 1,
        "stale_dropout": 0.0,
        "finetune_steps": 0,
        "history_mb": 1024,
        "warmup_steps": 0,
        "min_train_share": 0.0,
        "dim_features": False,
    }

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> Recipe:
        """The recipe a checkpoint's `recipe` holds (`ADDED_LATER` fills what an older one lacks).

        Raises:
            TypeError: a field the recipe does not have, or one the file lacks that was there from the start.
        """
        return cls(**{**cls.ADDED_LATER, **saved})


class ModelSpec(ABC, Generic[S]):
    """A model family: all that differs between the GNN rankers. Training, prediction, seed
    averaging and checkpoints are shared, as PyG's BasicGNN subclasses differ only in their
    convolution: a family (a subclass in `gnn/families/`) names its network class and its config
    section, and says in two methods how that section builds the network and the recipe.

    Class attributes:
        name: the registry name and the folder under models/ (saved in each checkpoint).
        section: the family's config section ("gnn", "baseline"): its key in messages and step keys.
        network_class: the network class; its `from_saved` rebuilds a checkpoint's network.
    """

    name: ClassVar[str]
    section: ClassVar[str]
    network_class: ClassVar[type[RankerNet]]

    @abstractmethod
    def settings(self, cfg: Config) -> S:
        """The family's section of `cfg`."""

    @abstractmethod
    def network(self, s: S, kind: str, node_feat_dim: int) -> RankerNet:
        """A new network for a collection of `kind`: every argument from the section `s`, by name
        (the family's one place where the config reaches the network)."""

    @abstractmethod
    def section_recipe(self, s: S, kind: str) -> Recipe:
        """How the family trains and runs on a collection of `kind`: every field from the section
        `s` or fixed by the family (what the family decides, or names differently)."""

    def fit_train(self, model: RankerNet, train: Sequence[HasNodeFeatures]) -> None:
        """Fit a new model to the train graphs before training (e.g. feature statistics); nothing
        unless the family says otherwise.

        Args:
            model: the network just built (`new_network`).
            train: the train graphs it is about to learn from.
        """

    def seeds(self, cfg: Config) -> int:
        """Models trained and averaged per collection (1 unless the family's section says otherwise)."""
        return 1

    def recipe(self, cfg: Config, kind: str) -> Recipe:
        """How the family trains and runs on a collection of `kind` under `cfg`."""
        return self.section_recipe(self.settings(cfg), kind)

    def new_network(self, cfg: Config, kind: str, node_feat_dim: int) -> RankerNet:
        """A new network for a collection of `kind` from the family's section of `cfg`."""
        return self.network(self.settings(cfg), kind, node_feat_dim)

    def load_network(self, saved_args: dict[str, Any]) -> RankerNet:
        """The network a checkpoint's `model_args` describe (its weights not loaded)."""
        return self.network_class.from_saved(saved_args)


def check_recipe(r: Recipe) -> None:
    """One-line errors for a recipe that cannot train (the config checks each field; these are the
    limits of the loop)."""
    if r.configs_per_graph < 2:
        raise TpurankError("config: configs_per_graph must be at least 2 (ranking needs pairs)")
    if r.graphs_per_batch < 1 or r.max_steps < 1 or r.eval_every < 0 or r.patience < 1:
        raise TpurankError(
            "config: graphs_per_batch, max_steps and patience must be at least 1, eval_every at least 0"
        )
    if r.time_budget_min < 0:
        raise TpurankError(f"config: time_budget_min must be >= 0 (0 = no limit), got {r.time_budget_min}")
