"""A bounded sample of a LightGBM ranker's training rows, kept beside the model (`train_rows.npz`).

Calibration (`rank --measured`, `tpurank tune`) boosts a trained ranker further on the measured
configs of a user's program. Boosting on those few rows alone would bend every tree toward one
program; the training rows kept here are boosted on with them, so the calibrated model still
ranks the programs it was trained on. The sample is bounded (`MAX_ROWS` rows of float32 features)
so that it ships with the model in an out folder and in the models dataset: at most
`MAX_ROWS * features * 4` bytes before compression.

Each kept graph stays a query of its own: a uniform draw of up to `query_rows` of its configs
(a uniform draw of a graph's configs is still a ranking of them), and when there are more graphs
than `MAX_ROWS / MIN_QUERY_ROWS`, a uniform draw of the graphs.
"""

from __future__ import annotations

import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from tpurank.core.atomic import atomic_path
from tpurank.core.errors import DataError

TRAIN_ROWS_FILE = "train_rows.npz"
MAX_ROWS = 20_000  # rows kept per collection: 10.6 MB raw at layout's 133 features, 17.9 MB at tile's 224
MIN_QUERY_ROWS = 64  # fewest rows kept of a graph that has them: a shorter query ranks too little
FORMAT = 1  # bump when the file's arrays change


@dataclass(frozen=True)
class TrainingRows:
    """Training rows grouped by query, as calibration boosts on them.

    Args:
        x: (rows, features) float32, in `features` order, query by query.
        runtime: (rows,) the label's runtime (the graph's mean over duplicates).
        sizes: (queries,) rows per query, summing to `rows`.
        features: the column names of `x` (the model's features).
    """

    x: np.ndarray
    runtime: np.ndarray
    sizes: np.ndarray
    features: list[str]

    @property
    def rows(self) -> int:
        return len(self.runtime)


def rows_to_keep(
    table: pd.DataFrame, features: list[str], seed: int, max_rows: int = MAX_ROWS
) -> TrainingRows:
    """The rows to keep of a collection's train feature table.

    Args:
        table: the train feature table (a row per graph and unique config, `graph` and `runtime`).
        features: the model's features, in its order.
        seed: seeds both draws (with each graph's ID, so the draw does not depend on table order).
        max_rows: the bound on rows kept.
    """
    graph = table["graph"].to_numpy()
    runtime = table["runtime"].to_numpy(np.float64)
    ids, codes, counts = np.unique(graph, return_inverse=True, return_counts=True)
    groups = np.split(np.argsort(codes, kind="stable"), np.cumsum(counts)[:-1]) if len(ids) else []
    # a graph whose runtimes are all equal carries no ranking (training leaves it out too)
    keep = [i for i, g in enumerate(groups) if len(g) >= 2 and np.ptp(runtime[g]) > 0]
    most_graphs = max(1, max_rows // MIN_QUERY_ROWS)
    if len(keep) > most_graphs:
        rng = np.random.default_rng([seed, len(keep)])
        keep = sorted(rng.choice(keep, size=most_graphs, replace=False).tolist())
    quota = max(MIN_QUERY_ROWS, max_rows // max(1, len(keep)))
    chosen = []
    for i in keep:
        rows = groups[i]
        if len(rows) > quota:
            rng = np.random.default_rng([seed, zlib.crc32(str(ids[i]).encode())])
            rows = np.sort(rng.choice(rows, size=quota, replace=False))
        chosen.append(rows)
    order = np.concatenate(chosen) if chosen else np.zeros(0, dtype=np.int64)
    x = (
        table[features].to_numpy(np.float32)[order]
        if len(order)
        else np.zeros((0, len(features)), np.float32)
    )
    sizes = np.array([len(r) for r in chosen], dtype=np.int64)
    return TrainingRows(x, runtime[order], sizes, list(features))


def save(path: Path, rows: TrainingRows) -> None:
    """`train_rows.npz`, compressed and written atomically."""
    with atomic_path(path, suffix=".npz") as tmp:
        np.savez_compressed(
            tmp,
            format=np.array(FORMAT),
            x=rows.x,
            runtime=rows.runtime,
            sizes=rows.sizes,
            features=np.array(rows.features, dtype=str),
        )


def load(path: Path) -> TrainingRows | None:
    """The kept training rows (None: the file is absent, as for models trained before it was kept).

    Raises:
        DataError: a file that is there but damaged or of another format.
    """
    if not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as z:
            if int(z["format"]) != FORMAT:
                raise DataError(path, f"training rows of format {int(z['format'])}, expected {FORMAT}")
            rows = TrainingRows(z["x"], z["runtime"], z["sizes"], [str(f) for f in z["features"]])
    except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as e:
        raise DataError(path, f"unreadable training rows ({e}); retrain lgbm") from None
    if rows.x.shape != (int(rows.sizes.sum()), len(rows.features)) or len(rows.runtime) != len(rows.x):
        raise DataError(path, "training rows whose arrays disagree in shape; retrain lgbm")
    return rows
