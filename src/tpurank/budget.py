"""The whole run's time budget (`all --budget 2h`), split over collections and seeds before training.

`all` is data, prepare, features, LightGBM, the neural rankers, predictions and the submission. Only
the neural rankers' training is elastic (a time budget per model: `gnn.time_budget_min`, whose
learning-rate schedule follows the time as well as the steps, so a short share still anneals). So
the plan sets aside an estimate of everything else, keeps a safety margin, and splits the rest.

- Over collections by need: the 1st place's relative step counts (each collection's default
  `gnn.max_steps`) times the configs a step sees times the nodes a pruned train graph keeps (read
  from a few files' array headers): what a step costs. Tile graphs are small, so tile gets little.
- Over seeds: equal shares of their collection's time.
- The official baseline, when trained, gets a fifth of the neural training time.

`all` prints a first plan at the start, from estimates. Just before the first neural training it
plans again with the time the run has really spent (data, prepare, features, LightGBM) and the
predictions still to come (their estimate scaled by how far off the done stages' estimates were),
and saves that plan beside the report: a rerun with the same budget, config and data takes it
again, so its steps are up to date, whatever the clock says. Each training measures its own step
rate and fits its learning-rate schedule to its share.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.atomic import write_json
from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.collections import collection_dir
from tpurank.core.config import Config, to_dict
from tpurank.core.config_files import Layer
from tpurank.core.errors import DataError
from tpurank.core.profiles import format_duration
from tpurank.data.npz import member_shapes

MARGIN = 0.08  # of the budget, kept free: validations after the last step, noise in the estimates
BASELINE_SHARE = 0.2  # of the neural training time, when the official baseline is trained too
MIN_SHARE_MIN = 1.0  # minutes: the least a model trains (tile needs little, but a few steps are no model)
# minutes: the least of all, when the budget cannot pay even MIN_SHARE_MIN (a time budget of 0 means
# none, so a spent budget must still end every training)
LEAST_MIN = 0.1
SIZE_FILES = 16  # train files read per collection for its typical graph size (headers only)
NEIGHBOURHOOD = 4  # nodes kept per configurable node by the 1-hop pruning, roughly
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
        if self.shares:
            lines.append(
                "[all]   (each share is a limit: a training that reaches its gnn.max_steps ends sooner)"
            )
        return "\n".join(lines)


def data_bytes(data_root: Path, collection: str) -> float:
    """Bytes of the collection's npz files (stat only): what the fixed stages' time grows with."""
    folder = data_root / "npz_all" / "npz" / collection_dir(collection)
    return float(sum(f.stat().st_size for f in folder.glob("*/*.npz")))


def graph_size(data_root: Path, collection: str) -> float:
    """The typical nodes a training step sees per graph and config: the mean over up to SIZE_FILES
    train files (the files there are, without train files) of the nodes pruning keeps, read from the
    arrays' headers. Layout keeps the configurable nodes and their neighbours, about
    NEIGHBOURHOOD times as many, never more than the graph."""
    folder = data_root / "npz_all" / "npz" / collection_dir(collection)
    files = sorted(folder.glob("train/*.npz")) or sorted(folder.glob("*/*.npz"))
    picked = files[:: max(1, len(files) // SIZE_FILES)][:SIZE_FILES]
    sizes = []
    for f in picked:
        try:
            shapes = {k: v[0] for k, v in member_shapes(f).items()}
            nodes = shapes["node_opcode"][0]
            if "node_config_ids" in shapes:
                nodes = min(nodes, NEIGHBOURHOOD * shapes["node_config_ids"][0])
        except (
            DataError,
            OSError,
            KeyError,
            IndexError,
        ):  # `check` reports bad files; a typical size will do
            continue
        sizes.append(float(nodes))
    return sum(sizes) / len(sizes) if sizes else 1.0


def need(cfg: Config, collection: str, nodes: float) -> float:
    """A collection's relative training need: the 1st place's steps x configs a step x nodes a graph."""
    steps = DEFAULT_COLLECTIONS.get(collection, {}).get("gnn", {}).get("max_steps", 1)
    configs = cfg.for_collection(collection).gnn.configs_per_graph
    return steps * configs * nodes


def split_minutes(total: float, weights: dict[str, float], seeds: dict[str, int]) -> dict[str, float]:
    """Minutes per seed of each collection: `total` in proportion to `weights`, each at least
    MIN_SHARE_MIN (less when `total` cannot pay every floor), the floors paid for by the others (so
    the shares still add up to `total`)."""
    floor = max(LEAST_MIN, min(MIN_SHARE_MIN, total / max(1, sum(seeds.values()))))
    floored: set[str] = set()
    while True:
        free = total - sum(floor * seeds[c] for c in floored)
        rest = {c: w for c, w in weights.items() if c not in floored}
        norm = sum(rest.values()) or 1.0
        out = {c: free * w / norm / seeds[c] for c, w in rest.items()}
        low = {c for c, m in out.items() if m < floor}
        if not low:
            return {**{c: round(floor, 2) for c in floored}, **{c: round(m, 2) for c, m in out.items()}}
        floored |= low


def make_plan(
    budget_s: float,
    cfg: Config,
    data_root: Path,
    collections: list[str],
    models: list[str],
    spent_s: float = 0.0,
    fixed_left_s: float | None = None,
) -> Plan:
    """Split `budget_s` seconds of a whole `all` run (see the module docstring).

    Args:
        budget_s: the whole run's time.
        cfg: the run's config (seeds and configs per step per collection).
        data_root: the dataset (its files' sizes).
        collections: the collections the run trains.
        models: the learned models it trains (lgbm, gnn, baseline).
        spent_s: seconds the run has already spent (`replan`: just before the training starts).
        fixed_left_s: seconds the stages other than neural training still need (default: all of
            the estimate).
    """
    total_gb = sum(data_bytes(data_root, c) for c in collections) / 1e9
    fixed = FIXED_S_MIN + total_gb * FIXED_S_PER_GB.get(cfg.profile, FIXED_S_PER_GB["cpu"])
    fixed_left = fixed if fixed_left_s is None else fixed_left_s
    neural = [m for m in ("gnn", "baseline") if m in models]
    left = max(0.0, budget_s * (1 - MARGIN) - spent_s - fixed_left)
    shares: list[Share] = []
    if neural:
        weights = {c: need(cfg, c, graph_size(data_root, c)) for c in collections}
        model_share = {"gnn": 1.0 - BASELINE_SHARE, "baseline": BASELINE_SHARE}
        if len(neural) == 1:
            model_share = {neural[0]: 1.0}
        for m in neural:
            seeds = {c: cfg.for_collection(c).gnn.seeds if m == "gnn" else 1 for c in collections}
            minutes = split_minutes(left * model_share[m] / 60, weights, seeds)
            shares += [Share(m, c, seeds[c], minutes[c]) for c in collections]
    lgbm = cfg.lgbm.num_boost_round if "lgbm" in models else None
    return Plan(budget_s=budget_s, fixed_s=spent_s + fixed_left, shares=shares, lgbm_rounds=lgbm)


def plan_key(budget_s: float, cfg: Config, data_root: Path, collections: list[str], models: list[str]) -> str:
    """What a plan was made for: the budget, what the split reads of the config (the neural models'
    sections, per collection too, and the profile), the models, and the data's files."""
    d = to_dict(cfg)
    neural = {k: d[k] for k in ("gnn", "baseline", "profile")}
    tables = {c: {k: t.get(k) for k in ("gnn", "baseline")} for c, t in d["collections"].items()}
    files = [
        (str(f.relative_to(data_root)), f.stat().st_size)
        for f in sorted(data_root.glob("npz_all/npz/**/*.npz"))
    ]
    what = {"budget": budget_s, "config": neural, "tables": tables, "collections": collections}
    what |= {"models": models, "files": files}
    return hashlib.sha256(json.dumps(what, sort_keys=True, default=str).encode()).hexdigest()[:16]


KEPT_PLANS = 8  # plans kept in the file: a run of a few collections does not lose the full run's


def save_plan(path: Path, key: str, plan: Plan) -> None:
    """Keep the plan a run made just before training, so that a rerun with nothing to redo before
    it trains to the same config (and finds its steps up to date) instead of planning again."""
    plans = _read_plans(path)
    plans.pop(key, None)
    plans[key] = dataclasses.asdict(plan)
    write_json(path, {"plans": dict(list(plans.items())[-KEPT_PLANS:])})


def saved_plan(path: Path, key: str) -> Plan | None:
    """The plan saved for `key`, None when there is none."""
    p = _read_plans(path).get(key)
    try:
        return Plan(p["budget_s"], p["fixed_s"], [Share(**x) for x in p["shares"]], p["lgbm_rounds"])
    except (KeyError, TypeError):
        return None


def _read_plans(path: Path) -> dict:
    try:
        plans = json.loads(path.read_text()).get("plans", {})
    except (OSError, ValueError, AttributeError):
        return {}
    return plans if isinstance(plans, dict) else {}


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
