"""The tpurank GNN family (`--model gnn`): `GnnRanker` on the `gnn` config section, AdamW with a
cosine schedule and a global gradient-norm clip, the loss picked per collection kind."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from tpurank.core.config import Config, GnnConfig
from tpurank.gnn.nets.gnn_ranker import GnnRanker, GnnRankerArgs
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.nets.standardize import HasNodeFeatures, fit_train_stats
from tpurank.gnn.recipe import ModelSpec, Recipe
from tpurank.gnn.training.losses import resolve_loss

ALL_CONFIGS = 1 << 30  # configs_per_graph of `gnn.tile_all_configs`: batch_rows then takes every config


class GnnFamily(ModelSpec[GnnConfig]):
    """`GnnRanker` on the `gnn` section: standardized inputs, seeds averaged."""

    name: ClassVar[str] = "gnn"
    section: ClassVar[str] = "gnn"
    network_class: ClassVar[type[RankerNet]] = GnnRanker

    def settings(self, cfg: Config) -> GnnConfig:
        """The `gnn` section of `cfg`."""
        return cfg.gnn

    def network(self, s: GnnConfig, kind: str, node_feat_dim: int) -> GnnRanker:
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

    def section_recipe(self, s: GnnConfig, kind: str) -> Recipe:
        """The `gnn` section's recipe on a collection of `kind`: the loss resolved per kind, AdamW
        with a cosine schedule and a global gradient-norm clip."""
        return Recipe(
            loss=resolve_loss(s.loss, kind),
            margin=s.margin,
            configs_per_graph=ALL_CONFIGS if kind == "tile" and s.tile_all_configs else s.configs_per_graph,
            graphs_per_batch=s.graphs_per_batch,
            optimizer="adamw",
            lr=s.lr,
            weight_decay=s.weight_decay,
            schedule="cosine",
            # the key users set is gnn.grad_clip; checkpoints and the baseline's section say clip_norm
            clip_norm=s.grad_clip,
            clip_per_tensor=False,
            max_steps=s.max_steps,
            eval_every=s.eval_every,
            time_budget_min=s.time_budget_min,
            patience=s.patience,
            eval_max_configs=s.eval_max_configs,
            predict_chunk=s.predict_chunk,
            bf16=s.bf16,
            max_batch_nodes=s.max_batch_nodes,
            segment_nodes=s.segment_nodes,
            segments_per_step=s.segments_per_step,
            stale_dropout=s.stale_dropout,
            finetune_steps=s.finetune_steps,
            history_mb=s.history_mb,
            warmup_steps=s.warmup_steps,
            min_train_share=s.min_train_share,
            dim_features=s.dim_features,
        )

    def fit_train(self, model: RankerNet, train: Sequence[HasNodeFeatures]) -> None:
        """The input statistics of the train graphs only (saved in the state dict)."""
        fit_train_stats(model, train)

    def seeds(self, cfg: Config) -> int:
        """`gnn.seeds` models per collection, averaged."""
        return self.settings(cfg).seeds


SPEC = GnnFamily()
