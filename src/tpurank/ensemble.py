"""The ensemble: per collection, a weighted average of the members' per-graph normalized scores.

Members are the models named in `cfg.ensemble.models` that have validation predictions. Each
member's costs are normalized within every graph (ranks or z-scores, so scales do not matter),
and the weights are the point of a simplex grid that scores best on the validation split. The
grid contains every single member, so the fitted ensemble is never worse on validation than its
best member. The ensemble is a model like the others: `train --model ensemble` fits and saves the
weights, `predict --model ensemble` combines the members' predictions for a split.
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from pathlib import Path

import numpy as np
from scipy.stats import rankdata

from tpurank import cli
from tpurank.atomic import write_json
from tpurank.config import Config
from tpurank.dataset import COLLECTIONS
from tpurank.errors import TpurankError
from tpurank.metrics import graph_metrics, mean_score, order_from_costs
from tpurank.paths import Paths
from tpurank.prepare.cache import iter_prepared
from tpurank.provenance import write_sidecar

WEIGHT_STEP = 0.1  # grid resolution: 66 weight vectors for 3 members, 286 for 4
WEIGHTS_FILE = "weights.json"


def normalize(cost: np.ndarray, how: str) -> np.ndarray:
    """Per-graph normalized cost: ranks in [0, 1] or z-scores (a constant graph maps to zeros)."""
    cost = np.asarray(cost, dtype=np.float64)
    if how == "rank":
        return (rankdata(cost) - 1) / max(1, len(cost) - 1)
    if how == "zscore":
        std = cost.std()
        return (cost - cost.mean()) / std if std > 0 else np.zeros_like(cost)
    raise TpurankError(f"config: ensemble.normalize must be 'rank' or 'zscore', got {how!r}")


def weight_grid(members: int, step: float = WEIGHT_STEP) -> np.ndarray:
    """Every weight vector on the simplex with coordinates in multiples of `step`."""
    units = round(1 / step)
    rows = [c for c in itertools.product(range(units + 1), repeat=members) if sum(c) == units]
    return np.asarray(rows, dtype=np.float64) / units


def combine(member_costs: list[np.ndarray], weights: np.ndarray, how: str) -> np.ndarray:
    return sum(w * normalize(c, how) for w, c in zip(weights, member_costs, strict=True))


def load_member_predictions(paths: Paths, model: str, split: str) -> dict[str, np.ndarray]:
    from tpurank.predictions import load_predictions

    path = paths.prediction_file(model, split)
    if not path.exists():
        raise TpurankError(
            f"{path}: no {split} predictions of {model}; run `tpurank predict --model {model} --split {split}`"
        )
    return load_predictions(path)


def valid_truth(paths: Paths, collection: str) -> dict[str, np.ndarray]:
    """Each validation graph's measured runtime per original config index (what the metric scores)."""
    return {g.id: g.config_runtime for g in iter_prepared(paths.prepared, collection, "valid")}


def collection_score(collection: str, costs: dict[str, np.ndarray], truth: dict[str, np.ndarray]) -> float:
    scores = [
        graph_metrics(collection, order_from_costs(costs[gid]), rt)["score"] for gid, rt in truth.items()
    ]
    return mean_score(scores)[0]


def available_members(paths: Paths, cfg: Config) -> list[str]:
    return [m for m in cfg.ensemble.models if paths.prediction_file(m, "valid").exists()]


def train(paths: Paths, cfg: Config, collection: str) -> None:
    """Fit the member weights for one collection on the validation split and save them."""
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
    best_w, best_score = None, -math.inf
    uniform = np.full(len(members), 1 / len(members))
    for w in weight_grid(len(members)):
        costs = {gid: combine([p[gid] for p in preds], w, how) for gid in ids}
        score = collection_score(collection, costs, truth)
        if math.isnan(score):
            continue
        # among equal scores prefer the most even weights: they generalise better than a lucky extreme
        tie = abs(score - best_score) <= 1e-12
        if score > best_score + 1e-12 or (tie and np.abs(w - uniform).sum() < np.abs(best_w - uniform).sum()):
            best_w, best_score = w, score
    if best_w is None:  # every graph undefined (e.g. constant runtimes): weigh members equally
        best_w = np.full(len(members), 1 / len(members))
    singles = {
        m: collection_score(collection, {g: p[g] for g in ids}, truth)
        for m, p in zip(members, preds, strict=True)
    }
    out = paths.model_dir("ensemble", collection)
    record = {
        "collection": collection,
        "members": members,
        "weights": [float(x) for x in best_w],
        "normalize": how,
        "valid_score": best_score if best_score > -math.inf else None,
        "member_valid_scores": singles,
    }
    write_json(out / WEIGHTS_FILE, record)
    write_sidecar(out / "provenance.json", cfg, paths.data, model="ensemble", collection=collection)
    print(
        f"ensemble {collection}: " + ", ".join(f"{m}={w:.1f}" for m, w in zip(members, best_w, strict=True))
    )


def predict(paths: Paths, cfg: Config, collection: str, split: str) -> dict[str, np.ndarray]:
    """Combine the members' predictions of `split` with the weights fitted for the collection."""
    wfile = paths.model_dir("ensemble", collection) / WEIGHTS_FILE
    if not wfile.exists():
        raise TpurankError(f"{wfile}: ensemble not fitted; run `tpurank train --model ensemble`")
    record = json.loads(wfile.read_text())
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


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--collections", nargs="+", default=list(COLLECTIONS), help="collections to ensemble")


def output_folders(args: argparse.Namespace) -> list[Path]:
    """The ensemble's model and prediction folders, locked while it runs (tpurank.lock)."""
    return [args.paths.models / "ensemble", args.paths.predictions / "ensemble"]


def run(args: argparse.Namespace) -> int:
    """The `ensemble` stage: fit weights per collection, then predict valid and test."""
    for c in args.collections:
        train(args.paths, args.cfg.for_collection(c), c)
    common = cli.common_argv(args)
    for split in ("valid", "test"):
        rc = cli.main(
            ["predict", "--model", "ensemble", "--split", split, "--collections", *args.collections, *common]
        )
        if rc != 0:
            return rc
    return 0
