"""The official TpuGraphs baseline family (`--model baseline`): `EarlyJoinSAGE` on the `baseline`
config section, trained as the official trainer does for both kinds: TF-Ranking's pairwise hinge,
Adam without weight decay at a constant rate, each gradient tensor clipped on its own."""

from __future__ import annotations

from tpurank.core.config import BaselineConfig
from tpurank.gnn.nets.early_join import EarlyJoinSAGE
from tpurank.gnn.recipe import ModelSpec, Recipe


def _recipe(s: BaselineConfig, kind: str) -> Recipe:
    return Recipe.from_section(
        s, loss="hinge", optimizer="adam", weight_decay=0.0, schedule="constant", clip_per_tensor=True
    )


SPEC = ModelSpec(name="baseline", network=EarlyJoinSAGE, section="baseline", recipe_of=_recipe)
