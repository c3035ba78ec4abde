"""Which trained model ranks each collection: the ensemble where its weights are fitted, else the
trained member with the best valid score, said in one line (`TrainedModels.choose`).

Any subset of the members (lgbm, gnn, baseline) ranks, with or without a fitted ensemble. `rank` and
`tune` choose with it (tpurank.rank.models), `build-models-dataset` packs what it finds trained and
`infer` predicts each collection with its choice, so all of them agree on what a subset ranks with.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import Paths
from tpurank.kaggle.trained import SIDECARS
from tpurank.models.weights import WEIGHTS_FILE, read_weights

ENSEMBLE = "ensemble"
MEMBERS = ("lgbm", "gnn", "baseline")  # the models that rank alone; the ensemble combines them
# a member's record (kaggle.trained.SIDECARS), written last when its training finished, and where it
# keeps its valid score
FINISHED = {"lgbm": (SIDECARS[0], "valid_score"), "gnn": (SIDECARS[1], "best_valid_score")}
FINISHED["baseline"] = FINISHED["gnn"]
# a GNN of several seeds: their average's score, in gnn.seeds.SUMMARY (spelled here: choosing must not
# import torch, which gnn.seeds does; tests/kaggle/test_models_dataset.py checks the two agree)
SEEDS_SUMMARY = ("seeds.json", "averaged_valid_score")


@dataclass(frozen=True)
class Trained:
    """What is trained for one collection.

    Args:
        members: the members whose training finished, in `MEMBERS` order.
        fitted: the fitted ensemble's members (None: no ensemble fitted).
        scores: member -> its valid score (the competition metric; None: not recorded).
    """

    members: tuple[str, ...]
    fitted: tuple[str, ...] | None
    scores: dict[str, float | None]

    def best_member(self) -> str:
        """The member with the best valid score (one without a score ranks last; ties: `MEMBERS` order)."""
        return max(self.members, key=lambda m: (self.scores[m] is not None, self.scores[m] or 0.0))

    def scores_text(self) -> str:
        """`lgbm 0.4123, gnn 0.3801`: each member's valid score."""
        return ", ".join(f"{m} {_num(self.scores[m])}" for m in self.members)


@dataclass
class TrainedModels:
    """Models ready to predict in a work tree.

    Args:
        paths: the work tree (its `data` is filled with the user's graphs, `out` holds the models).
        cfg: the config the models were trained with.
        trained: collection -> what is trained for it (collections with no model left out).
        source: where the models came from (named in messages).
    """

    paths: Paths
    cfg: Config
    trained: dict[str, Trained]
    source: Path

    def choose(self, collection: str, model: str | None) -> tuple[str, str | None]:
        """The model that ranks `collection`, and the one line saying why when it was not asked for
        by name and is not the ensemble.

        Args:
            collection: the collection.
            model: "ensemble" or a member by name; None: the ensemble where fitted, else the trained
                member with the best valid score.

        Raises:
            TpurankError: no models for the collection, or the named one is not trained for it.
        """
        t = self._trained(collection)
        if model is None:
            if t.fitted is not None:
                return ENSEMBLE, None
            best = t.best_member()
            why = (
                "the only trained model"
                if len(t.members) == 1
                else f"the best valid score ({t.scores_text()})"
            )
            return best, f"{collection}: no fitted ensemble: ranked by {best}, {why}"
        missing = t.fitted is None if model == ENSEMBLE else model not in t.members
        if missing:
            there = ", ".join([*t.members, *([ENSEMBLE] if t.fitted is not None else [])])
            what = "fitted ensemble" if model == ENSEMBLE else f"{model} model"
            raise TpurankError(f"{self.source}: no {what} for {collection} (there: {there})")
        return model, None

    def models_for(self, collection: str, model: str) -> list[str]:
        """The models predicting `collection` for `model` (a `choose` result): the ensemble's
        members and itself, or one."""
        if model == ENSEMBLE:
            return [*(self._trained(collection).fitted or ()), ENSEMBLE]
        return [model]

    def _trained(self, collection: str) -> Trained:
        if collection not in self.trained:
            have = ", ".join(sorted(self.trained)) or "none"
            raise TpurankError(f"{self.source}: no models trained for {collection} (trained: {have})")
        return self.trained[collection]


def trained_models(paths: Paths, source: Path) -> dict[str, Trained]:
    """Collection -> what is trained for it, for every collection with at least one trained member.

    Args:
        paths: the work tree holding the models.
        source: where they came from (named in the error).

    Raises:
        TpurankError: no model is trained for any collection.
    """
    out = {}
    for c in COLLECTIONS:
        members = tuple(m for m in MEMBERS if (paths.model_dir(m, c) / FINISHED[m][0]).is_file())
        if not members:
            continue
        wfile = paths.model_dir(ENSEMBLE, c) / WEIGHTS_FILE
        fitted = tuple(read_weights(wfile)["members"]) if wfile.is_file() else None
        if fitted is not None and not set(fitted) <= set(members):
            fitted = None  # weights over a member no longer there: the members rank alone
        out[c] = Trained(members, fitted, {m: valid_score(paths, m, c) for m in members})
    if not out:
        raise TpurankError(f"{source}: no trained models (train them: {command('all')})")
    return out


def valid_score(paths: Paths, model: str, collection: str) -> float | None:
    """A member's valid score as its training recorded it (the average of its seeds where it has
    several); None where not recorded (no valid split) or unreadable."""
    folder = paths.model_dir(model, collection)
    for name, key in (SEEDS_SUMMARY, FINISHED[model]):
        try:
            value = json.loads((folder / name).read_bytes()).get(key)
        except (OSError, ValueError, AttributeError):
            continue
        if isinstance(value, int | float) and math.isfinite(value):
            return float(value)
    return None


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"
