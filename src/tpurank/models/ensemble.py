"""The ensemble: per collection, a weighted average of the members' per-graph normalized scores.

Members are the models named in `cfg.ensemble.models` that have validation predictions. Each
member's costs are normalized within every graph (ranks or z-scores, so scales do not matter),
and the weights are the point of a simplex grid that scores best on the validation split. The
grid contains every single member, so the fitted ensemble is never worse on validation than its
best member. The ensemble is a model like the others: `train --model ensemble` fits and saves the
weights, `predict --model ensemble` combines the members' predictions for a split (`tpurank
ensemble` runs the two: tpurank.run.ensemble_steps). Its section of the validation report and its line
in `all`'s summary are tpurank.report.ensemble_section.

Because the weights are chosen on the validation graphs, the ensemble's validation score is
optimistic. `train` therefore also saves a cross-fitted estimate: the valid graphs are split into
two halves (seeded), weights are fitted on one half and score the other, then the halves swap; the
estimate is the mean over all graphs of their out-of-half scores. The validation report shows both.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from pathlib import Path

import numpy as np

from tpurank.core import declared
from tpurank.core.atomic import write_json
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError, command
from tpurank.core.metrics import graph_metrics, mean_score, order_from_costs
from tpurank.core.normalize import normalize
from tpurank.core.paths import Paths
from tpurank.core.provenance import write_sidecar
from tpurank.core.staleness import StageIO
from tpurank.data.subsets import scored_configs
from tpurank.models.predictions import load_predictions
from tpurank.models.weights import WEIGHTS_FILE, read_weights
from tpurank.prepare.cache import iter_prepared

WEIGHT_STEP = 0.1  # grid resolution: 66 weight vectors for 3 members, 286 for 4


def weight_grid(members: int, step: float = WEIGHT_STEP) -> np.ndarray:
    """Every weight vector on the simplex with coordinates in multiples of `step`."""
    units = round(1 / step)
    rows = [c for c in itertools.product(range(units + 1), repeat=members) if sum(c) == units]
    return np.asarray(rows, dtype=np.float64) / units


def combine(member_costs: list[np.ndarray], weights: np.ndarray, how: str) -> np.ndarray:
    return sum(w * normalize(c, how) for w, c in zip(weights, member_costs, strict=True))


def load_member_predictions(paths: Paths, model: str, split: str) -> dict[str, np.ndarray]:
    """A member's predictions of `split` (graph ID -> cost per config)."""
    path = paths.prediction_file(model, split)
    if not path.exists():
        raise TpurankError(
            f"{path}: no {split} predictions of {model}; run {command(f'predict --model {model} --split {split}')}"
        )
    return load_predictions(path)


def valid_truth(paths: Paths, collection: str) -> dict[str, np.ndarray]:
    """Each validation graph's measured runtime per original config index (what the metric scores)."""
    return {g.id: g.config_runtime for g in iter_prepared(paths.prepared, collection, "valid")}


def collection_score(collection: str, costs: dict[str, np.ndarray], truth: dict[str, np.ndarray]) -> float:
    """The collection's score, each graph on the configs validation scores (`scored_configs`)."""
    scores = []
    for gid, rt in truth.items():
        cost, keep = costs[gid], scored_configs(collection, len(rt))
        if keep is not None:
            cost, rt = cost[keep], rt[keep]
        scores.append(graph_metrics(collection, order_from_costs(cost), rt)["score"])
    return mean_score(scores)[0]


def available_members(paths: Paths, cfg: Config) -> list[str]:
    return [m for m in cfg.ensemble.models if paths.prediction_file(m, "valid").exists()]


def fit_weights(
    collection: str, preds: list[dict[str, np.ndarray]], truth: dict[str, np.ndarray], how: str
) -> tuple[np.ndarray, float]:
    """The best point of the weight grid on the graphs of `truth` (ties: the most even weights),
    and its score; equal weights and NaN when no graph has a score.

    Args:
        collection: decides the metric.
        preds: per member, graph ID -> cost per config (every graph of `truth` present).
        truth: graph ID -> measured runtime per config.
        how: per-graph normalization ("rank" or "zscore").
    """
    uniform = np.full(len(preds), 1 / len(preds))
    best_w, best_score = None, -math.inf
    for w in weight_grid(len(preds)):
        costs = {gid: combine([p[gid] for p in preds], w, how) for gid in truth}
        score = collection_score(collection, costs, truth)
        if math.isnan(score):
            continue
        # among equal scores prefer the most even weights: they generalise better than a lucky extreme
        tie = abs(score - best_score) <= 1e-12
        if score > best_score + 1e-12 or (tie and np.abs(w - uniform).sum() < np.abs(best_w - uniform).sum()):
            best_w, best_score = w, score
    if best_w is None:  # every graph undefined (e.g. constant runtimes): weigh members equally
        return uniform, math.nan
    return best_w, best_score


def halves(ids: list[str], seed: int) -> tuple[list[str], list[str]]:
    """The graph IDs split into two halves at random (seeded; the first gets the odd one)."""
    order = np.random.default_rng(seed).permutation(sorted(ids))
    cut = (len(order) + 1) // 2
    return sorted(order[:cut].tolist()), sorted(order[cut:].tolist())


