"""LightGBM rankers on the tabular features: one booster per collection (`--model lgbm`).

Training uses LightGBM's native API with a ranking objective (lambdarank, or rank_xendcg), graphs
as queries and integer runtime-rank grades as labels. Early stopping watches the competition's own
metric on the validation graphs (Kendall tau for layout, the tile score for tile) through a custom
eval, so the kept model is the one that ranks best, not the one with the best NDCG.

The saved files are tpurank.lgbm.saved's; the validation scorer is tpurank.lgbm.validation's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd

from tpurank.core import declared
from tpurank.core.collections import kind_of
from tpurank.core.config import Config
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.staleness import StageIO
from tpurank.core.workers import lgbm_threads
from tpurank.features import io as tab_io
from tpurank.features.stage import require_tables
from tpurank.lgbm.queries import label_gain
from tpurank.lgbm.saved import METRICS_FILE, MODEL_NAME, load, save, write_curve
from tpurank.lgbm.saved import PROVENANCE_FILE as PROVENANCE_FILE  # callers read the sidecar by this name
from tpurank.lgbm.training_rows import TRAIN_ROWS_FILE, rows_to_keep
from tpurank.lgbm.training_rows import save as save_rows
from tpurank.lgbm.validation import ValidData, ValidScorer, dataset, validation

TILE_TRUNCATION = 64  # default lambdarank truncation for tile: the score looks at the top 5 only


def _progress(total: int, desc: str):
    """A LightGBM callback showing rounds and the latest validation score in a tqdm bar."""
    bar = tqdm(total=total, desc=desc, unit="round", leave=False)

    def callback(env: lgb.callback.CallbackEnv) -> None:
        bar.update(1)
        if env.evaluation_result_list:
            bar.set_postfix_str(f"{env.evaluation_result_list[0][1]}={env.evaluation_result_list[0][2]:.4f}")
        if env.iteration + 1 >= env.end_iteration:
            bar.close()

    callback.order = 5  # type: ignore[attr-defined]
    return callback, bar


def truncation_level(cfg: Config, collection: str) -> int:
    """lambdarank's truncation level: the configured one, or by default 64 for tile (only the top 5
    count) and the whole query for layout (Kendall tau counts every pair)."""
    if cfg.lgbm.truncation_level > 0:
        return cfg.lgbm.truncation_level
    return TILE_TRUNCATION if kind_of(collection) == "tile" else cfg.lgbm.max_query_rows


def lgb_params(cfg: Config, collection: str) -> dict:
    """The booster parameters from the `lgbm` config section."""
    lc = cfg.lgbm
    if lc.objective not in ("lambdarank", "rank_xendcg"):
        raise TpurankError(f"lgbm.objective must be 'lambdarank' or 'rank_xendcg', got {lc.objective!r}")
    return {
        "objective": lc.objective,
        "metric": "None",  # the custom eval (ValidScorer) drives early stopping
        "num_leaves": lc.num_leaves,
        "learning_rate": lc.learning_rate,
        "min_data_in_leaf": lc.min_data_in_leaf,
        "feature_fraction": lc.feature_fraction,
        "bagging_fraction": lc.bagging_fraction,
        "bagging_freq": 1 if lc.bagging_fraction < 1.0 else 0,
        "label_gain": label_gain(lc.relevance_levels, lc.label_gain),
        "lambdarank_truncation_level": truncation_level(cfg, collection),
        "num_threads": lgbm_threads(lc.threads),
        "seed": cfg.seed,
        "verbose": -1,
    }


def fit(
    train_df: pd.DataFrame,
    valid: ValidData | None,
    cfg: Config,
    collection: str,
    curve: list[float] | None = None,
) -> tuple[lgb.Booster, dict]:
    """Train one ranker.

    Args:
        train_df: the collection's train feature table.
        valid: its valid table with the per-graph inverse maps and runtimes (early stopping on the
            competition metric), or None.
        cfg: the config with the collection's overrides applied.
        collection: the collection (decides the validation metric).
        curve: when given, filled with the validation metric after each round (`write_curve`).

    Returns:
        the booster (at its best iteration) and a summary (rounds, best score, sizes, seconds).
    """
    features = tab_io.feature_columns(train_df)
    if train_df.empty:
        raise TpurankError(f"{collection}: the train feature table has no rows")
    params = lgb_params(cfg, collection)
    start = time.perf_counter()
    try:
        dtrain, _ = dataset(train_df, features, cfg, drop_flat=True)
    except TpurankError as e:
        raise TpurankError(f"lgbm {collection}: {e}") from None
    booster, scorer, scores = _boost(params, dtrain, valid, features, cfg, collection)
    if curve is not None:
        curve[:] = scores
    info = {
        "collection": collection,
        **_rounds(booster, scorer, scores),
        "train_rows": dtrain.num_data(),
        "train_graphs": int(train_df["graph"].nunique()),
        "train_queries": int(dtrain.get_group().shape[0]) if dtrain.get_group() is not None else 0,
        "features": len(features),
        "seconds": round(time.perf_counter() - start, 3),
    }
    return booster, info


def _boost(
    params: dict,
    dtrain: lgb.Dataset,
    valid: ValidData | None,
    features: list[str],
    cfg: Config,
    collection: str,
) -> tuple[lgb.Booster, ValidScorer | None, list[float]]:
    """The boosting rounds, under a progress bar and stopped early on the competition metric: the
    booster, its validation scorer (None without valid data) and the score after each round.

    Args:
        params: the booster parameters (`lgb_params`).
        dtrain: the train Dataset, graphs as queries.
        valid: the valid table with its inverse maps and runtimes, or None.
        features: the model's feature columns.
        cfg: the collection's config.
        collection: the collection (names the bar and the errors; decides the metric).
    """
    rounds = cfg.lgbm.num_boost_round
    bar_cb, bar = _progress(rounds, f"lgbm {collection}")
    evals: dict = {}  # the validation metric per round (lgb.record_evaluation)
    scorer, valid_sets, callbacks = validation(valid, features, cfg, dtrain, collection, evals)
    try:
        booster = lgb.train(
            params,
            dtrain,
            rounds,
            valid_sets=valid_sets,
            valid_names=["valid"][: len(valid_sets)],
            feval=scorer,
            callbacks=[bar_cb, *callbacks],
        )
    except lgb.basic.LightGBMError as e:
        raise TpurankError(f"lgbm {collection}: LightGBM failed ({e})") from None
    finally:
        bar.close()
    scores = evals.get("valid", {}).get(scorer.name, []) if scorer is not None else []
    return booster, scorer, scores


def _rounds(booster: lgb.Booster, scorer: ValidScorer | None, scores: list[float]) -> dict:
    """Rounds run, the best one and its validation score."""
    return {
        "rounds": len(scores) or booster.current_iteration(),  # run (the booster keeps best_iteration)
        "best_iteration": booster.best_iteration
        if booster.best_iteration > 0
        else booster.current_iteration(),
        "valid_metric": scorer.name if scorer else None,
        "valid_score": booster.best_score.get("valid", {}).get(scorer.name) if scorer else None,
    }


def train(paths: Paths, cfg: Config, collection: str) -> None:
    """Train and save the collection's ranker on the feature tables `features` built.

    Args:
        paths: the run's paths.
        cfg: the collection's config (`Config.for_collection`: its overrides applied).
        collection: one of COLLECTIONS.
    """
    present = require_tables(paths, cfg, collection, ["train", "valid"])
    if "train" not in present:
        raise TpurankError(
            f"{paths.prepared}: no prepared train graphs of {collection}; run {command('prepare')}"
        )
    train_df = tab_io.read_table(paths, collection, "train")
    valid = None
    if "valid" in present:
        valid = ValidData(
            table=tab_io.read_table(paths, collection, "valid"),
            inverse=tab_io.read_per_graph(paths, collection, "valid", "inverse"),
            runtime=tab_io.read_per_graph(paths, collection, "valid", "runtime"),
        )
    curve: list[float] = []
    booster, info = fit(train_df, valid, cfg, collection, curve=curve)
    save(paths, cfg, collection, booster, info)
    # what calibration boosts on beside a user's measured configs (tpurank.lgbm.training_rows)
    kept = rows_to_keep(train_df, booster.feature_name(), cfg.seed)
    save_rows(paths.model_dir(MODEL_NAME, collection) / TRAIN_ROWS_FILE, kept)
    write_curve(paths.model_dir(MODEL_NAME, collection) / METRICS_FILE, curve)
    print(end_line(collection, info, cfg.lgbm.num_boost_round))


def end_line(collection: str, info: dict, rounds_allowed: int) -> str:
    """The one line each trained model ends with: rounds, minutes, why it stopped, best round and score."""
    why = "num_boost_round" if info["rounds"] >= rounds_allowed else "early stopping (no valid gain)"
    best = (
        f"best {info['valid_metric']} {info['valid_score']:.4f} at round {info['best_iteration']}"
        if info["valid_score"] is not None
        else f"no valid split, kept round {info['best_iteration']}"
    )
    return f"[lgbm {collection}] {info['rounds']} rounds in {info['seconds'] / 60:.1f} min, stopped: {why}; {best}"


def predict(paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
    """Graph ID -> cost per ORIGINAL config index (lower = predicted faster).

    Args:
        paths: the run's paths.
        cfg: the collection's config (`Config.for_collection`).
        collection: one of COLLECTIONS.
        split: the split to score (its feature table built by `features`).
    """
    booster, features = load(paths, collection)
    if not require_tables(paths, cfg, collection, [split]):
        return {}  # no graphs of this collection in the split
    path = tab_io.table_path(paths, collection, split)
    df = tab_io.read_table(paths, collection, split)
    missing = [f for f in features if f not in df.columns]
    if missing:
        raise DataError(path, f"lacks model feature {missing[0]!r}; rebuild features or retrain lgbm")
    scores = booster.predict(df[features].to_numpy(np.float32), num_threads=lgbm_threads(cfg.lgbm.threads))
    inverse = tab_io.read_per_graph(paths, collection, split, "inverse")
    out: dict[str, np.ndarray] = {}
    graph = df["graph"].to_numpy()
    rows = df["row"].to_numpy(np.int64)
    _, first, codes, counts = np.unique(graph, return_index=True, return_inverse=True, return_counts=True)
    by_graph = np.split(np.argsort(codes, kind="stable"), np.cumsum(counts)[:-1])
    for c in np.argsort(first):
        gid = str(graph[first[c]])
        sel = by_graph[c]
        inv = inverse.get(gid[len(collection) + 1 :])
        if inv is None:
            raise DataError(
                tab_io.per_graph_path(paths, collection, split, "inverse"), f"no inverse map for {gid}"
            )
        n_unique = int(inv.max()) + 1 if len(inv) else 0
        cost = np.full(n_unique, np.inf)
        cost[rows[sel]] = -scores[sel]
        finite = np.isfinite(cost)
        cost[~finite] = cost[finite].max() + 1.0 if finite.any() else 0.0  # unfeaturised rows go last
        out[gid] = cost[inv].astype(np.float32)
    return out


def train_io(paths: Paths, starts: Iterable[Path] = ()) -> StageIO:
    """The train stage's declaration for LightGBM (tpurank.core.declared's, by its name): the
    prepared cache and the feature tables it trains on, and the `prepare`, `features` and `lgbm`
    sections, which key its boosters; its models' folder, which the stage locks while it trains.

    Args:
        paths: the run's resolved paths.
        starts: the checkpoints it starts from: none (a booster has no `init_from`).
    """
    return declared.train_io(paths, MODEL_NAME, starts)


def predict_io(paths: Paths, split: str) -> StageIO:
    """The predict stage's declaration for LightGBM and `split` (tpurank.core.declared's, by its
    name): the data, the prepared cache, its boosters and the feature tables it scores, on which
    each collection's predictions are keyed; the predictions and the split's CSV it writes.

    Args:
        paths: the run's resolved paths.
        split: train, valid or test.
    """
    return declared.predict_io(paths, MODEL_NAME, split)
