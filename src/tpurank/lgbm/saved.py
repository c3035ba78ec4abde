"""The saved LightGBM ranker of one collection, in `models/lgbm/<collection>/`.

model.txt (the booster at its best iteration), features.json, config.json, importance.csv,
provenance.json (written last: its digest of model.txt is checked before LightGBM reads the file)
and metrics.csv (the validation metric after each boosting round: the report's training curves).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import lightgbm as lgb
import pandas as pd

from tpurank.core.atomic import write_json, write_model, write_text
from tpurank.core.config import Config, to_dict
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.identity import file_digest
from tpurank.core.paths import Paths
from tpurank.core.provenance import write_sidecar

MODEL_NAME = "lgbm"
MODEL_FILE, FEATURES_FILE, CONFIG_FILE = "model.txt", "features.json", "config.json"
IMPORTANCE_FILE, PROVENANCE_FILE = "importance.csv", "provenance.json"
METRICS_FILE = "metrics.csv"  # round,valid_score: the validation metric after each boosting round


def save(paths: Paths, cfg: Config, collection: str, booster: lgb.Booster, info: dict) -> None:
    """Write the model, feature list, config, importance table and provenance sidecar."""
    out = paths.model_dir(MODEL_NAME, collection)
    best = info["best_iteration"]
    save = functools.partial(booster.save_model, num_iteration=best)  # "Cannot write binary data": disk full
    write_model(out / MODEL_FILE, save, suffix=".txt", errors=(lgb.basic.LightGBMError,))
    features = booster.feature_name()
    write_json(out / FEATURES_FILE, features)
    write_json(out / CONFIG_FILE, to_dict(cfg))
    imp = pd.DataFrame(
        {
            "feature": features,
            "gain": booster.feature_importance("gain", iteration=best),
            "split": booster.feature_importance("split", iteration=best),
        }
    ).sort_values(["gain", "split"], ascending=False)
    write_text(out / IMPORTANCE_FILE, imp.to_csv(index=False))
    # written last: its digest of model.txt is what `load` checks before LightGBM reads the file
    write_sidecar(
        out / PROVENANCE_FILE,
        cfg,
        paths.data,
        model=MODEL_NAME,
        model_digest=file_digest(out / MODEL_FILE),
        **info,
    )


def write_curve(path: Path, curve: list[float]) -> None:
    """metrics.csv (atomically): `round,valid_score`, one row per boosting round (1-based); only the
    header without a valid split, so a retrain never leaves an older run's curve behind."""
    rows = ["round,valid_score", *(f"{i},{float(v)!r}" for i, v in enumerate(curve, start=1))]
    write_text(path, "\n".join(rows) + "\n")


def check_model_file(model_file: Path, sidecar: Path, collection: str) -> None:
    """The model file is the one training wrote, for this collection: checked before LightGBM reads
    it (a truncated model.txt crashes the native library instead of raising).

    Raises:
        TpurankError: naming the file and the mismatch.
    """
    retrain = f"retrain it: {command(f'train --model lgbm --collections {collection}')}"
    try:
        rec = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        raise TpurankError(
            f"{sidecar}: missing or not JSON, so {model_file} cannot be checked; {retrain}"
        ) from None
    if not isinstance(rec, dict) or rec.get("collection") != collection:
        found = rec.get("collection") if isinstance(rec, dict) else None
        raise TpurankError(f"{model_file}: a model of {found!r}, not {collection!r}; {retrain}")
    if rec.get("model_digest") != file_digest(model_file):
        raise TpurankError(f"{model_file}: not the file training wrote (damaged or replaced); {retrain}")


def load(paths: Paths, collection: str) -> tuple[lgb.Booster, list[str]]:
    """The saved booster and its feature list.

    Raises:
        TpurankError: when the model has not been trained; DataError when a file is damaged.
    """
    out = paths.model_dir(MODEL_NAME, collection)
    model_file = out / MODEL_FILE
    if not model_file.exists():
        raise TpurankError(f"{model_file}: no lgbm model; run {command('train --model lgbm')} first")
    check_model_file(model_file, out / PROVENANCE_FILE, collection)
    try:
        booster = lgb.Booster(model_file=str(model_file))
        features = json.loads((out / FEATURES_FILE).read_text())
    except (lgb.basic.LightGBMError, OSError, ValueError) as e:
        raise DataError(model_file, f"unreadable lgbm model ({e})") from None
    return booster, features
