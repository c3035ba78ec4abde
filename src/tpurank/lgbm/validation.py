"""Early stopping of the LightGBM rankers on the competition's own metric over the validation graphs.

LightGBM's own metrics (NDCG) do not rank configs the way the competition scores them, so a custom
eval (`ValidScorer`) scores every original config of each validation graph against its own
measurement: Kendall tau for layout, the tile score for tile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import lightgbm as lgb
import numpy as np
import pandas as pd

from tpurank.core.collections import kind_of
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.metrics import kendall_tau, mean_score, order_from_costs, tile_score
from tpurank.lgbm.queries import query_labels, split_queries


class ValidData(NamedTuple):
    """A collection's validation split as early stopping reads it.

    Args:
        table: the valid feature table.
        inverse: per graph stem, each original config's unique-config row (`features.io.read_per_graph`).
        runtime: per graph stem, each original config's measured runtime.
    """

    table: pd.DataFrame
    inverse: dict[str, np.ndarray]
    runtime: dict[str, np.ndarray]


@dataclass
class ValidScorer:
    """LightGBM `feval`: the competition metric over validation graphs (higher is better), scored
    as the validation report scores it: every original config against its own measurement.

    Args:
        collection: decides Kendall tau (layout) or tile score (tile).
        groups: per graph, the validation-matrix row of each ORIGINAL config (its unique config's row).
        runtimes: per graph, each original config's measured runtime.
    """

    collection: str
    groups: list[np.ndarray]
    runtimes: list[np.ndarray]

    @classmethod
    def from_table(
        cls, collection: str, df: pd.DataFrame, inverse: dict[str, np.ndarray], runtime: dict[str, np.ndarray]
    ) -> ValidScorer:
        """Args: df: the validation rows as fed to LightGBM; inverse, runtime: per graph stem
        (`tabular.io.read_per_graph`)."""
        graph, row = df["graph"].to_numpy(), df["row"].to_numpy(np.int64)
        _, codes, counts = np.unique(graph, return_inverse=True, return_counts=True)
        groups, runtimes = [], []
        for sel in np.split(np.argsort(codes, kind="stable"), np.cumsum(counts)[:-1]) if len(codes) else []:
            stem = str(graph[sel[0]])[len(collection) + 1 :]
            inv = inverse[stem]
            where = np.full(int(inv.max()) + 1, -1, dtype=np.int64)
            where[row[sel]] = sel
            if (where[inv] < 0).any():
                raise TpurankError(f"{collection}: valid graph {stem} lacks feature rows for some configs")
            groups.append(where[inv])
            runtimes.append(runtime[stem])
        return cls(collection, groups, runtimes)

    @property
    def name(self) -> str:
        return "tile_score" if kind_of(self.collection) == "tile" else "kendall_tau"

    def score(self, scores: np.ndarray) -> float:
        """Mean per-graph metric of raw model scores (higher score = predicted faster)."""
        per_graph = []
        for rows, runtime in zip(self.groups, self.runtimes, strict=True):
            order = order_from_costs(-scores[rows])
            if self.name == "tile_score":
                per_graph.append(tile_score(order, runtime) if runtime.min() > 0 else math.nan)
            else:
                per_graph.append(kendall_tau(order, runtime))
        value = mean_score(per_graph)[0]
        return -math.inf if math.isnan(value) else value  # no scorable graph: never the best round

    def __call__(self, preds: np.ndarray, data: lgb.Dataset) -> tuple[str, float, bool]:
        return self.name, self.score(preds), True


def dataset(
    df: pd.DataFrame,
    features: list[str],
    cfg: Config,
    reference: lgb.Dataset | None = None,
    drop_flat: bool = False,
) -> tuple[lgb.Dataset, np.ndarray]:
    """Rows regrouped into queries, with grades; returns (Dataset, row order used).

    `drop_flat` leaves out queries whose runtimes are all equal: they carry no ranking signal.
    """
    q = split_queries(df["graph"].to_numpy(), cfg.lgbm.max_query_rows, cfg.seed)
    runtime = df["runtime"].to_numpy(np.float64)[q.order]
    order, sizes = q.order, q.sizes
    if drop_flat and len(sizes):
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        flat = np.maximum.reduceat(runtime, starts) == np.minimum.reduceat(runtime, starts)
        keep_rows = np.repeat(~flat, sizes)
        order, runtime, sizes = order[keep_rows], runtime[keep_rows], sizes[~flat]
    if len(order) < 2:
        raise TpurankError("no graph with at least two configs of different runtimes to learn a ranking from")
    y = query_labels(runtime, sizes, cfg.lgbm.relevance_levels)
    # LightGBM drops the matrix once it has binned it (free_raw_data): nothing reads it afterwards
    x = feature_matrix(df, features, order)
    ds = lgb.Dataset(x, y, group=sizes, feature_name=features, reference=reference, free_raw_data=True)
    return ds, order


def feature_matrix(df: pd.DataFrame, features: list[str], order: np.ndarray) -> np.ndarray:
    """`df[features].to_numpy(np.float32)[order]`, filled column by column: one (rows x features)
    float32 copy, never the frame's own copy of the columns and its reordered copy beside it."""
    x = np.empty((len(order), len(features)), dtype=np.float32)
    for j, name in enumerate(features):
        x[:, j] = df[name].to_numpy()[order]
    return x


def validation(
    valid: ValidData | None,
    features: list[str],
    cfg: Config,
    dtrain: lgb.Dataset,
    collection: str,
    evals: dict,
) -> tuple[ValidScorer | None, list[lgb.Dataset], list]:
    """(scorer, valid sets, callbacks) of early stopping on the competition metric, recording it per
    round into `evals`; nothing without two valid graphs."""
    if valid is None or len(valid.table) < 2:
        return None, [], []
    dvalid, order = dataset(valid.table, features, cfg, reference=dtrain)
    rows = valid.table[["graph", "row"]].iloc[order].reset_index(drop=True)  # all the scorer reads
    scorer = ValidScorer.from_table(collection, rows, valid.inverse, valid.runtime)
    stop = lgb.early_stopping(cfg.lgbm.early_stopping_rounds, first_metric_only=True, verbose=False)
    return scorer, [dvalid], [lgb.record_evaluation(evals), stop]
