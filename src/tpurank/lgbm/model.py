"""LightGBM rankers on the tabular features: one booster per collection (`--model lgbm`).

Training uses LightGBM's native API with a ranking objective (lambdarank, or rank_xendcg), graphs
as queries and integer runtime-rank grades as labels. Early stopping watches the competition's own
metric on the validation graphs (Kendall tau for layout, the tile score for tile) through a custom
eval, so the kept model is the one that ranks best, not the one with the best NDCG.

Files in `models/lgbm/<collection>/`: model.txt (the booster at its best iteration),
features.json, config.json, importance.csv, provenance.json and metrics.csv (the validation metric
after each boosting round: the report's training curves).
"""

from __future__ import annotations

import functools
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import lightgbm as lgb
import numpy as np
import pandas as pd

from tpurank.core.atomic import write_json, write_model, write_text
from tpurank.core.collections import kind_of
from tpurank.core.config import Config, to_dict
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.identity import file_digest
from tpurank.core.metrics import kendall_tau, mean_score, order_from_costs, tile_score
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.provenance import write_sidecar
from tpurank.features import io as tab_io
from tpurank.lgbm.queries import label_gain, query_labels, split_queries

MODEL_NAME = "lgbm"
MODEL_FILE, FEATURES_FILE, CONFIG_FILE = "model.txt", "features.json", "config.json"
IMPORTANCE_FILE, PROVENANCE_FILE = "importance.csv", "provenance.json"
METRICS_FILE = "metrics.csv"  # round,valid_score: the validation metric after each boosting round
TILE_TRUNCATION = 64  # default lambdarank truncation for tile: the score looks at the top 5 only


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
        "num_threads": lc.threads or os.cpu_count() or 1,
        "seed": cfg.seed,
        "verbose": -1,
    }


def _dataset(
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
    x = df[features].to_numpy(np.float32)[order]
    y = query_labels(runtime, sizes, cfg.lgbm.relevance_levels)
    ds = lgb.Dataset(x, y, group=sizes, feature_name=features, reference=reference, free_raw_data=False)
    return ds, order


def fit(
    train_df: pd.DataFrame,
    valid: tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]] | None,
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
    lc = cfg.lgbm
    start = time.perf_counter()
    try:
        dtrain, _ = _dataset(train_df, features, cfg, drop_flat=True)
    except TpurankError as e:
        raise TpurankError(f"lgbm {collection}: {e}") from None
    bar_cb, bar = _progress(lc.num_boost_round, f"lgbm {collection}")
    evals: dict = {}  # the validation metric per round (lgb.record_evaluation)
    scorer, valid_sets, callbacks = _validation(valid, features, cfg, dtrain, collection, evals)
    try:
        booster = lgb.train(
            params,
            dtrain,
            lc.num_boost_round,
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


def _validation(
    valid: tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]] | None,
    features: list[str],
    cfg: Config,
    dtrain: lgb.Dataset,
    collection: str,
    evals: dict,
) -> tuple[ValidScorer | None, list[lgb.Dataset], list]:
    """(scorer, valid sets, callbacks) of early stopping on the competition metric, recording it per
    round into `evals`; nothing without two valid graphs."""
    if valid is None or len(valid[0]) < 2:
        return None, [], []
    valid_df, inverse, runtime = valid
    dvalid, order = _dataset(valid_df, features, cfg, reference=dtrain)
    scorer = ValidScorer.from_table(collection, valid_df.iloc[order].reset_index(drop=True), inverse, runtime)
    stop = lgb.early_stopping(cfg.lgbm.early_stopping_rounds, first_metric_only=True, verbose=False)
    return scorer, [dvalid], [lgb.record_evaluation(evals), stop]


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
        out / PROVENANCE_FILE, cfg, paths.data, model=MODEL_NAME,
        model_digest=file_digest(out / MODEL_FILE), **info,
    )  # fmt: skip


def _ensure_tables(paths: Paths, cfg: Config, collection: str, splits: list[str]) -> list[str]:
    """Build (or reuse, when up to date) the feature tables the model needs.

    Returns:
        the requested splits that have prepared graphs (only those get a table).
    """
    from tpurank.features.stage import build_features
    from tpurank.prepare.cache import read_index

    index = read_index(paths.prepared)
    mine = index[index["collection"] == collection]
    present = [s for s in splits if (mine["split"] == s).any()]
    if present:
        build_features(paths, cfg, [collection], present)
    return present


