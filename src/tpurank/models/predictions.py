"""Per-model, per-split predictions: `predictions/<model>/<split>.npz`, graph ID -> cost per config.

Stored as three flat arrays (ids, offsets, costs as float64) rather than one member per graph, so
IDs with ':' never become zip member names and thousands of graphs load in one read.
"""

from __future__ import annotations

import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from tpurank.core.atomic import atomic_path
from tpurank.core.errors import DataError, command


def save_predictions(path: str | Path, preds: Mapping[str, np.ndarray]) -> None:
    """Write graph ID -> cost per original config index atomically (IDs sorted).

    Args:
        path: the target, usually `paths.prediction_file(model, split)`.
        preds: 1-d cost arrays (lower = predicted faster).
    """
    ids = sorted(preds)
    arrays = [np.asarray(preds[i], dtype=np.float64).reshape(-1) for i in ids]
    offsets = np.zeros(len(ids) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([len(a) for a in arrays])
    costs = np.concatenate(arrays) if arrays else np.zeros(0, dtype=np.float64)
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(tmp, ids=np.asarray(ids, dtype=str), offsets=offsets, costs=costs)


def load_predictions(path: str | Path) -> dict[str, np.ndarray]:
    """Read a predictions file back into graph ID -> cost array.

    Raises:
        DataError: when the file is missing, unreadable or inconsistent.
    """
    path = Path(path)
    try:
        with np.load(path, allow_pickle=False) as z:
            ids, offsets, costs = z["ids"], z["offsets"], z["costs"]
    except FileNotFoundError:
        raise DataError(path, f"no such predictions file (run {command('predict')})") from None
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(path, f"unreadable predictions file ({e})") from None
    if len(offsets) != len(ids) + 1 or offsets[-1] != len(costs) or (np.diff(offsets) < 0).any():
        raise DataError(path, "ids, offsets and costs do not agree")
    return {str(i): costs[offsets[k] : offsets[k + 1]] for k, i in enumerate(ids)}


def unscored_subset(path: str | Path, subsets: Mapping[str, Mapping[str, np.ndarray]]) -> str | None:
    """The first graph whose official subset holds configs these valid predictions left unscored
    (NaN: a neural ranker scores only the configs validation scores, `data.subsets.scored_configs`,
    and the subset `prepare` cached), as one line; None when every subset was scored or there is no
    prediction file."""
    path = Path(path)
    if not path.exists():
        return None
    for graph_id, cost in load_predictions(path).items():
        collection, _, stem = graph_id.rpartition(":")
        rows = subsets.get(collection, {}).get(stem)
        if rows is not None and len(rows) and rows.max() < len(cost) and np.isnan(cost[rows]).any():
            return (
                f"{path}: {graph_id}: configs of its official subset were not scored; give `prepare` the "
                "subsets (--eval-indices, or DATA/eval_indices) and predict again"
            )
    return None


def unpredicted_configs(path: str | Path) -> str | None:
    """The first graph with configs these valid predictions left unscored (NaN: a neural ranker
    scores only the configs validation scores), as one line: its valid CSV lists them after the
    others in index order, an order `--all-configs` must not score as the model's. None when every
    config was scored or there is no prediction file."""
    path = Path(path)
    if not path.exists():
        return None
    for graph_id, cost in load_predictions(path).items():
        if (missing := int(np.isnan(cost).sum())) > 0:
            return (
                f"{path}: {graph_id}: {missing} of its {len(cost)} configs were not predicted (a neural "
                "ranker predicts on the valid split only the configs validation scores); --all-configs "
                "cannot score its order of them"
            )
    return None
