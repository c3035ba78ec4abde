"""The tpurank GNN family (`--model gnn`): `GnnRanker` on the `gnn` config section, AdamW with a
cosine schedule and a global gradient-norm clip, the loss picked per collection kind."""

from __future__ import annotations

from tpurank.core.config import GnnConfig
from tpurank.gnn.nets.gnn_ranker import GnnRanker, GnnRankerArgs
from tpurank.gnn.nets.standardize import fit_train_stats
from tpurank.gnn.recipe import ModelSpec, Recipe
from tpurank.gnn.training.losses import resolve_loss

ALL_CONFIGS = 1 << 30  # configs_per_graph of `gnn.tile_all_configs`: sample_rows then takes every config


def network(s: GnnConfig, kind: str, node_feat_dim: int) -> GnnRanker:
    """A new `GnnRanker` for a collection of `kind`, every argument from the `gnn` section."""
    return GnnRanker(
        GnnRankerArgs(
            kind=kind,
            node_feat_dim=node_feat_dim,
            hidden=s.hidden,
            layers=s.layers,
            aggr=s.aggr,
            opcode_dim=s.opcode_dim,
            config_dim=s.config_dim,
            dropout=s.dropout,
            cross_config_attention=s.cross_config_attention,
            heads=s.heads,
            checkpoint_layers=s.checkpoint_layers,
            checkpoint_min_states=s.checkpoint_min_states,
            standardize=s.standardize,
            layer_attention=s.layer_attention,
            tile_features=s.tile_features,
        )
    )


def _recipe(s: GnnConfig, kind: str) -> Recipe:
    return Recipe.from_section(
        s,
        loss=resolve_loss(s.loss, kind),
        configs_per_graph=ALL_CONFIGS if kind == "tile" and s.tile_all_configs else s.configs_per_graph,
        optimizer="adamw",
        schedule="cosine",
        clip_norm=s.grad_clip,
        clip_per_tensor=False,
    )


SPEC = ModelSpec(
    name="gnn",
    network=GnnRanker,
    section="gnn",
    network_of=network,
    recipe_of=_recipe,
    fit_train=fit_train_stats,
)
