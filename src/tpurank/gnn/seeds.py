"""Seed averaging (`gnn.seeds`): one model per seed, predictions averaged after per-graph normalisation.

Runs with different seeds differ by up to 0.1 tau on the xla collections (the competition's
write-ups); the 1st place averaged 5-20 seeds. Member k trains with `seed + k` and
`gnn.seeds = 1`, so member 0 is exactly the model a one-seed run trains (`models/gnn/<collection>/model.pt`, reused, not retrained) and
member k > 0 lives in `models/gnn/<collection>/seed-k/`. Each member resumes and is skipped when
up to date on its own. Each member's costs are normalised per graph (`ensemble.normalize`: ranks
or z-scores, so no seed dominates by its scale) and averaged. After training, `seeds.json` beside
`model.pt` holds every member's validation score and the score of their average.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from tpurank.core.atomic import write_json
from tpurank.core.collections import kind_of
from tpurank.core.config import Config
from tpurank.core.declared import model_sections, train_io
from tpurank.core.errors import TpurankError
from tpurank.core.normalize import normalize
from tpurank.core.paths import Paths
from tpurank.core.staleness import SEED, current
from tpurank.gnn import device as devices
from tpurank.gnn.data import GraphData, eval_configs, load_split
from tpurank.gnn.device import setup_runtime
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.recipe import ModelSpec, Recipe
from tpurank.gnn.scoring import graph_score, score_rows
from tpurank.gnn.training.checkpoints import CHECKPOINT, finished_model, load_checkpoint, load_model
from tpurank.gnn.training.collection import train_collection

SUMMARY = "seeds.json"


@dataclasses.dataclass(frozen=True)
class MemberPaths(Paths):
    """Paths whose model folders are those of one seed member (`seed-k` inside the usual folder)."""

    member: str = ""

    def model_dir(self, model: str, collection: str) -> Path:
        base = super().model_dir(model, collection)
        return base / self.member if self.member else base


def member_paths(paths: Paths, k: int) -> Paths:
    """The paths of seed member k (member 0: the usual folder)."""
    fields = {f.name: getattr(paths, f.name) for f in dataclasses.fields(Paths)}
    return MemberPaths(**fields, member=f"seed-{k}" if k else "")


def member_config(spec: ModelSpec, cfg: Config, k: int) -> Config:
    """The config member k trains with: seed + k, one seed (so member 0 is the one-seed model)."""
    section = spec.settings(cfg)
    one = dataclasses.replace(section, seeds=1) if hasattr(section, "seeds") else section
    return dataclasses.replace(cfg, seed=cfg.seed + k, **{spec.section: one})


def member_files(spec: ModelSpec, paths: Paths, collection: str, n: int) -> list[Path]:
    """The `model.pt` of each of `n` members."""
    return [member_paths(paths, k).model_dir(spec.name, collection) / CHECKPOINT for k in range(n)]


def seeds_key(spec: ModelSpec, paths: Paths, cfg: Config, collection: str) -> str:
    """The key of `seeds.json` (`StageIO.piece_key` on the train stage's declaration): the model's
    config sections and the content of every member's `model.pt`; a summary with another key
    belongs to other members."""
    files = member_files(spec, paths, collection, spec.seeds(cfg))
    sections = (SEED, *model_sections(spec.name))
    return train_io(paths, spec.name).piece_key({"model": spec.name}, files, cfg, sections)


def up_to_date_summary(spec: ModelSpec, paths: Paths, cfg: Config, collection: str) -> dict[str, Any] | None:
    """The `seeds.json` summary when every member is a complete model of its config and data and
    the summary was written for those members; else None (train the members, score them again)."""
    try:
        summary = trained_seeds(spec, paths, collection)
    except TpurankError:  # unreadable: written again below
        return None
    stored = summary.get("key") if summary is not None else None
    if not current(stored, seeds_key(spec, paths, cfg, collection)):
        return None
    members = range(spec.seeds(cfg))  # each member is whole when its own checkpoint is current
    done = (
        finished_model(spec, member_paths(paths, k), member_config(spec, cfg, k), collection) for k in members
    )
    return summary if all(d is not None for d in done) else None


def average_costs(member_costs: list[np.ndarray], how: str) -> np.ndarray:
    """The mean of the members' costs of one graph, each normalised per graph first.

    Args:
        member_costs: one cost vector per member (same configs, same order).
        how: "rank" or "zscore" (tpurank.core.normalize).
    """
    return np.mean([normalize(c, how) for c in member_costs], axis=0)


class ValidCosts(NamedTuple):
    """One member's costs of one valid graph, on the configs validation scores.

    Args:
        configs: original config indices.
        costs: a cost per config in `configs`.
    """

    configs: np.ndarray
    costs: np.ndarray


def _valid_costs(
    spec: ModelSpec, paths: Paths, cfg: Config, collection: str, valid: list[GraphData]
) -> dict[str, ValidCosts]:
    """Per rankable valid graph: the member's costs on the configs validation scores."""
    model, ckpt = load_model(spec, paths.model_dir(spec.name, collection) / CHECKPOINT, collection)
    r = spec.recipe(cfg, kind_of(collection))
    rt = setup_runtime()
    model.to(rt.device)
    precision = devices.prediction_precision(rt.device, ckpt.get("precision") or "fp32")
    out = {}
    for g in valid:
        if not g.rankable:
            continue
        configs = eval_configs(g, r.eval_max_configs)
        rows, back = np.unique(g.inverse[configs], return_inverse=True)
        seg = ckpt.get("recipe", {}).get("segment_nodes", 0)  # scored as training and predict score it
        out[g.id] = ValidCosts(
            configs,
            score_rows(
                model,
                g,
                rows,
                chunk=r.predict_chunk,
                device=rt.device,
                precision=precision,
                segment_nodes=seg,
            )[back],
        )
    return out


def train_seeds(
    spec: ModelSpec, paths: Paths, cfg: Config, collection: str, progress: bool = True
) -> dict[str, Any]:
    """Train every member (each resumable, skipped when up to date), then score their average on
    valid; nothing is done when `seeds.json` is up to date (`up_to_date_summary`).

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config with the collection's overrides applied (`spec.seeds(cfg)` members).
        collection: one of COLLECTIONS.
        progress: show progress bars.

    Returns:
        The summary also written to `seeds.json`: per-member scores, their mean and spread, and the
        validation score of the averaged predictions (the same configs and metric as early stopping).
    """
    n = spec.seeds(cfg)
    done = up_to_date_summary(spec, paths, cfg, collection)
    if done is not None:
        if progress:
            print(f"[{spec.name}] {collection}: {n} seed members up to date (same config and data); skipping")
        return done
    # written again once every member is trained: until then predict must not average stale members
    (paths.model_dir(spec.name, collection) / SUMMARY).unlink(missing_ok=True)
    dims = spec.recipe(cfg, kind_of(collection)).dim_features
    train = load_split(paths, collection, "train", progress, dim_features=dims)
    valid = load_split(paths, collection, "valid", progress, dim_features=dims)
    costs = []
    for k in range(n):
        mp, mc = member_paths(paths, k), member_config(spec, cfg, k)
        if progress:
            print(f"[{spec.name}] {collection}: seed member {k + 1}/{n} (seed {mc.seed})")
        train_collection(
            spec, mp, mc, collection=collection, train_graphs=train, valid_graphs=valid, progress=progress
        )
        costs.append(_valid_costs(spec, mp, mc, collection=collection, valid=valid))
    summary = _summary(cfg, collection, valid, costs)
    summary["key"] = seeds_key(spec, paths, cfg, collection)
    write_json(paths.model_dir(spec.name, collection) / SUMMARY, summary)
    if progress:
        print(
            f"[{spec.name}] {collection}: {n} seeds, valid {summary['member_mean']:.4f} "
            f"+- {summary['member_std']:.4f} per seed, {summary['averaged_valid_score']:.4f} averaged"
        )
    return summary


def _summary(
    cfg: Config, collection: str, valid: list[GraphData], costs: list[dict[str, ValidCosts]]
) -> dict[str, Any]:
    """The members' validation scores, their mean and spread, and the score of their average."""
    kind = kind_of(collection)
    graphs = {g.id: g for g in valid}

    def score(per_graph: dict[str, np.ndarray]) -> float:
        s = [
            graph_score(kind, c, graphs[i].config_runtime[costs[0][i].configs]) for i, c in per_graph.items()
        ]
        s = [x for x in s if not math.isnan(x)]
        return float(np.mean(s)) if s else math.nan

    member_scores = [score({i: m[i].costs for i in m}) for m in costs]
    averaged = score(
        {i: average_costs([m[i].costs for m in costs], cfg.ensemble.normalize) for i in costs[0]}
    )
    return {
        "seeds": [cfg.seed + k for k in range(len(costs))],
        "normalize": cfg.ensemble.normalize,
        "member_valid_scores": member_scores,
        "member_mean": float(np.mean(member_scores)),
        "member_std": float(np.std(member_scores)),
        "averaged_valid_score": averaged,
    }


def trained_seeds(spec: ModelSpec, paths: Paths, collection: str) -> dict[str, Any] | None:
    """The `seeds.json` summary of a collection's seed members, or None where one model was trained.

    Raises:
        TpurankError: when the file is unreadable.
    """
    path = paths.model_dir(spec.name, collection) / SUMMARY
    if not path.exists():
        return None
    try:
        summary = json.loads(path.read_text())
        return summary if summary["seeds"] and summary["normalize"] else None
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise TpurankError(
            f"{path}: unreadable seed summary ({e}); retrain with `train --model {spec.name}`"
        ) from None


def predict_seeds(
    spec: ModelSpec, paths: Paths, cfg: Config, collection: str, split: str, progress: bool = True
) -> dict[str, np.ndarray]:
    """Graph ID -> averaged normalised cost per original config (lower = faster) over the members
    that training recorded in `seeds.json` (as the architecture, the seed count is the trained
    model's, not the predicting config's: a models dataset packed with another config predicts the same).

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config with the collection's overrides applied (its prediction settings are read).
        collection: one of COLLECTIONS.
        split: train, valid or test.
        progress: show progress bars.
    """
    summary = trained_seeds(spec, paths, collection)
    n, how = (len(summary["seeds"]), summary["normalize"]) if summary else (1, cfg.ensemble.normalize)
    files = member_files(spec, paths, collection, n)
    first = load_model(spec, files[0], collection).checkpoint  # checked: ours, of this family and collection
    for f in files[1:]:  # every member trained and readable, before any graph is read
        load_checkpoint(f)
    dims = Recipe.from_saved(first["recipe"]).dim_features  # the graphs as the members read them
    graphs = load_split(paths, collection, split, progress, dim_features=dims)
    members = [
        predict_collection(
            spec,
            member_paths(paths, k),
            member_config(spec, cfg, k),
            collection=collection,
            split=split,
            graphs=graphs,
            progress=progress,
        )
        for k in range(n)
    ]
    return {gid: average_costs([m[gid] for m in members], how) for gid in members[0]}


def forget_seeds(spec: ModelSpec, paths: Paths, collection: str) -> None:
    """Drop a stale `seeds.json` once one model is trained: `predict` then uses that model alone."""
    (paths.model_dir(spec.name, collection) / SUMMARY).unlink(missing_ok=True)
