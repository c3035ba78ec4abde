"""`tpurank all`: the whole pipeline, from whatever data there is to a checked submission.

Data: the data root when it holds the dataset; else a Kaggle download when credentials exist; else
the synthetic `demo` dataset in `data/synthetic-demo/` (announced: its scores are not Kaggle
scores). Then every stage runs as a user would run it, on the paths and config the CLI resolved
once, with typed options built here (each stage's `Options`). Each step is skipped only when its
record (tpurank.records) still matches: same code, options and config, the same content read, and its outputs still the ones it
wrote. So a second `./run.sh all` is fast, and `all` after any manual command ends where a clean
`all` ends.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpurank.budget import LEAST_MIN, Plan, apply_plan, make_plan, plan_key, save_plan, saved_plan
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import LEARNED_MODELS, Config
from tpurank.core.config_files import Layer
from tpurank.core.errors import TpurankError
from tpurank.core.options import add_collections, add_jobs
from tpurank.core.paths import DATA_FIX, NPZ_SUBDIR, Paths, remember_data_root, synthetic_scale
from tpurank.core.profiles import DEFAULT_BUDGET, format_duration, parse_duration
from tpurank.core.staleness import Files, StageIO
from tpurank.data.download import download, have_credentials
from tpurank.features import stage as features
from tpurank.prepare import cli as prepare
from tpurank.rankers import predict, train
from tpurank.rankers.ensemble import summary_note
from tpurank.rankers.registry import UNTRAINED
from tpurank.report import validate
from tpurank.stages import StageRun, command_line, guarded, resolve_config, run_step, stage_namespace
from tpurank.submission import check
from tpurank.submission.publish import SUBMITTED_MODEL, incomplete_test_set, publish_submission

DEMO_SCALE = "demo"  # the synthetic fallback: finishes within 15 minutes on 2 cores
PLAN_FILE = "budget-plan.json"  # in reports/: the plan the last run trained with (tpurank.budget)
# rough weights of the steps that are not neural training, for the time-left estimate (their sum is the
# plan's estimate of those stages): the GNN's valid predictions score every config of every valid graph
STEP_WEIGHTS = {"prepare": 3.0, "features": 2.0, "train lgbm": 1.5, "predict gnn valid": 5.0}
STEP_WEIGHTS |= {"predict gnn test": 3.0, "predict baseline valid": 2.0, "predict baseline test": 1.0}

BANNER = """
==============================================================================
 No TpuGraphs data found and no Kaggle credentials: running on the SYNTHETIC
 '{scale}' dataset in {root}.
 Its scores measure the pipeline, they are NOT Kaggle scores. For the real data
 see README.md ("The real data").
==============================================================================
"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models",
        nargs="+",
        default=[],
        choices=LEARNED_MODELS,
        help="learned models to train besides those the ensemble uses (config ensemble.models), e.g. baseline",
    )
    p.add_argument("--force", action="store_true", help="rerun every step even if its inputs did not change")
    p.add_argument(
        "--budget",
        metavar="TIME",
        help="the whole run's time, e.g. 2h, 90m, 1h30m; split over collections and seeds before training "
        f"(default per profile: {', '.join(f'{k} {v}' for k, v in DEFAULT_BUDGET.items())})",
    )
    add_jobs(p, 0, "worker processes for prepare (0 = config / all cores)")
    add_collections(p, help="run these collections only (default: all five); the submission is then partial")


@dataclass
class Step:
    """One step of `all`: a stage's typed options (the stage's `Options`, which names it)."""

    name: str
    options: Any
    seconds: float = 0.0
    skipped: bool = False
    estimate: float = 0.0  # seconds the plan expects still (the time-left estimate; 0 once run)
    planned: float = 0.0  # seconds the first plan expected


