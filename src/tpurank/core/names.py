"""The names of the commands that run as steps and of the models, typed: a step, a plan or a
benchmark compares these members, never a string typed anew. Each member is a `str` equal to its name, so
files, options and messages read the same; the tuples of names that other modules hand to users
(argparse choices, messages) hold the plain strings."""

from __future__ import annotations

from enum import StrEnum


class StepCommand(StrEnum):
    """A command that runs as a step of another (`all`, `infer`, `ensemble`, `rank`): one with typed
    `Options` beside its code, which name it (`Options.COMMAND`). The pipeline's stages among them, and
    `ensemble` and `check-submission`, which are commands but not stages (docs/architecture.md)."""

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
