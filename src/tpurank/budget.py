"""The whole run's time budget (`all --budget 2h`), split over collections and seeds before training.

`all` is data, prepare, features, LightGBM, the neural rankers, predictions and the submission. Only
the neural rankers' training is elastic (a time budget per model: `gnn.time_budget_min`, whose
learning-rate schedule follows the time as well as the steps, so a short share still anneals). So
the plan sets aside an estimate of everything else, keeps a safety margin, and splits the rest.

- Over collections by need: the 1st place's relative step counts (each collection's default
  `gnn.max_steps`) times the configs a step sees times the mean size of the collection's train files
  (a graph's size and config count are what a step costs). Tile graphs are small, so tile gets little.
- Over seeds: equal shares of their collection's time.
- The official baseline, when trained, gets a fifth of the neural training time.

The plan is a function of the budget, the config, the collections and the files' sizes, never of a
clock: a rerun makes the same plan, so `all` still skips the steps that are up to date. Each
training measures its own step rate in its first steps and fits its schedule to its share.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.collections import collection_dir
from tpurank.core.config import Config, Layer
from tpurank.core.profiles import format_duration

MARGIN = 0.08  # of the budget, kept free: validations after the last step, noise in the estimates
BASELINE_SHARE = 0.2  # of the neural training time, when the official baseline is trained too
MIN_SHARE_MIN = 0.1  # minutes: below this a model trains a handful of steps
# seconds per GB of npz for everything but neural training (prepare, features, LightGBM, predictions,
# ensemble, report), from the full-scale synthetic all-five run on 2 cores (docs/scale.md: 166 s
# prepare, 155 s features + LightGBM, 780 s predictions of 11.3 GB); the GNN's predictions run on the GPU
# under the GPU profiles, so they are cheaper there
FIXED_S_PER_GB = {"cpu": 100.0, "kaggle-t4": 45.0, "gpu": 35.0}
FIXED_S_MIN = 60.0  # process start-ups and small files: what even the tiny data costs


@dataclass(frozen=True)
class Share:
    """One model's training time for one collection: `minutes` per seed, `seeds` seeds."""

    model: str
    collection: str
    seeds: int
    minutes: float


@dataclass(frozen=True)
class Plan:
    """The split of a budget (seconds) into the fixed stages' estimate, the margin and the shares."""

    budget_s: float
    fixed_s: float
    shares: list[Share]
    lgbm_rounds: int | None

    @property
    def training_s(self) -> float:
        return sum(s.minutes * 60 * s.seeds for s in self.shares)

    def describe(self) -> str:
        """The plan as `all` prints it at the start."""
        lines = [
            f"[all] budget {format_duration(self.budget_s)}: about {format_duration(self.fixed_s)} for "
            f"data, features, LightGBM and predictions, {format_duration(self.training_s)} of neural "
            f"training, {format_duration(self.budget_s * MARGIN)} kept free"
        ]
        if self.lgbm_rounds is not None:
            lines.append(f"[all]   lgbm: up to {self.lgbm_rounds} rounds per collection (early stopping)")
        for s in self.shares:
            lines.append(
                f"[all]   {s.model:<8} {s.collection:<20} {s.seeds} x {format_duration(s.minutes * 60)}"
            )
        return "\n".join(lines)


def train_bytes(data_root: Path, collection: str) -> tuple[float, float]:
    """(total bytes of the collection's npz files, mean bytes of its train files): stat only."""
    folder = data_root / "npz_all" / "npz" / collection_dir(collection)
    sizes = {
        split: [f.stat().st_size for f in (folder / split).glob("*.npz")]
        for split in ("train", "valid", "test")
    }
    train = sizes["train"] or [1]
    return float(sum(sum(v) for v in sizes.values())), sum(train) / len(train)


def need(cfg: Config, collection: str, mean_bytes: float) -> float:
    """A collection's relative training need: the 1st place's steps x configs a step x graph size."""
    steps = DEFAULT_COLLECTIONS.get(collection, {}).get("gnn", {}).get("max_steps", 1)
    configs = cfg.for_collection(collection).gnn.configs_per_graph
    return steps * configs * mean_bytes


def split_minutes(total: float, weights: dict[str, float], seeds: dict[str, int]) -> dict[str, float]:
    """Minutes per seed of each collection: `total` in proportion to `weights`, each at least
    MIN_SHARE_MIN, the floors paid for by the others (so the shares still add up to `total`)."""
    floored: set[str] = set()
    while True:
        free = total - sum(MIN_SHARE_MIN * seeds[c] for c in floored)
        rest = {c: w for c, w in weights.items() if c not in floored}
        norm = sum(rest.values()) or 1.0
        out = {c: free * w / norm / seeds[c] for c, w in rest.items()}
        low = {c for c, m in out.items() if m < MIN_SHARE_MIN}
        if not low:
            return {**{c: MIN_SHARE_MIN for c in floored}, **{c: round(m, 2) for c, m in out.items()}}
        floored |= low


def make_plan(
    budget_s: float, cfg: Config, data_root: Path, collections: list[str], models: list[str]
) -> Plan:
    """Split `budget_s` seconds of a whole `all` run (see the module docstring).

    Args:
        budget_s: the whole run's time.
        cfg: the run's config (seeds and configs per step per collection).
        data_root: the dataset (its files' sizes).
        collections: the collections the run trains.
        models: the learned models it trains (lgbm, gnn, baseline).
    """
    sizes = {c: train_bytes(data_root, c) for c in collections}
    total_gb = sum(t for t, _ in sizes.values()) / 1e9
    fixed = FIXED_S_MIN + total_gb * FIXED_S_PER_GB.get(cfg.profile, FIXED_S_PER_GB["cpu"])
    neural = [m for m in ("gnn", "baseline") if m in models]
    left = max(0.0, budget_s * (1 - MARGIN) - fixed)
    shares: list[Share] = []
    if neural:
        weights = {c: need(cfg, c, sizes[c][1]) for c in collections}
        model_share = {"gnn": 1.0 - BASELINE_SHARE, "baseline": BASELINE_SHARE}
        if len(neural) == 1:
            model_share = {neural[0]: 1.0}
        for m in neural:
            seeds = {c: cfg.for_collection(c).gnn.seeds if m == "gnn" else 1 for c in collections}
            minutes = split_minutes(left * model_share[m] / 60, weights, seeds)
            shares += [Share(m, c, seeds[c], minutes[c]) for c in collections]
    lgbm = cfg.lgbm.num_boost_round if "lgbm" in models else None
    return Plan(budget_s=budget_s, fixed_s=fixed, shares=shares, lgbm_rounds=lgbm)


def user_set_time(layers: list[Layer], model: str, collection: str) -> bool:
    """Whether the user's own `--config` or `--set` names the model's time budget (it then wins)."""
    for layer in layers:
        if not layer.source.startswith(("file ", "--set")):
            continue
        if "time_budget_min" in layer.data.get(model, {}):
            return True
        if "time_budget_min" in layer.data.get("collections", {}).get(collection, {}).get(model, {}):
            return True
    return False


def apply_plan(cfg: Config, plan: Plan, layers: list[Layer]) -> Config:
    """`cfg` with each share as its collection's `<model>.time_budget_min` (where the user set none)."""
    collections = copy.deepcopy(cfg.collections)
    for s in plan.shares:
        if user_set_time(layers, s.model, s.collection):
            continue
        section = collections.setdefault(s.collection, {}).setdefault(s.model, {})
        section["time_budget_min"] = s.minutes
    return dataclasses.replace(cfg, collections=collections)
