"""What a training run tells: `metrics.csv` (one row per validation), the one line it ends with,
and, when `$TPURANK_TENSORBOARD` names a folder, the same scalars as TensorBoard events."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from tpurank.core.atomic import write_text
from tpurank.core.errors import TpurankError

METRICS = "metrics.csv"  # one row per validation, beside model.pt
METRIC_COLUMNS = ("step", "elapsed", "lr", "train_loss", "valid_score")
# an environment variable, not a config key: logging must not change a model's identity (a retrain)
TENSORBOARD_ENV = "TPURANK_TENSORBOARD"


def write_metrics(path: Path, history: list[dict[str, Any]]) -> None:
    """metrics.csv: one row per validation (step, seconds spent, lr, train loss, valid score),
    rewritten whole (atomically) at each, so a resumed run's file holds its whole history."""
    rows = [",".join(METRIC_COLUMNS)]
    for h in history:
        if "train_loss" in h:  # GST's fine-tuning record has no training step of its own
            rows.append(
                ",".join(
                    str(h["step"]) if c == "step" else repr(float(h.get(c, "nan"))) for c in METRIC_COLUMNS
                )
            )
    write_text(path, "\n".join(rows) + "\n")


def end_line(name: str, steps: int, seconds: float, stopped: str, history: list[dict[str, Any]]) -> str:
    """The one line each trained model ends with: steps, minutes, why it stopped, best step and score.

    Args:
        name: `<model> <collection>`.
        steps, seconds: what the run spent (resumes included).
        stopped: why the loop ended ("" = max_steps).
        history: one record per validation.
    """
    scored = [h for h in history if "valid_score" in h]
    best = max(scored, key=lambda h: h["valid_score"]) if scored else None
    at = f"best {best['valid_score']:.4f} at step {best['step']}" if best else "no validation"
    return f"[{name}] {steps} steps in {seconds / 60:.1f} min, stopped: {stopped or 'max_steps'}; {at}"


def tensorboard(model: str, collection: str, member: str) -> Any | None:
    """A TensorBoard `SummaryWriter` under `$TPURANK_TENSORBOARD/<model>/<collection>/<member>`, or
    None when the variable is unset (then nothing is imported: it costs nothing).

    Args:
        model, collection: name the run (`:` in the collection becomes `-`, as in the model folder).
        member: `seed-k` of a seed ensemble, "seed-0" for the first (or only) model.
    """
    root = os.environ.get(TENSORBOARD_ENV, "")
    if not root:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise TpurankError(
            f"{TENSORBOARD_ENV}={root}: TensorBoard logging needs the tensorboard package "
            "(pip install tensorboard==2.21.0, pinned in requirements.txt)"
        ) from e
    return SummaryWriter(log_dir=str(Path(root) / model / collection.replace(":", "-") / member))


def log_scalars(writer: Any | None, record: dict[str, Any]) -> None:
    """One validation's `metrics.csv` row as TensorBoard scalars (train/loss, valid/score, lr)."""
    if writer is None:
        return
    step = int(record["step"])
    for tag, key in (("train/loss", "train_loss"), ("valid/score", "valid_score"), ("lr", "lr")):
        if key in record:
            writer.add_scalar(tag, float(record[key]), step)
    writer.flush()  # a killed run keeps what it logged
