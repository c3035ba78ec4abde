"""The official TpuGraphs baseline family (`--model baseline`): `EarlyJoinSAGE` on the `baseline`
config section, trained as the official trainer does for both kinds: TF-Ranking's pairwise hinge,
Adam without weight decay at a constant rate, each gradient tensor clipped on its own."""

from __future__ import annotations

from tpurank.core.config import BaselineConfig
from tpurank.gnn.nets.early_join import EarlyJoinArgs, EarlyJoinSAGE
from tpurank.gnn.recipe import ModelSpec, Recipe


def network(s: BaselineConfig, kind: str, node_feat_dim: int) -> EarlyJoinSAGE:
    """A new `EarlyJoinSAGE` for a collection of `kind`, every argument from the `baseline` section."""
    return EarlyJoinSAGE(
        EarlyJoinArgs(
            kind=kind, node_feat_dim=node_feat_dim, hidden=s.hidden, layers=s.layers, op_dim=s.op_dim
        )
    )


def _recipe(s: BaselineConfig, kind: str) -> Recipe:
    return Recipe.from_section(
        s, loss="hinge", optimizer="adam", weight_decay=0.0, schedule="constant", clip_per_tensor=True
    )


SPEC = ModelSpec(
    name="baseline", network=EarlyJoinSAGE, section="baseline", network_of=network, recipe_of=_recipe
)
