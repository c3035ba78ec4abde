"""The steps of a run, by typed name: what `all`, its budget and its plan call each step.

A step's name follows from its options (`StepName.of`): the command, and the model and split where
the command takes them (`train gnn`, `predict lgbm test`). The budget asks the name what it is
(`neural_training`) and the plan keys its rates on names, so adding a model adds no string to match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tpurank.core.names import NEURAL_MODELS, Model, StepCommand


@dataclass(frozen=True)
class StepName:
    """A step's name: its command, and its model and split where the command takes them.

    Args:
        command: the command it runs (`prepare`, `train`, `predict` ...).
        model: the model it trains or predicts with (None for the others).
        split: the split it predicts ("" for the others).
    """

    command: StepCommand
    model: Model | None = None
    split: str = ""

    @classmethod
    def of(cls, options: Any) -> StepName:
        """The name of the step that runs a command's typed `options`."""
        model = getattr(options, "model", "")
        return cls(
            StepCommand(options.COMMAND), Model(model) if model else None, getattr(options, "split", "")
        )

    def __str__(self) -> str:
        return " ".join(p for p in (self.command, self.model, self.split) if p)

    def __format__(self, spec: str) -> str:
        return format(str(self), spec)

    @property
    def neural_training(self) -> bool:
        """It trains a neural model: the step whose time the budget's plan sets."""
        return self.command == StepCommand.TRAIN and self.model in NEURAL_MODELS

    def reads_neural(self) -> bool:
        """It reads what neural training writes (a new plan retrains, so it runs again too)."""
        return self.model in (*NEURAL_MODELS, Model.ENSEMBLE) or self.command == StepCommand.VALIDATE


@dataclass
class Step:
    """One step of `all`: a command's typed options (its `Options`, which name it), and what
    the budget knows of its time."""

    options: Any
    seconds: float = 0.0
    skipped: bool = False
    estimate: float = 0.0  # seconds the plan expects still (the time-left estimate; 0 once run)
    planned: float = 0.0  # seconds the first plan expected
    overhead: float = 0.0  # neural training: seconds it spends outside its shares (budget.expect_steps)

    @property
    def name(self) -> StepName:
        return StepName.of(self.options)
