"""The steps of `all` by their typed names (tpurank.run.steps.StepName), as bench_all and
bench_scale record them: a figure looks a step up by these, never by a name typed anew."""

from __future__ import annotations

from tpurank.core.names import Model, StepCommand
from tpurank.run.steps import StepName


def step_name(command: StepCommand, model: Model | None = None, split: str = "") -> str:
    """A step of `all` as a results file names it: its `StepName` as text (`train lgbm`)."""
    return str(StepName(command, model, split))


PREPARE, FEATURES = step_name(StepCommand.PREPARE), step_name(StepCommand.FEATURES)
TRAIN_LGBM, TRAIN_GNN = step_name(StepCommand.TRAIN, Model.LGBM), step_name(StepCommand.TRAIN, Model.GNN)
VALID_OTHERS = [
    step_name(StepCommand.PREDICT, m, "valid") for m in (Model.RANDOM, Model.HEURISTIC, Model.LGBM)
]
PREDICT_GNN_VALID = step_name(StepCommand.PREDICT, Model.GNN, "valid")
ENSEMBLE_AND_REPORT = [
    step_name(StepCommand.TRAIN, Model.ENSEMBLE),
    step_name(StepCommand.PREDICT, Model.ENSEMBLE, "valid"),
    step_name(StepCommand.VALIDATE),
]
TESTS = [step_name(StepCommand.PREDICT, m, "test") for m in (Model.LGBM, Model.GNN, Model.ENSEMBLE)]
