"""How a GNN ranker is trained and run (`Recipe`), and what a model family is (`ModelSpec`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.gnn.nets.ranker_net import RankerNet


@dataclass
class Recipe:
    """How a model is trained and run; built from its config section.

    Training length is a budget, not epochs: at most `max_steps` optimizer steps and at most
    `time_budget_min` minutes, validating every `eval_every` steps (0: about one pass over the
    train configs, at most 200 steps) and stopping after `patience` validations without a gain.
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
    max_batch_nodes: int = 0  # nodes per training forward pass; 0 = the whole step at once
    # Graph Segment Training (gnn/gst/, gnn/training/segment_step.py; layout only): 0 = off
    segment_nodes: int = 0
    segments_per_step: int = 1
    stale_dropout: float = 0.0
    finetune_steps: int = 0
    history_mb: int = 1024
    warmup_steps: int = 0  # linear learning-rate warm-up before the schedule (gnn/training/lr_schedule.py)
    min_train_share: float = 0.0  # patience stops no run before this share of its budget
    dim_features: bool = False  # node inputs: dimensions against the 128-lane tile (gnn/nets/tile_inputs.py)

    @classmethod
    def from_section(cls, section: Any, **fixed: Any) -> Recipe:
        """The recipe of a config section: each field named alike in the section is taken from it,
        `fixed` gives the rest (what the model family decides, or names differently)."""
        taken = {
            f.name: getattr(section, f.name) for f in dataclasses.fields(cls) if hasattr(section, f.name)
        }
        return cls(**{**taken, **fixed})


@dataclass(frozen=True)
class ModelSpec:
    """A model family: all that differs between the GNN rankers. Training, prediction, seed
    averaging and checkpoints are shared, as PyG's BasicGNN subclasses differ only in their
    convolution: a family names its network, its config section and how that section trains.

    Args:
        name: the registry name and the folder under models/ (saved in each checkpoint).
        network: the network class; its `from_saved` rebuilds a checkpoint's network.
        section: the family's config section ("gnn", "baseline").
        network_of: (section, kind, node feature width) -> a new network, its arguments read from
            the section by name (the family's one place where the config reaches the network).
        recipe_of: (section, kind) -> how the family trains and runs on a collection kind.
        fit_train: called once on a new model with the train graphs before training (e.g. to fit
            feature statistics).
    """

    name: str
    network: type[RankerNet]
    section: str
    network_of: Callable[[Any, str, int], RankerNet]
    recipe_of: Callable[[Any, str], Recipe]
    fit_train: Callable[[RankerNet, list[Any]], None] | None = None

    def settings(self, cfg: Config) -> Any:
        """The family's section of `cfg`."""
        return getattr(cfg, self.section)

    def recipe(self, cfg: Config, kind: str) -> Recipe:
        """How the family trains and runs on a collection of `kind` under `cfg`."""
        return self.recipe_of(self.settings(cfg), kind)

    def new_network(self, cfg: Config, kind: str, node_feat_dim: int) -> RankerNet:
        """A new network for a collection of `kind` from the family's section of `cfg`."""
        return self.network_of(self.settings(cfg), kind, node_feat_dim)

    def load_network(self, saved_args: dict[str, Any]) -> RankerNet:
        """The network a checkpoint's `model_args` describe (its weights not loaded)."""
        return self.network.from_saved(saved_args)

    def seeds(self, cfg: Config) -> int:
        """Models trained and averaged per collection (1 for a section without `seeds`)."""
        return int(getattr(self.settings(cfg), "seeds", 1))


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