def resolve_data(paths: Paths, seed: int) -> tuple[Path, str | None]:
    """(data root, its synthetic scale or None for real data). Real data if present, else Kaggle,
    else the synthetic demo."""
    root = paths.data
    if (root / NPZ_SUBDIR).is_dir():
        if (scale := synthetic_scale(root)) is not None:
            remember_data_root(root)  # the commands run next by hand find it (core.paths)
        return root, scale
    if paths.data_named:
        raise TpurankError(f"{root}: no dataset here (expected {NPZ_SUBDIR}/...); {DATA_FIX}")
    if have_credentials():
        return download(root), None
    from tpurank.synth import generate

    demo = Paths.demo_data(DEMO_SCALE)
    print(BANNER.format(scale=DEMO_SCALE, root=demo), file=sys.stderr)
    # generate keeps finished files, so a tree an interrupted run left behind is completed
    generate(demo, scale=DEMO_SCALE, seed=seed, progress=True)
    remember_data_root(demo)
    return demo, DEMO_SCALE


def plan(
    models: list[str], jobs: int, collections: list[str] | None = None, partial: bool = False
) -> list[Step]:
    """The steps of `all`, in order.

    Args:
        models: the learned models to train, in order.
        jobs: prepare's worker processes (0: the config's).
        collections: restrict every step that takes them (None: all five).
        partial: the test data is incomplete: the test predictions rank the files present.
    """
    subset = [c for c in COLLECTIONS if c in (collections or COLLECTIONS)]
    cs: dict[str, Any] = {} if subset == list(COLLECTIONS) else {"collections": subset}
    steps = [Step("prepare", prepare.Options(jobs=jobs or None, **cs))]
    if "lgbm" in models:
        steps.append(Step("features", features.Options(**cs)))
    steps += [Step(f"train {m}", train.Options(model=m, **cs)) for m in models]
    for m in [*UNTRAINED, *models]:
        steps.append(Step(f"predict {m} valid", predict.Options(model=m, split="valid", **cs)))
    steps.append(Step("train ensemble", train.Options(model="ensemble", **cs)))
    steps.append(Step("predict ensemble valid", predict.Options(model="ensemble", split="valid", **cs)))
    steps.append(Step("validate", validate.Options()))
    for m in [*models, SUBMITTED_MODEL]:
        steps.append(Step(f"predict {m} test", predict.Options(model=m, split="test", partial=partial, **cs)))
    return steps


def scores_table(paths: Paths, models: list[str]) -> str:
    rows = []
    for m in [*UNTRAINED, *models, SUBMITTED_MODEL]:
        side = paths.submission_file(m, "valid", ".json")
        if not side.exists():
            continue
        scores = json.loads(side.read_text()).get("scores", {})
        rows.append((m, [scores.get(c) for c in (*COLLECTIONS, "overall")]))
    head = f"{'model':<10}" + "".join(f"{c.replace('layout:', ''):>13}" for c in (*COLLECTIONS, "overall"))
    lines = [head]
    for m, vals in rows:
        lines.append(f"{m:<10}" + "".join(f"{v:>13.4f}" if v is not None else f"{'-':>13}" for v in vals))
    return "\n".join(lines)


def declare(args: argparse.Namespace) -> StageIO:
    """The reports folder (the pipeline state) is locked: a second `all` into the same --out-dir is
    refused; each step keeps its own record and locks its own folders."""
    return StageIO([], [Files(args.paths.reports)], record=False)


def models_to_train(ensemble_models: list[str], extra: list[str]) -> list[str]:
    """The ensemble's members plus the ones asked for, in training order."""
    wanted = set(ensemble_models) | set(extra)
    unknown = sorted(wanted - set(LEARNED_MODELS))
    if unknown:
        raise TpurankError(
            f"config ensemble.models: unknown model(s) {', '.join(unknown)} (known: {', '.join(LEARNED_MODELS)})"
        )
    return [m for m in LEARNED_MODELS if m in wanted]


NEURAL_TRAINING = ("train gnn", "train baseline")  # the steps whose time the budget's plan sets


def estimate_steps(steps: list[Step], plan: Plan) -> None:
    """Each step's expected seconds: its model's training shares, or its part of the fixed estimate."""
    weights = {s.name: STEP_WEIGHTS.get(s.name, 0.3) for s in steps if s.name not in NEURAL_TRAINING}
    total = sum(weights.values()) or 1.0
    for s in steps:
        model = s.name.removeprefix("train ")
        trained = [x.minutes * 60 * x.seeds for x in plan.shares if x.model == model]
        s.estimate = sum(trained) if s.name in NEURAL_TRAINING else plan.fixed_s * weights[s.name] / total
        s.planned = s.estimate


