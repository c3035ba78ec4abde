"""What a training run tells: `metrics.csv` (the training curve), the few lines it prints, the one
line it ends with, and, when `$TPURANK_TENSORBOARD` names a folder, the same rows as TensorBoard events."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from tpurank.core.atomic import write_text
from tpurank.core.env import TENSORBOARD
from tpurank.core.errors import TpurankError

METRICS = "metrics.csv"  # the training curve, beside model.pt
METRIC_COLUMNS = ("step", "elapsed", "lr", "train_loss", "valid_score")
# rows of training loss per run: enough for a smooth curve, few enough to rewrite the file at each validation
LOSS_POINTS = 100
# progress lines per run (one per tenth of the budget, plus the last): the progress bar shows every step
LOG_LINES = 10
# an environment variable, not a config key: logging must not change a model's identity (a retrain)
TENSORBOARD_ENV = TENSORBOARD.name


def loss_interval(max_steps: int) -> int:
    """Steps between two training-loss rows of metrics.csv: about LOSS_POINTS rows over the budget,
    so a run validated a few times still has a training curve."""
    return max(1, math.ceil(max_steps / LOSS_POINTS))


def curve_row(step: int, elapsed: float, lr: float, losses: list[float], score: float | None = None) -> dict:
    """One metrics.csv row: the mean training loss of the steps since the previous row, and the
    validation score when this step was validated (None: not validated)."""
    mean = sum(losses) / len(losses) if losses else math.nan
    row = {"step": step, "elapsed": round(elapsed, 3), "lr": lr, "train_loss": mean}
    if score is not None:
        row["valid_score"] = score
    return row


def write_metrics(path: Path, rows: list[dict[str, Any]]) -> None:
    """metrics.csv: one row every `loss_interval` steps and one at each validation (step, seconds
    spent, lr, mean train loss since the previous row, valid score or empty), rewritten whole
    (atomically) at each validation, so a resumed run's file holds its whole history."""
    lines = [",".join(METRIC_COLUMNS)]
    for h in rows:
        if "train_loss" not in h:  # GST's fine-tuning record has no training step of its own
            continue
        cells = [str(int(h["step"]))]
        cells += ["" if h.get(c) is None else repr(float(h[c])) for c in METRIC_COLUMNS[1:]]
        lines.append(",".join(cells))
    write_text(path, "\n".join(lines) + "\n")


def log_mark(share: float) -> int:
    """Which tenth of the budget `share` (0..1) falls in: a progress line is printed when it grows."""
    return int(min(max(share, 0.0), 1.0) * LOG_LINES)


def progress_line(name: str, max_steps: int, history: list[dict[str, Any]]) -> str:
    """A progress line on the latest validation: step, training loss, score, the best so far and its step.

    Args:
        name: `<model> <collection>`.
        max_steps: the step budget.
        history: one record per validation, the latest last.
    """
    h, best = history[-1], max(history, key=lambda x: x["valid_score"])
    return (
        f"[{name}] step {h['step']}/{max_steps}: loss {h['train_loss']:.4f} valid {h['valid_score']:.4f} "
        f"(best {best['valid_score']:.4f} at step {best['step']}) {h['configs_per_s']:.0f} configs/s"
    )


def end_line(
    name: str,
    steps: int,
    seconds: float,
    stopped: str,
    history: list[dict[str, Any]],
    plan: dict[str, Any] | None = None,
    before: dict[str, Any] | None = None,
) -> str:
    """The one line each trained model ends with: steps, minutes, why it stopped, best step and
    score, then its plan (`plan_of`): whether the time budget cut it short (then the model depends
    on the machine's timing), and how it differs from the plan of the model it replaces.

    Args:
        name: `<model> <collection>`.
        steps, seconds: what the run spent (resumes included).
        stopped: why the loop ended ("" = max_steps).
        history: one record per validation.
        plan: the training's plan (None: not told).
        before: the plan of the finished model this training replaces (None: none, or not known).
    """
    scored = [h for h in history if "valid_score" in h]
    best = max(scored, key=lambda h: h["valid_score"]) if scored else None
    at = f"best {best['valid_score']:.4f} at step {best['step']}" if best else "no validation"
    line = f"[{name}] {steps} steps in {seconds / 60:.1f} min, stopped: {stopped or 'max_steps'}; {at}"
    if plan is None:
        return line
    line += f"; plan: {plan_text(plan)}"
    if stopped == "time budget" and steps < plan["steps"]:
        line += ", cut short by its time budget (this machine ran slower than planned: a rerun may differ)"
    if before is not None and before != plan:
        line += f"; the plan changed (was {plan_text(before)})"
    return line


def plan_of(max_steps: int, warmup_steps: int, schedule: str, time_budget_min: float) -> dict[str, Any]:
    """What a training was planned to run, recorded with its model (`model.json`'s `plan`): the
    same plan, data, config and seed train the same model."""
    return {
        "steps": max_steps,
        "warmup_steps": warmup_steps,
        "schedule": schedule,
        "time_cap_min": time_budget_min,
    }


def plan_text(plan: dict[str, Any]) -> str:
    """A plan in a few words: `240 steps (warm-up 24, cosine), time cap 1.29 min`."""
    cap = f", time cap {plan['time_cap_min']:g} min" if plan.get("time_cap_min") else ""
    return f"{plan['steps']} steps (warm-up {plan['warmup_steps']}, {plan['schedule']}){cap}"


def previous_plan(sidecar: Path) -> dict[str, Any] | None:
    """The plan recorded in a finished model's `model.json` (None: no model, or one recorded before
    plans were, or a file that does not read)."""
    try:
        plan = json.loads(sidecar.read_text()).get("plan")
    except (OSError, ValueError, AttributeError):
        return None
    return plan if isinstance(plan, dict) and {"steps", "warmup_steps", "schedule"} <= plan.keys() else None


def tensorboard(model: str, collection: str, member: str) -> Any | None:
    """A TensorBoard `SummaryWriter` under `$TPURANK_TENSORBOARD/<model>/<collection>/<member>`, or
    None when the variable is unset (then nothing is imported: it costs nothing).

    Args:
        model, collection: name the run (`:` in the collection becomes `-`, as in the model folder).
        member: `seed-k` of a seed ensemble, "seed-0" for the first (or only) model.
    """
    folder = TENSORBOARD.read()  # checked: a folder, or None when unset
    if folder is None:
        return None
    root = TENSORBOARD.given()
    try:
        from torch.utils.tensorboard import SummaryWriter  # optional: only with $TPURANK_TENSORBOARD
    except ImportError as e:
        raise TpurankError(
            f"{TENSORBOARD_ENV}={root}: TensorBoard logging needs the tensorboard package "
            "(pip install tensorboard==2.21.0, pinned in requirements.txt)"
        ) from e
    return SummaryWriter(log_dir=str(folder / model / collection.replace(":", "-") / member))


def log_scalars(writer: Any | None, record: dict[str, Any]) -> None:
    """One `metrics.csv` row as TensorBoard scalars (train/loss, lr, and valid/score at a validation)."""
    if writer is None:
        return
    step = int(record["step"])
    for tag, key in (("train/loss", "train_loss"), ("valid/score", "valid_score"), ("lr", "lr")):
        if key in record:
            writer.add_scalar(tag, float(record[key]), step)
    writer.flush()  # a killed run keeps what it logged