def cross_fit(
    collection: str, preds: list[dict[str, np.ndarray]], truth: dict[str, np.ndarray], how: str, seed: int
) -> dict:
    """Cross-fitted estimate of the fitted ensemble: weights fitted on one half of the graphs score
    the other half, and the other way round; `score` is the mean of every graph's out-of-half score
    (the mean of the two halves' scores when they are the same size). Needs two graphs.

    Returns:
        {"score", "halves": [ids, ids], "weights": [fitted on half 0, on half 1],
        "half_scores": [half 1 scored with weights of half 0, half 0 with those of half 1]}, or
        {"score": None, "why": ...} with fewer than two graphs.
    """
    if len(truth) < 2:
        return {"score": None, "why": f"{len(truth)} valid graph(s): two halves need at least 2"}
    parts = halves(list(truth), seed)
    weights, per_graph, half_scores = [], [], []
    for fit_on, score_on in ((parts[0], parts[1]), (parts[1], parts[0])):
        w, _ = fit_weights(collection, preds, {g: truth[g] for g in fit_on}, how)
        weights.append([float(x) for x in w])
        costs = {g: combine([p[g] for p in preds], w, how) for g in score_on}
        scores = [graph_metrics(collection, order_from_costs(costs[g]), truth[g])["score"] for g in score_on]
        half_scores.append(mean_score(scores)[0])
        per_graph += scores
    score = mean_score(per_graph)[0]
    return {
        "score": None if math.isnan(score) else score,
        "halves": [parts[0], parts[1]],
        "weights": weights,
        "half_scores": [None if math.isnan(s) else s for s in half_scores],
    }


def train(paths: Paths, cfg: Config, collection: str) -> None:
    """Fit the member weights for one collection on the validation split and save them, with the
    cross-fitted estimate of their score (see the module docstring)."""
    members = available_members(paths, cfg)
    if not members:
        raise TpurankError(
            f"no member of the ensemble ({', '.join(cfg.ensemble.models)}) has valid predictions"
        )
    truth = valid_truth(paths, collection)
    preds = [load_member_predictions(paths, m, "valid") for m in members]
    ids = [gid for gid in truth if all(gid in p for p in preds)]
    if len(ids) < len(truth):
        missing = len(truth) - len(ids)
        raise TpurankError(f"{collection}: {missing} validation graphs lack a member prediction")
    how = cfg.ensemble.normalize
    best_w, best_score = fit_weights(collection, preds, truth, how)
    singles = {
        m: collection_score(collection, {g: p[g] for g in ids}, truth)
        for m, p in zip(members, preds, strict=True)
    }
    crossed = cross_fit(collection, preds, truth, how=how, seed=cfg.seed)
    out = paths.model_dir("ensemble", collection)
    record = {
        "collection": collection,
        "members": members,
        "weights": [float(x) for x in best_w],
        "normalize": how,
        "fitted_on": "valid",  # the valid_score below is in-sample: see cross_fit
        "valid_score": None if math.isnan(best_score) else best_score,
        "member_valid_scores": singles,
        "cross_fit": crossed,
    }
    write_json(out / WEIGHTS_FILE, record)
    write_sidecar(out / "provenance.json", cfg, paths.data, model="ensemble", collection=collection)
    est = (
        ""
        if crossed["score"] is None
        else f" (valid {best_score:.4f} fitted on it; cross-fitted {crossed['score']:.4f})"
    )
    print(
        f"ensemble {collection}: "
        + ", ".join(f"{m}={w:.1f}" for m, w in zip(members, best_w, strict=True))
        + est
    )


def predict(paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
    """Combine the members' predictions of `split` with the weights fitted for the collection."""
    wfile = paths.model_dir("ensemble", collection) / WEIGHTS_FILE
    if not wfile.exists():
        raise TpurankError(f"{wfile}: ensemble not fitted; run {command('train --model ensemble')}")
    record = read_weights(wfile)
    preds = [load_member_predictions(paths, m, split) for m in record["members"]]
    prefix = f"{collection}:"
    ids = sorted({gid for p in preds for gid in p if gid.startswith(prefix)})
    out = {}
    for gid in ids:
        if not all(gid in p for p in preds):
            raise TpurankError(f"{gid}: a member of the ensemble has no {split} prediction for it")
        out[gid] = combine(
            [p[gid] for p in preds], np.asarray(record["weights"]), record["normalize"]
        ).astype(np.float32)
    return out


def train_io(paths: Paths, starts: Iterable[Path] = ()) -> StageIO:
    """The train stage's declaration for the ensemble (tpurank.core.declared's, by its name): the
    members' valid predictions and the data they are scored against, which the weights are fitted
    on, and every model's section; its weights' folder, which the stage locks while it fits.

    Args:
        paths: the run's resolved paths.
        starts: the checkpoints it starts from: none (weights are fitted afresh).
    """
    return declared.train_io(paths, declared.ENSEMBLE, starts)


def predict_io(paths: Paths, split: str) -> StageIO:
    """The predict stage's declaration for the ensemble and `split` (tpurank.core.declared's, by
    its name): its weights and the members' predictions of the split it combines, on which each
    collection's predictions are keyed; the predictions and the split's CSV it writes.

    Args:
        paths: the run's resolved paths.
        split: train, valid or test.
    """
    return declared.predict_io(paths, declared.ENSEMBLE, split)