@dataclass
class RunBudget:
    """The budget as `all` spends it: the plan, and the second look just before neural training.

    Args:
        seconds: the whole run's budget.
        plan: the current plan.
        base: the run's config without any plan.
        layers: the config's layers (a user's own time budget wins over the plan's).
        remake: (seconds spent, seconds the other stages still need) -> a new plan.
        save: keeps a plan for reruns (budget.save_plan).
        saved: the plan a run with the same budget, config and data trained with, if any.
        final: the plan is the one to train with (the second look taken).
    """

    seconds: float
    plan: Plan
    base: Config
    layers: list[Layer]
    remake: Callable[[float, float], Plan]
    save: Callable[[Plan], None]
    saved: Plan | None = None
    final: bool = False

    def config(self) -> Config:
        return apply_plan(self.base, self.plan, self.layers)

    def second_look(self, steps: list[Step], k: int, elapsed: float) -> Config:
        """The plan to train with, before step k (the first neural training). The saved one when every
        step before it was up to date (a rerun: the same config, so finished models are kept); else
        a new plan with the time really spent, and the other stages' remaining estimate scaled by
        how far off their done part was."""
        self.final = True
        if self.saved is not None and all(s.skipped for s in steps[: k - 1]):
            self.plan = self.saved
            print("[all] the plan the last run with this budget trained with", file=sys.stderr)
            return self.config()
        done = [s for s in steps[: k - 1] if not s.skipped]
        off = max(1.0, sum(s.seconds for s in done) / max(1e-9, sum(s.planned for s in done)))
        later = sum(s.planned for s in steps[k - 1 :] if s.name not in NEURAL_TRAINING)
        self.plan = self.remake(elapsed, later * off)
        self.save(self.plan)
        print(
            f"[all] the plan again, {format_duration(elapsed)} spent:\n{self.plan.describe()}",
            file=sys.stderr,
        )
        if any(s.minutes <= LEAST_MIN for s in self.plan.shares):
            print(
                "[all] warning: the budget is nearly spent: each model trains a few seconds", file=sys.stderr
            )
        for s in steps[k - 1 :]:
            trained = [x.minutes * 60 * x.seeds for x in self.plan.shares if f"train {x.model}" == s.name]
            s.estimate = sum(trained) if s.name in NEURAL_TRAINING else s.planned * off
        return self.config()


def progress_line(k: int, steps: list[Step], step: Step, elapsed: float, budget_s: float) -> str:
    """`[all] step k/N name: elapsed, about X left, the budget's time left`."""
    left = sum(s.estimate for s in steps[k - 1 :])
    return (
        f"[all] step {k}/{len(steps)} {step.name}: {format_duration(elapsed)} elapsed, about "
        f"{format_duration(left)} to go, {format_duration(budget_s - elapsed)} of the budget left"
    )


def run_steps(steps: list[Step], paths: Paths, budget: RunBudget, force: bool, t0: float) -> Config:
    """Run the steps in order, skipping those whose record still matches (tpurank.records); the config
    they ran with (the budget's plan applied) is returned."""
    cfg = budget.config()
    for k, step in enumerate(steps, 1):
        if step.name in NEURAL_TRAINING and not budget.final:
            cfg = budget.second_look(steps, k, time.perf_counter() - t0)
        options = step.options
        run = StageRun(
            sys.modules[type(options).__module__], stage_namespace(options.STAGE, options, paths, cfg)
        )
        if not force and run.up_to_date():
            step.skipped, step.estimate = True, 0.0
            print(f"[all] {step.name}: up to date, skipped (step {k}/{len(steps)})", file=sys.stderr)
            continue
        print(progress_line(k, steps, step, time.perf_counter() - t0, budget.seconds), file=sys.stderr)
        print(f"[all] {step.name}: tpurank {command_line(options)}", file=sys.stderr)
        t = time.perf_counter()
        rc = guarded(options.STAGE, run)
        step.seconds = time.perf_counter() - t
        step.estimate = 0.0
        if rc != 0:
            raise TpurankError(
                f"step '{step.name}' failed (exit {rc}); fix it and rerun: finished steps are kept"
            )
    return cfg


