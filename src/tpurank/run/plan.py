"""The whole run's time budget (`all --budget 2h`), split over collections and seeds before training.

`all` is data, prepare, features, LightGBM, the neural rankers, predictions and the submission. Only
the neural rankers' training is elastic (a time share per model and collection). So the plan sets
aside an estimate of everything else, keeps a safety margin, and splits the rest.

- Over collections by need: the 1st place's relative optimizer-step counts (each collection's
  default `gnn.max_steps`) times the configs an optimizer step sees times the nodes a pruned train
  graph keeps (read from a few files' array headers): what an optimizer step costs. Tile graphs are
  small, so tile gets little. With `budget.split = "steps"` (the demo) by each collection's expected
  time to its `max_steps`.
- Over seeds: equal shares of their collection's time; over the processes `train` runs side by
  side on small data (tpurank.run.shares).
- The official baseline, when trained, gets a fifth of the neural training time.

`all` prints a first plan at the start, from estimates. Just before the first neural training it
plans again with the time the run has really spent (data, prepare, features, LightGBM) and the
predictions still to come (their estimate scaled by how far off the done steps' estimates were),
and saves that plan beside the report: a rerun with the same budget, config and data takes it
again, so its steps are up to date, whatever the clock says. Each share becomes optimizer steps
when the plan is made: those its minutes pay at the planned pace (tpurank.train.pace), written into
the collection's `max_steps` beside its `time_budget_min`. A training runs those optimizer steps,
its learning rate scheduled over them, so it is a function of its data, config, seed and plan, not
of the clock; the minutes only cap it on a machine slower than planned.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.atomic import write_json
from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config, to_dict
from tpurank.core.config_files import Layer
from tpurank.core.declared import run_io
from tpurank.core.errors import DataError
from tpurank.core.names import NEURAL_MODELS, Model
from tpurank.core.paths import Paths
from tpurank.core.profiles import format_duration
from tpurank.core.staleness import Files, current
from tpurank.data.npz import member_shapes
from tpurank.run.shares import processes, span_s, split_span
from tpurank.run.step_costs import fixed_estimate_s
from tpurank.train.pace import (
    expected_s,
    neural_predict_scale,
    planned_section,
    planned_steps,
    sample_files,
    typical_kept,
)

MARGIN = 0.08  # of the budget, kept free: validations after the last optimizer step, noisy estimates
BASELINE_SHARE = 0.2  # of the neural training time, when the official baseline is trained too
SHARE_UNIT = 0.01  # minutes: shares are rounded to it (tpurank.run.shares.split_minutes)
# the least a seed trains is the config's budget.min_share_min (a few optimizer steps are no model): a
# budget that cannot pay it trains fewer seeds, or is refused before any work (`minimum_budget_s`)
NEIGHBOURHOOD = 4  # nodes kept per configurable node by the 1-hop pruning, roughly


@dataclass(frozen=True)
class Share:
    """One model's training time for one collection: `minutes` per seed, `seeds` seeds;
    `expected_min`, one seed's expected minutes to its `max_steps` (0: not known); `steps`, the
    optimizer steps each seed runs, those its minutes pay at that pace (0: not planned, a plan saved
    before they were: the config's, capped by the minutes)."""

    model: str
    collection: str
    seeds: int
    minutes: float
    expected_min: float = 0.0
    steps: int = 0

    @property
    def likely_min(self) -> float:
        """The minutes a seed is expected to train: its share, or its optimizer steps where they end it
        sooner."""
        return min(self.minutes, self.expected_min) if self.expected_min > 0 else self.minutes


@dataclass(frozen=True)
class Plan:
    """The split of a budget (seconds) into the estimate of the steps it cannot shorten, the margin
    and the shares (in the order they train). `over_s`: how far the least shares reach past the
    budget (0 when they fit); `at_once`: collections a neural model trains side by side
    (tpurank.run.shares)."""

    budget_s: float
    fixed_s: float
    shares: list[Share]
    lgbm_rounds: int | None
    over_s: float = 0.0
    at_once: int = 1

    def training_wall_s(self, model: str | None = None, likely: bool = False) -> float:
        """Wall seconds of the neural training (of `model` alone, when given): each model's shares,
        or the time each is expected to take (`likely`: the plan's estimate), as `train` runs them."""
        models = dict.fromkeys(s.model for s in self.shares if model in (None, s.model))
        return sum(
            span_s(
                [60 * s.seeds * (s.likely_min if likely else s.minutes) for s in self.shares if s.model == m],
                self.at_once,
            )
            for m in models
        )

    @property
    def training_s(self) -> float:
        return self.training_wall_s()

    def describe(self) -> str:
        """The plan as `all` prints it at the start: each share, and where a training's optimizer
        steps are expected to end it sooner, when; then the training time expected."""
        side = f" ({self.at_once} collections at a time)" if self.at_once > 1 else ""
        lines = [
            f"[all] budget {format_duration(self.budget_s)}: about {format_duration(self.fixed_s)} for "
            f"data, features, LightGBM and predictions, {format_duration(self.training_s)} of neural "
            f"training{side}, {format_duration(self.budget_s * MARGIN)} kept free"
        ]
        if self.lgbm_rounds is not None:
            lines.append(f"[all]   lgbm: up to {self.lgbm_rounds} rounds per collection (early stopping)")
        for s in self.shares:
            ends = s.likely_min < s.minutes
            ending = f" (its steps: about {format_duration(s.likely_min * 60)})" if ends else ""
            steps = f", {s.steps} steps" if s.steps else ""
            lines.append(
                f"[all]   {s.model:<8} {s.collection:<20} {s.seeds} x {format_duration(s.minutes * 60)}"
                f"{steps}{ending}"
            )
        if self.shares:
            lines.append(
                "[all]   (each share is a limit: a training that reaches its gnn.max_steps ends sooner; "
                f"the training expected to take about {format_duration(self.training_wall_s(likely=True))})"
            )
        return "\n".join(lines)


def graph_size(data_root: Path, collection: str) -> float:
    """The typical nodes an optimizer step sees per graph and config, for the split by need: the mean
    over a few train files (`tpurank.train.pace.sample_files`) of the nodes pruning keeps, read from the arrays'
    headers. Layout keeps the configurable nodes and their neighbours, about
    NEIGHBOURHOOD times as many, never more than the graph."""
    sizes = []
    for f in sample_files(data_root, collection):
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
    """A collection's relative training need: the 1st place's optimizer steps x configs an optimizer
    step sees x nodes a graph."""
    optimizer_steps = DEFAULT_COLLECTIONS.get(collection, {}).get(Model.GNN, {}).get("max_steps", 1)
    configs = cfg.for_collection(collection).gnn.configs_per_graph
    return optimizer_steps * configs * nodes


def model_shares(models: list[str]) -> dict[str, float]:
    """Each neural model's share of the neural training time (the baseline a fifth when trained)."""
    neural = [m for m in NEURAL_MODELS if m in models]
    if len(neural) == 1:
        return {neural[0]: 1.0}
    return {m: {Model.GNN: 1.0 - BASELINE_SHARE, Model.BASELINE: BASELINE_SHARE}[m] for m in neural}


def least_share(cfg: Config, expected_min: float) -> float:
    """A seed's least share in minutes: `budget.min_share_min`, or the expected time of its
    `max_steps` where that is shorter (0: not known), and at least SHARE_UNIT (a share of 0 minutes
    would be no limit)."""
    least = cfg.budget.min_share_min
    return max(SHARE_UNIT, min(least, expected_min or least))


def minimum_budget_s(
    cfg: Config,
    collections: list[str],
    models: list[str],
    fixed_s: float,
    at_once: int = 1,
    data_root: Path | None = None,
) -> float:
    """The smallest budget that fits: the steps it cannot shorten, one seed of each neural model at
    its least share on every collection (`least_share`, from the data's graphs when `data_root` is
    given), `at_once` side by side (`processes`), and the margin."""
    training = 0.0
    for m, part in model_shares(models).items():
        floors = [
            least_share(
                cfg,
                expected_s(m, cfg, c, typical_kept(data_root, c, cfg.for_collection(c).prepare.hops)) / 60,
            )
            if data_root is not None
            else cfg.budget.min_share_min
            for c in collections
        ]
        training = max(training, span_s([60 * f for f in floors], at_once) / part)
    return (fixed_s + training) / (1 - MARGIN)


def make_plan(
    budget_s: float,
    cfg: Config,
    data_root: Path,
    collections: list[str],
    models: list[str],
    spent_s: float = 0.0,
    fixed_left_s: float | None = None,
    slowdown: float = 1.0,
) -> Plan:
    """Split `budget_s` seconds of a whole `all` run (see the module docstring).

    Args:
        budget_s: the whole run's time.
        cfg: the run's config (seeds and configs per optimizer step per collection).
        data_root: the dataset (its files' sizes).
        collections: the collections the run trains.
        models: the learned models it trains (lgbm, gnn, baseline).
        spent_s: seconds the run has already spent (`replan`: just before the training starts).
        fixed_left_s: seconds the steps other than neural training still need (default: the
            estimate from the data's size).
        slowdown: how much slower than expected this machine ran the steps of `all` so far (the
            second look): the trainings' expected times grow with it.
    """
    fixed_left = fixed_estimate_s(cfg, data_root, collections) if fixed_left_s is None else fixed_left_s
    left = max(0.0, budget_s * (1 - MARGIN) - spent_s - fixed_left)
    at_once, order = processes(data_root, collections)
    shares: list[Share] = []
    if neural := model_shares(models):
        nodes = {c: graph_size(data_root, c) for c in collections}
        kept = {c: typical_kept(data_root, c, cfg.for_collection(c).prepare.hops) for c in collections}
        speed = slowdown * neural_predict_scale(cfg.profile)  # a GPU trains faster too
        for m, part in neural.items():
            expected = {c: expected_s(m, cfg, c, kept[c]) * speed for c in collections}
            seeds = {c: cfg.for_collection(c).gnn.seeds if m == Model.GNN else 1 for c in collections}
            if cfg.budget.split == "steps":
                weights = {c: expected[c] * seeds[c] for c in collections}
            else:
                weights = {c: need(cfg, c, nodes[c]) for c in collections}
            floor = {c: least_share(cfg, expected[c] / 60) for c in collections}
            minutes, seeds = split_span(left * part / 60, weights, seeds, floor, order, at_once)
            caps = {c: getattr(cfg.for_collection(c), m).max_steps for c in collections}
            planned = {c: planned_steps(caps[c], minutes[c] * 60, expected[c]) for c in collections}
            shares += [
                Share(m, c, seeds[c], minutes[c], round(expected[c] / 60, 4), planned[c]) for c in order
            ]
    lgbm = cfg.lgbm.num_boost_round if Model.LGBM in models else None
    plan = Plan(budget_s, spent_s + fixed_left, shares, lgbm, at_once=at_once)
    over = plan.fixed_s + plan.training_s - budget_s  # the margin spent too: the run ends past its budget
    return dataclasses.replace(plan, over_s=round(over, 1) if over > 5.0 else 0.0)  # rounding is no overrun


def plan_key(budget_s: float, cfg: Config, paths: Paths, collections: list[str], models: list[str]) -> str:
    """What a plan was made for (`StageIO.piece_key` on `all`'s declaration): the budget, what the
    split reads of the config (the neural models' sections, per collection too, and the profile),
    the models, and the data's files."""
    io = run_io(paths)
    tables = {c: {k: t.get(k) for k in NEURAL_MODELS} for c, t in to_dict(cfg)["collections"].items()}
    what = {"budget": budget_s, "tables": tables, "collections": collections, "models": models}
    return io.piece_key(what, [Files(paths.npz, "**/*.npz")], cfg, io.sections)


KEPT_PLANS = 8  # plans kept in the file: a run of a few collections does not lose the full run's


def save_plan(path: Path, key: str, plan: Plan) -> None:
    """Keep the plan a run made just before training, so that a rerun with nothing to redo before
    it trains to the same config (and finds its steps up to date) instead of planning again."""
    plans = _read_plans(path)
    plans.pop(key, None)
    plans[key] = dataclasses.asdict(plan)
    write_json(path, {"plans": dict(list(plans.items())[-KEPT_PLANS:])})


def saved_plan(path: Path, key: str) -> Plan | None:
    """The plan saved for `key`, None when there is none or it is not a plan (a hand edit, a
    damaged file: said in one line, and the run plans again)."""
    p = next((plan for k, plan in _read_plans(path).items() if current(k, key)), None)
    if p is None:
        return None
    try:
        return _checked_plan(p)
    except (KeyError, TypeError, ValueError) as e:
        print(f"[all] {path}: the saved plan is not valid ({e}); planning again", file=sys.stderr)
        return None


def _number(value: object, name: str, whole: bool = False) -> float:
    """`value` as a finite number >= 0 (an int when `whole`), else ValueError naming `name`."""
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a {'whole ' if whole else ''}number >= 0, got {value!r}")
    return value


def _checked_plan(p: object) -> Plan:
    """A saved plan read back, every field checked by type (ValueError names the first bad one)."""
    shares = []
    if not isinstance(p, dict) or not isinstance(p.get("shares"), list):
        raise ValueError("no list of shares")
    for x in p["shares"]:
        if not isinstance(x, dict) or x.get("model") not in NEURAL_MODELS:
            raise ValueError(f"a share without a neural model: {x!r}")
        if x.get("collection") not in COLLECTIONS:
            raise ValueError(f"a share of an unknown collection: {x.get('collection')!r}")
        seeds = int(_number(x["seeds"], "seeds", whole=True))
        minutes = float(_number(x["minutes"], "minutes"))
        if seeds < 1 or minutes <= 0:
            raise ValueError(f"a share of {seeds} seeds x {minutes} minutes")
        expected = float(_number(x.get("expected_min", 0.0), "expected_min"))
        steps = int(_number(x.get("steps", 0), "steps", whole=True))
        shares.append(Share(x["model"], x["collection"], seeds, minutes, expected, steps))
    rounds = p["lgbm_rounds"]
    rounds = None if rounds is None else int(_number(rounds, "lgbm_rounds", whole=True))
    budget, fixed = float(_number(p["budget_s"], "budget_s")), float(_number(p["fixed_s"], "fixed_s"))
    over = float(_number(p.get("over_s", 0.0), "over_s"))
    at_once = int(_number(p.get("at_once", 1), "at_once", whole=True))
    if at_once < 1:
        raise ValueError(f"at_once must be at least 1, got {at_once}")
    return Plan(budget, fixed, shares, rounds, over, at_once)


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
    """`cfg` with each share as its collection's `<model>.time_budget_min` and its planned optimizer
    steps as `<model>.max_steps` (the warm-up scaled alike: tpurank.train.pace.planned_section), where
    the user set no time budget of their own (`train` then plans the optimizer steps from it), and the
    GNN's seeds where the budget pays fewer than the config asks."""
    collections = copy.deepcopy(cfg.collections)
    for s in plan.shares:
        section = collections.setdefault(s.collection, {}).setdefault(s.model, {})
        own = getattr(cfg.for_collection(s.collection), s.model)
        if s.model == Model.GNN and s.seeds < own.seeds:
            section["seeds"] = s.seeds
        if not user_set_time(layers, s.model, s.collection):
            section["time_budget_min"] = s.minutes
            if 0 < s.steps < own.max_steps:
                section.update(planned_section(own, s.steps))
    return dataclasses.replace(cfg, collections=collections)
