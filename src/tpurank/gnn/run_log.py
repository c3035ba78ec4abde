"""What a training run tells: `metrics.csv` (one row per validation) and the one line it ends with."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tpurank.core.atomic import write_text

METRICS = "metrics.csv"  # one row per validation, beside model.pt
METRIC_COLUMNS = ("step", "elapsed", "lr", "train_loss", "valid_score")


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
