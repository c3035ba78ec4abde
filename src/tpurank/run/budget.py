"""`all` against its budget: the first plan (`first_budget`: the last run's, else one from the steps'
estimates, refused before any work when the budget cannot pay it), each step's expected seconds,
the plan as the run spends it (with the second look just before neural training), and the lines
that say how the time goes.

What the budget cannot shorten is every step but neural training: a step up to date costs nothing,
one that ran before with the same options costs what it took then, any other its share of the
estimate from the data's size (tpurank.run.step_costs). Neural training gets the rest (the plan).
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass

from tpurank.core.config import Config
from tpurank.core.config_files import Layer
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.profiles import DEFAULT_BUDGET, default_budget_s, format_duration
from tpurank.run.plan import (
    Plan,
    apply_plan,
    make_plan,
    minimum_budget_s,
    plan_key,
    save_plan,
    saved_plan,
)
from tpurank.run.records import RECORDS
from tpurank.run.shares import TRAIN_START_S, processes
from tpurank.run.stages import StageRun, step_namespace
from tpurank.run.step_costs import seeds_scoring_s, step_estimates_s
from tpurank.run.steps import Step


def expect_steps(
    steps: list[Step], paths: Paths, cfg: Config, collections: list[str], force: bool = False
) -> float:
    """Set each step's expected seconds but neural training's, and return their sum: what the budget
    cannot shorten. A step up to date now costs nothing, unless `--force` runs it anyway, a step before
    it will run (and may change what it reads), or it reads what neural training writes (a new plan
    retrains); one that ran before on the same inputs costs what it took then; any other its estimate
    from the data's size (tpurank.run.step_costs)."""
    fixed = [s for s in steps if not s.name.neural_training]
    sized = step_estimates_s([s.name for s in fixed], cfg, paths.data, collections)
    trains_neural = any(s.name.neural_training for s in steps)
    records, upstream_runs = paths.reports / RECORDS, force
    for s in fixed:
        s.estimate = sized[s.name]
        if records.is_dir() and any(records.glob(f"{s.options.COMMAND}-*.json")):
            run = _stage_run(s, paths, cfg)
            neural = trains_neural and s.name.reads_neural()
            if run is not None and not (neural or upstream_runs) and run.up_to_date():
                s.estimate = 0.0
            elif run is not None and (last := run.last_seconds()) is not None:
                s.estimate = last
        upstream_runs |= s.estimate > 0
        s.planned = s.estimate
    for s in steps:
        if s.name.neural_training:
            s.overhead = seeds_scoring_s(s.name.model, cfg, paths.data, collections) + TRAIN_START_S
    return sum(s.estimate for s in fixed) + sum(s.overhead for s in steps)


def _stage_run(step: Step, paths: Paths, cfg: Config) -> StageRun | None:
    """The step's stage run (its record), None when it cannot be known yet (e.g. a prepare setting
    changed: `prepare` runs first, and the stages after it are checked then)."""
    module = sys.modules[type(step.options).__module__]
    try:
        return StageRun(module, step_namespace(step.options.COMMAND, step.options, paths, cfg))
    except (TpurankError, OSError):
        return None


def estimate_training(steps: list[Step], plan: Plan) -> None:
    """The neural training steps' expected seconds: the wall time the plan expects of their model's
    trainings (each its share, or less where its optimizer steps end it sooner), never the unspent
    budget."""
    for s in steps:
        if s.name.neural_training:
            s.estimate = s.planned = plan.training_wall_s(s.name.model, likely=True) + s.overhead


@dataclass
class RunBudget:
    """The budget as `all` spends it: the plan, and the second look just before neural training.

    Args:
        seconds: the whole run's budget.
        plan: the current plan.
        base: the run's config without any plan.
        layers: the config's layers (a user's own time budget wins over the plan's).
        remake: (seconds spent, seconds the other steps still need, how much slower than
            expected the machine ran) -> a new plan.
        save: keeps a plan for reruns (budget.save_plan).
        saved: the plan a run with the same budget, config and data trained with, if any.
        final: the plan is the one to train with (the second look taken).
    """

    seconds: float
    plan: Plan
    base: Config
    layers: list[Layer]
    remake: Callable[[float, float, float], Plan]
    save: Callable[[Plan], None]
    saved: Plan | None = None
    final: bool = False

    def config(self) -> Config:
        return apply_plan(self.base, self.plan, self.layers)

    def second_look(self, steps: list[Step], k: int, elapsed: float) -> Config:
        """The plan to train with, before step k (the first neural training). The saved one when every
        step before it was up to date (a rerun: the same config, so finished models are kept); else
        a new plan with the time really spent, and the other steps' remaining estimate scaled by
        how far off their done part was."""
        self.final = True
        if self.saved is not None and all(s.skipped for s in steps[: k - 1]):
            self.plan = self.saved
            print("[all] the plan the last run with this budget trained with", file=sys.stderr)
            return self.config()
        # how much slower than expected the steps that were expected to take time ran (the machine's
        # load now); a step expected up to date that ran anyway is in `elapsed` already
        done = [s for s in steps[: k - 1] if not s.skipped and s.planned > 0]
        off = max(1.0, sum(s.seconds for s in done) / max(1e-9, sum(s.planned for s in done)))
        later = sum(s.overhead if s.name.neural_training else s.planned for s in steps[k - 1 :])
        self.plan = self.remake(elapsed, later * off, off)
        self.save(self.plan)
        print(
            f"[all] the plan again, {format_duration(elapsed)} spent:\n{self.plan.describe()}",
            file=sys.stderr,
        )
        if self.plan.over_s > 0:
            print(
                f"[all] warning: the time left cannot pay each model's least share (budget.min_share_min): "
                f"the run will end about {format_duration(self.plan.over_s)} past its budget",
                file=sys.stderr,
            )
        for s in steps[k - 1 :]:
            trains = s.name.neural_training
            s.estimate = (
                self.plan.training_wall_s(s.name.model, likely=True) + s.overhead
                if trains
                else s.planned * off
            )
        return self.config()