def train(paths: Paths, cfg: Config, collection: str) -> None:
    """Train and save the collection's ranker (builds missing feature tables first).

    Args:
        paths: the run's paths.
        cfg: the collection's config (`Config.for_collection`: its overrides applied).
        collection: one of COLLECTIONS.
    """
    present = _ensure_tables(paths, cfg, collection, ["train", "valid"])
    if "train" not in present:
        raise TpurankError(
            f"{paths.prepared}: no prepared train graphs of {collection}; run `tpurank prepare`"
        )
    train_df = tab_io.read_table(paths, collection, "train")
    valid = None
    if "valid" in present:
        valid = (
            tab_io.read_table(paths, collection, "valid"),
            *(tab_io.read_per_graph(paths, collection, "valid", what) for what in tab_io.PER_GRAPH),
        )
    curve: list[float] = []
    booster, info = fit(train_df, valid, cfg, collection, curve=curve)
    save(paths, cfg, collection, booster, info)
    write_curve(paths.model_dir(MODEL_NAME, collection) / METRICS_FILE, curve)
    print(end_line(collection, info, cfg.lgbm.num_boost_round))


def write_curve(path: Path, curve: list[float]) -> None:
    """metrics.csv (atomically): `round,valid_score`, one row per boosting round (1-based); only the
    header without a valid split, so a retrain never leaves an older run's curve behind."""
    rows = ["round,valid_score", *(f"{i},{float(v)!r}" for i, v in enumerate(curve, start=1))]
    write_text(path, "\n".join(rows) + "\n")


def end_line(collection: str, info: dict, rounds_allowed: int) -> str:
    """The one line each trained model ends with: rounds, minutes, why it stopped, best round and score."""
    why = "num_boost_round" if info["rounds"] >= rounds_allowed else "early stopping (no valid gain)"
    best = (
        f"best {info['valid_metric']} {info['valid_score']:.4f} at round {info['best_iteration']}"
        if info["valid_score"] is not None
        else f"no valid split, kept round {info['best_iteration']}"
    )
    return f"[lgbm {collection}] {info['rounds']} rounds in {info['seconds'] / 60:.1f} min, stopped: {why}; {best}"


def check_model_file(model_file: Path, sidecar: Path, collection: str) -> None:
    """The model file is the one training wrote, for this collection: checked before LightGBM reads
    it (a truncated model.txt crashes the native library instead of raising).

    Raises:
        TpurankError: naming the file and the mismatch.
    """
    retrain = f"retrain it: `tpurank train --model lgbm --collections {collection}`"
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
        raise TpurankError(f"{model_file}: no lgbm model; run `python -m tpurank train --model lgbm` first")
    check_model_file(model_file, out / PROVENANCE_FILE, collection)
    try:
        booster = lgb.Booster(model_file=str(model_file))
        features = json.loads((out / FEATURES_FILE).read_text())
    except (lgb.basic.LightGBMError, OSError, ValueError) as e:
        raise DataError(model_file, f"unreadable lgbm model ({e})") from None
    return booster, features


def predict(paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
    """Graph ID -> cost per ORIGINAL config index (lower = predicted faster).

    Args:
        paths: the run's paths.
        cfg: the collection's config (`Config.for_collection`).
        collection: one of COLLECTIONS.
        split: the split to score (builds its feature table if needed).
    """
    booster, features = load(paths, collection)
    if not _ensure_tables(paths, cfg, collection, [split]):
        return {}  # no graphs of this collection in the split
    path = tab_io.table_path(paths, collection, split)
    df = tab_io.read_table(paths, collection, split)
    missing = [f for f in features if f not in df.columns]
    if missing:
        raise DataError(path, f"lacks model feature {missing[0]!r}; rebuild features or retrain lgbm")
    scores = booster.predict(
        df[features].to_numpy(np.float32), num_threads=cfg.lgbm.threads or os.cpu_count() or 1
    )
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
