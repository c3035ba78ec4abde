"""The training curves of every trained model, read from the `metrics.csv` each one leaves.

Two kinds of file (both under `models/<model>/<collection-folder>/`, seed members in `seed-k/`):

- GNN and official baseline (tpurank.gnn.training.run_log): `step, elapsed, lr, train_loss, valid_score`, a
  training-loss row every few steps and a row at each validation (`valid_score` empty elsewhere).
- LightGBM (tpurank.lgbm.model): `round, valid_score`, the validation metric after each round.

Files written before these columns existed (no `train_loss` or no `round`) and unreadable files
are left out with one line on stderr: a report never fails on a curve.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pandas as pd

from tpurank.core.collections import COLLECTIONS

FILE = "metrics.csv"
FOLDERS = {c.replace(":", "-"): c for c in COLLECTIONS}  # model folder name -> collection

Curve = dict[str, list[float]]


def _floats(series: pd.Series) -> list[float]:
    return [float(v) for v in pd.to_numeric(series, errors="coerce")]


def read_curve(f: Path) -> Curve:
    """One metrics.csv as lists: GNN-style {"step", "train_loss", "valid_step", "valid_score"} or
    LightGBM {"round", "valid_score"}.

    Raises:
        ValueError: when the file is not one of the two kinds.
    """
    df = pd.read_csv(f)
    if "round" in df.columns:
        return {"round": _floats(df["round"]), "valid_score": _floats(df["valid_score"])}
    if not {"step", "train_loss", "valid_score"} <= set(df.columns):
        raise ValueError("neither step/train_loss/valid_score nor round/valid_score columns")
    step, score = _floats(df["step"]), _floats(df["valid_score"])
    validated = [i for i, v in enumerate(score) if not math.isnan(v)]
    return {
        "step": step,
        "train_loss": _floats(df["train_loss"]),
        "valid_step": [step[i] for i in validated],
        "valid_score": [score[i] for i in validated],
    }


def read_curves(models: Path) -> dict[str, dict[str, Curve]]:
    """collection -> curve name (`gnn`, `gnn seed-1`, `baseline`, `lgbm`) -> its curve, in
    COLLECTIONS order; staging folders of a retrain in progress (`.next-...`) are skipped."""
    found: dict[str, dict[str, Curve]] = {}
    files = sorted(models.glob(f"*/*/**/{FILE}")) if models.is_dir() else []
    for f in files:
        rel = f.relative_to(models).parts
        collection = FOLDERS.get(rel[1])
        if collection is None or any(p.startswith(".") for p in rel):
            continue  # a retrain in progress (its staging folder), or not a model folder
        try:
            curve = read_curve(f)
        except (OSError, ValueError, KeyError, pd.errors.ParserError, pd.errors.EmptyDataError) as e:
            print(f"validate: {f}: unreadable ({e}), left out of the training curves", file=sys.stderr)
            continue
        found.setdefault(collection, {})[" ".join([rel[0], *rel[2:-1]])] = curve
    return {c: found[c] for c in COLLECTIONS if c in found}
