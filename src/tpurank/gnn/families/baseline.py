"""The official TpuGraphs baseline family (`--model baseline`): `EarlyJoinSAGE` on the `baseline`
config section, trained as the official trainer does for both kinds: TF-Ranking's pairwise hinge,
Adam without weight decay at a constant rate, each gradient tensor clipped on its own."""

from __future__ import annotations

from typing import ClassVar

from tpurank.core.config import BaselineConfig, Config
from tpurank.gnn.nets.early_join import EarlyJoinArgs, EarlyJoinSAGE
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.recipe import ModelSpec, Recipe


class BaselineFamily(ModelSpec[BaselineConfig]):
    """`EarlyJoinSAGE` on the `baseline` section: one model per collection, as the official trainer."""

    name: ClassVar[str] = "baseline"
    section: ClassVar[str] = "baseline"
    network_class: ClassVar[type[RankerNet]] = EarlyJoinSAGE

    def settings(self, cfg: Config) -> BaselineConfig:
        """The `baseline` section of `cfg`."""
        return cfg.baseline

    def network(self, s: BaselineConfig, kind: str, node_feat_dim: int) -> EarlyJoinSAGE:
        """A new `EarlyJoinSAGE` for a collection of `kind`, every argument from the `baseline` section."""
        return EarlyJoinSAGE(
            EarlyJoinArgs(
                kind=kind,
                node_feat_dim=node_feat_dim,
                hidden=s.hidden,
                layers=s.layers,
                opcode_dim=s.opcode_dim,
            )
        )

    def section_recipe(self, s: BaselineConfig, kind: str) -> Recipe:
        """The official trainer's recipe for both kinds; none of tpurank's additions (no warm-up,
        no Graph Segment Training, no dimension features)."""
        return Recipe(
            loss="hinge",
            margin=s.margin,
            configs_per_graph=s.configs_per_graph,
            graphs_per_batch=s.graphs_per_batch,
            optimizer="adam",
            lr=s.lr,
            weight_decay=0.0,
            schedule="constant",
            clip_norm=s.clip_norm,
            clip_per_tensor=True,
            max_steps=s.max_steps,
            eval_every=s.eval_every,
            time_budget_min=s.time_budget_min,
            patience=s.patience,
            eval_max_configs=s.eval_max_configs,
            predict_chunk=s.predict_chunk,
            bf16=s.bf16,
            max_batch_nodes=s.max_batch_nodes,
            segment_nodes=0,
            segments_per_step=1,
            stale_dropout=0.0,
            finetune_steps=0,
            history_mb=1024,  # no segments, so no table: the value its checkpoints have always held
            warmup_steps=0,
            min_train_share=s.min_train_share,
            dim_features=False,
        )


SPEC = BaselineFamily()
