"""What `infer` predicts with, from whatever subset a models dataset holds, and the submission it writes.

Each collection is ranked by the model `rank` would choose (kaggle.choice.TrainedModels.choose): the
ensemble where its weights are fitted, else the trained member with the best valid score. When the
ensemble ranks every collection the submission is its test CSV, as `all` hands in; otherwise the
chosen model's test predictions of each collection are written as one submission, with the same
check as every other (submission.format.write_submission), and its sidecar names the model of each
collection.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.features import cli as features
from tpurank.kaggle.choice import ENSEMBLE, TrainedModels
from tpurank.models.predictions import load_predictions
from tpurank.predict import cli as predict
from tpurank.prepare import cli as prepare
from tpurank.submission.format import expected_for_split, write_submission
from tpurank.submission.publish import publish_submission


@dataclass(frozen=True)
class Choice:
    """The model of each collection and what it needs.

    Args:
        chosen: collection -> the model that ranks it ("ensemble" or a member).
        predicted: model -> the collections it predicts (an ensemble's members predict its collections).
        why: the lines saying why a collection is not ranked by the ensemble.
    """

    chosen: dict[str, str]
    predicted: dict[str, list[str]]
    why: list[str]

    def line(self) -> str:
        """Which model makes the submission, in one line: `the ensemble of lgbm, gnn`, or per collection."""
        if set(self.chosen.values()) == {ENSEMBLE}:
            members = [m for m in self.predicted if m != ENSEMBLE]
            return f"the submission is made by the ensemble of {', '.join(members)}"
        groups: dict[str, list[str]] = {}
        for c, m in self.chosen.items():
            groups.setdefault(m, []).append(c)
        made = "; ".join(f"{m} for {', '.join(cs)}" for m, cs in groups.items())
        return f"the submission is made by {made} ({'; '.join(self.why)})"

    def steps(self, partial: bool) -> list[Any]:
        """The stages to run: prepare the test graphs with the models' own rule, LightGBM's tables when
        it predicts, then each model's test predictions (the ensemble's last)."""
        tables = [features.Options(splits=["test"])] if "lgbm" in self.predicted else []
        out: list[Any] = [prepare.Options(splits=["test"], keep_rule=True), *tables]
        for m, cs in self.predicted.items():
            whole = cs == list(COLLECTIONS)
            # a model predicting some collections only writes its own test CSV of those (partial):
            # the submission is assembled from the predictions (`write`)
            out.append(predict.Options(model=m, split="test", collections=cs, partial=partial or not whole))
        return out

    def write(self, paths: Paths, cfg: Config, partial: bool) -> Path:
        """submissions/submission.csv (and its sidecar) from the chosen model of each collection."""
        if set(self.chosen.values()) == {ENSEMBLE}:
            return publish_submission(paths)
        expected = expected_for_split(paths, "test", partial=partial)
        costs: dict = {}
        for m in set(self.chosen.values()):
            preds = load_predictions(paths.prediction_file(m, "test"))
            costs.update({e.id: preds[e.id] for e in expected if self.chosen[e.collection] == m})
        write_submission(
            paths.submission, costs, expected, cfg, paths.data, models=self.chosen, partial=partial
        )
        print(f"wrote {paths.submission}: {len(expected)} rows", file=sys.stderr)
        return paths.submission


def choose_models(models: TrainedModels) -> Choice:
    """The model of every collection (`TrainedModels.choose`, with no model named) and the
    predictions each needs."""
    chosen: dict[str, str] = {}
    why: list[str] = []
    predicted: dict[str, list[str]] = {}
    for c in COLLECTIONS:
        model, reason = models.choose(c, None)
        chosen[c] = model
        if reason:
            why.append(reason)
        for m in models.models_for(c, model):
            predicted.setdefault(m, []).append(c)
    ensemble = predicted.pop(ENSEMBLE, None)  # after its members: it reads their predictions
    if ensemble is not None:
        predicted[ENSEMBLE] = ensemble
    return Choice(chosen, predicted, why)