def budget_line(seconds: float, budget_s: float) -> str:
    """How the run's time compares with its budget."""
    gap = budget_s - seconds
    side = "under" if gap >= 0 else "OVER"
    return (
        f"total {format_duration(seconds)}: {format_duration(abs(gap))} {side} the budget of "
        f"{format_duration(budget_s)} ({100 * seconds / budget_s:.0f}% used)"
    )


def print_summary(
    paths: Paths, models: list[str], steps: list[Step], scale: str | None, seconds: float, budget_s: float
) -> None:
    """The scores table, where the report and submission are, and the time of each step."""
    print("\n" + "=" * 78)
    if scale is not None:
        print("SYNTHETIC DATA: validation scores below are not Kaggle scores.")
    print("Validation scores (Kendall tau for layout, 2 - slowdown for tile):")
    print(scores_table(paths, models))
    if note := summary_note(paths):
        print(note)
    print(f"\nreport:     {paths.reports / 'validation.md'}")
    print(f"submission: {paths.submission}")
    print("time per step:")
    for s in steps:
        print(f"  {s.name:<26} {'skipped' if s.skipped else f'{s.seconds:7.1f} s'}")
    print(f"  {'total':<26} {seconds:7.1f} s")
    print(budget_line(seconds, budget_s))


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    budget_s = parse_duration(args.budget) if args.budget else None  # a bad --budget fails before any work
    data_root, scale = resolve_data(args.paths, args.cfg.seed)
    paths = args.paths.with_data(data_root)
    resolve_config(args, data_root)  # the data decides the demo preset
    print(f"[all] {args.profile_info.line}", file=sys.stderr)
    if any(layer.source.startswith("preset ") for layer in args.layers):
        print("[all] small synthetic data: the shortened training of configs/demo.toml", file=sys.stderr)
    models = models_to_train(args.cfg.ensemble.models, args.models)
    print(
        f"[all] models: {' '.join(models)} (ensemble: {' '.join(args.cfg.ensemble.models)})", file=sys.stderr
    )
    subset = [c for c in COLLECTIONS if c in args.collections]
    budget = run_budget(args, paths, budget_s, subset, models)
    partial = incomplete_test_set(paths) or subset != list(COLLECTIONS)
    steps = plan(models, args.jobs or args.cfg.prepare.jobs, subset, partial)
    estimate_steps(steps, budget.plan)
    cfg = run_steps(steps, paths, budget, args.force, t0)
    submission = publish_submission(paths)
    checked = subset if subset != list(COLLECTIONS) else None
    if run_step(check.Options(str(submission), partial=partial, collections=checked), paths, cfg):
        raise TpurankError(f"{submission}: failed its check")
    seconds = time.perf_counter() - t0
    print_summary(paths, models, steps, scale=scale, seconds=seconds, budget_s=budget.seconds)
    return 0


def run_budget(
    args: argparse.Namespace, paths: Paths, budget_s: float | None, subset: list[str], models: list[str]
) -> RunBudget:
    """The run's budget (`--budget`, else the profile's) and its first plan, printed: the plan saved
    by the last run for the same budget, config and data, else one from estimates."""
    budget_s = budget_s or parse_duration(DEFAULT_BUDGET[args.cfg.profile])
    key = plan_key(budget_s, args.cfg, paths.data, subset, models)
    where = paths.reports / PLAN_FILE
    saved = None if args.force else saved_plan(where, key)
    first = saved or make_plan(budget_s, args.cfg, paths.data, subset, models)
    how = "the plan of the last run with this budget" if saved else "a first plan from estimates"
    print(f"[all] {how} (made again before training unless nothing before it changed):", file=sys.stderr)
    print(first.describe(), file=sys.stderr)
    return RunBudget(
        seconds=budget_s,
        plan=first,
        base=args.cfg,
        layers=args.layers,
        remake=lambda spent, left: make_plan(budget_s, args.cfg, paths.data, subset, models, spent, left),
        save=lambda p: save_plan(where, key, p),
        saved=saved,
    )
