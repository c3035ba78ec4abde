"""How a GNN ranker is trained and run (`Recipe`), and what a model family is (`ModelSpec`)."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError


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
    # Graph Segment Training (gnn/gst.py; layout only): 0 = off
    segment_nodes: int = 0
    segments_per_step: int = 1
    stale_dropout: float = 0.0
    finetune_steps: int = 0
    history_mb: int = 1024
    warmup_steps: int = 0  # linear learning-rate warm-up before the schedule (gnn/schedule.py)
    min_train_share: float = 0.0  # patience stops no run before this share of its budget
    dim_features: bool = False  # node inputs: dimensions against the 128-lane tile (gnn/tile_inputs.py)

    @classmethod
    def from_section(cls, section: Any, **fixed: Any) -> Recipe:
        """The recipe of a config section: each field named alike in the section is taken from it,
        `fixed` gives the rest (what the model family decides, or names differently)."""
        taken = {
            f.name: getattr(section, f.name) for f in dataclasses.fields(cls) if hasattr(section, f.name)
        }
        return cls(**{**taken, **fixed})


def constructor_args(model: type[nn.Module], section: Any, **fixed: Any) -> dict[str, Any]:
    """A model's constructor arguments (saved in its checkpoint): each parameter named alike in the
    config section is taken from it, `fixed` gives the rest (kind, input width)."""
    params = [n for n in inspect.signature(model.__init__).parameters if n != "self"]
    return {
        n: fixed[n] if n in fixed else getattr(section, n)
        for n in params
        if n in fixed or hasattr(section, n)
    }


@dataclass
class ModelSpec:
    """A model family: its registry name, constructor, and how the config maps to it."""

    name: str
    build: Callable[[dict[str, Any]], nn.Module]
    model_args: Callable[[Config, str, int], dict[str, Any]]  # (cfg, kind, node_feat_dim) -> kwargs
    recipe: Callable[[Config, str], Recipe]  # (cfg, kind) -> how it is trained and run
    # called once on a new model with the train graphs before training (e.g. fit feature statistics)
    fit_train: Callable[[nn.Module, list[Any]], None] | None = None


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