PLAN_FILE = "budget-plan.json"  # in reports/: the plan the last run trained with (tpurank.run.plan)


def round_up(seconds: float) -> float:
    """A budget a user types: whole minutes above ten minutes, else tens of seconds."""
    grain = 60 if seconds > 600 else 10
    return math.ceil(seconds / grain) * grain


def first_budget(
    args: argparse.Namespace,
    paths: Paths,
    budget_s: float | None,
    subset: list[str],
    models: list[str],
    steps: list[Step],
) -> RunBudget:
    """The run's budget (`--budget`, else the config's `budget.default_min`, else the profile's) and
    its first plan, printed: the plan saved by the last run for the same budget, config and data,
    else one from the steps' estimates. A default of the config's (the demo's) that cannot pay a
    model added with `--models` grows to the smallest budget that fits, in one line.

    Raises:
        TpurankError: before any work, when `--budget` or the profile's default cannot pay the steps
            it cannot shorten and each neural model's least share: the message names the smallest
            budget that fits.
    """
    cfg, named = args.cfg, budget_s is not None
    budget_s = budget_s or default_budget_s(cfg)
    where = paths.reports / PLAN_FILE
    saved = None if args.force else saved_plan(where, plan_key(budget_s, cfg, paths, subset, models))
    fixed = expect_steps(steps, paths, cfg, subset, force=args.force)
    least = minimum_budget_s(cfg, subset, models, fixed, processes(paths.data, subset)[0], paths.data)
    if saved is None and budget_s < least:
        if named or cfg.budget.default_min == 0:
            raise TpurankError(refusal(cfg, budget_s, named, fixed, least))
        print(
            f"[all] the default budget {format_duration(budget_s)} (budget.default_min) cannot pay the steps "
            f"it cannot shorten and each neural model's least share here: the run takes the smallest that "
            f"fits, {format_duration(round_up(least))}",
            file=sys.stderr,
        )
        budget_s = round_up(least)
        saved = None if args.force else saved_plan(where, plan_key(budget_s, cfg, paths, subset, models))
    first = saved or make_plan(budget_s, cfg, paths.data, subset, models, fixed_left_s=fixed)
    estimate_training(steps, first)
    how = "the plan of the last run with this budget" if saved else "a first plan from estimates"
    print(f"[all] {how} (made again before training unless nothing before it changed):", file=sys.stderr)
    print(first.describe(), file=sys.stderr)
    key = plan_key(budget_s, cfg, paths, subset, models)
    return RunBudget(
        seconds=budget_s,
        plan=first,
        base=cfg,
        layers=args.layers,
        remake=lambda spent, left, slow: make_plan(
            budget_s, cfg, paths.data, subset, models, spent, left, slowdown=slow
        ),
        save=lambda p: save_plan(where, key, p),
        saved=saved,
    )


def refusal(cfg: Config, budget_s: float, named: bool, fixed: float, least: float) -> str:
    """Why a budget cannot be kept, in one line naming the smallest that fits."""
    which = (
        f"--budget {format_duration(budget_s)}"
        if named
        else f"the {cfg.profile} profile's default budget {DEFAULT_BUDGET[cfg.profile]}"
    )
    return (
        f"{which} cannot be kept: the steps it cannot shorten need about {format_duration(fixed)} and "
        f"each neural model at least {cfg.budget.min_share_min:g} min per collection; the smallest "
        f"budget that fits is {format_duration(round_up(least))} (--budget)"
    )


def progress_line(k: int, steps: list[Step], step: Step, elapsed: float, budget_s: float) -> str:
    """`[all] step k/N name: elapsed, about X to go (the plan's estimate), the budget`: what is left
    is the steps' expected seconds (a training's share, or less where its steps end it sooner),
    never the budget's remainder."""
    left = sum(s.estimate for s in steps[k - 1 :])
    return (
        f"[all] step {k}/{len(steps)} {step.name}: {format_duration(elapsed)} elapsed, about "
        f"{format_duration(left)} to go by the plan (budget {format_duration(budget_s)})"
    )


def budget_line(seconds: float, budget_s: float) -> str:
    """How the run's time compares with its budget."""
    gap = budget_s - seconds
    side = "under" if gap >= 0 else "OVER"
    return (
        f"total {format_duration(seconds)}: {format_duration(abs(gap))} {side} the budget of "
        f"{format_duration(budget_s)} ({100 * seconds / budget_s:.0f}% used)"
    )
