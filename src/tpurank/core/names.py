"""The names of the stages `all` runs and of the models, typed: a step, a plan or a benchmark
compares these members, never a string typed anew. Each member is a `str` equal to its name, so
files, options and messages read the same; the tuples of names that other modules hand to users
(argparse choices, messages) hold the plain strings."""

from __future__ import annotations

from enum import StrEnum


class Stage(StrEnum):
    """A stage that `all` runs as a step (its command's name)."""

    PREPARE = "prepare"
    FEATURES = "features"
    TRAIN = "train"
    PREDICT = "predict"
    ENSEMBLE = "ensemble"
    VALIDATE = "validate"
    CHECK_SUBMISSION = "check-submission"


class Model(StrEnum):
    """A model that `train` and `predict` take (`--model`)."""

    RANDOM = "random"
    HEURISTIC = "heuristic"
    LGBM = "lgbm"
    GNN = "gnn"
    BASELINE = "baseline"
    ENSEMBLE = "ensemble"


# nothing to learn: no folder, no config section
UNTRAINED = (Model.RANDOM.value, Model.HEURISTIC.value)
# an ensemble's members, in training order
LEARNED_MODELS = (Model.LGBM.value, Model.GNN.value, Model.BASELINE.value)
# the models whose training time the budget plan splits
NEURAL_MODELS = (Model.GNN.value, Model.BASELINE.value)
