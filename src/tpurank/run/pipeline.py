"""`tpurank all`: the whole pipeline, from whatever data there is to a checked submission.

Data: the data root when it holds the dataset; else a Kaggle download when credentials exist; else
the synthetic `demo` dataset in `data/synthetic-demo/` (announced: its scores are not Kaggle
scores). Then every stage runs as a user would run it, on the paths and config the CLI resolved
once, with typed options built here (each stage's `Options`). Each step is skipped only when its
record (tpurank.run.records) still matches: same code, options and config, the same content read, and its outputs still the ones it
wrote. So a second `./run.sh all` is fast, and `all` after any manual command ends where a clean
`all` ends.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from pathlib import Path
from typing import Any

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.declared import run_io
from tpurank.core.errors import TpurankError
from tpurank.core.isolated import run_isolated
from tpurank.core.memory import release_between_steps, thaw_after_steps
from tpurank.core.names import LEARNED_MODELS, UNTRAINED, Model
from tpurank.core.options import add_collections, add_jobs
from tpurank.core.paths import DATA_FIX, NPZ_SUBDIR, Paths, remember_data_root, synthetic_scale
from tpurank.core.profiles import DEFAULT_BUDGET, parse_duration
from tpurank.core.staleness import StageIO
from tpurank.core.workers import usable_cores
from tpurank.data.dataset import SMALL_DATA_BYTES, npz_bytes
from tpurank.data.download import download, have_credentials
from tpurank.features import cli as features
from tpurank.predict import cli as predict
from tpurank.prepare import cli as prepare
from tpurank.report.ensemble_section import summary_note
from tpurank.run.budget import (
    RunBudget,
    budget_line,
    first_budget,
    progress_line,
)
from tpurank.run.context import resolve_config, seed_before_data
from tpurank.run.records import NEVER_RAN
from tpurank.run.stages import StageRun, command_line, guarded, run_step, step_namespace
from tpurank.run.steps import Step
from tpurank.submission import check
from tpurank.submission.publish import SUBMITTED_MODEL, incomplete_test_set, publish_submission
from tpurank.train import cli as train
from tpurank.validate import cli as validate

DEMO_SCALE = "demo"  # the synthetic fallback: finishes within 15 minutes on 2 cores
BANNER = """
==============================================================================
 No TpuGraphs data found and no Kaggle credentials: running on the SYNTHETIC
 '{scale}' dataset in {root}.
 Its scores measure the pipeline, they are NOT Kaggle scores. For the real data
 see README.md#recipe-1-the-real-data-on-a-cpu.
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
    from tpurank.synth import generate  # only without data: all's own process stays light

    demo = Paths.demo_data(DEMO_SCALE)
    print(BANNER.format(scale=DEMO_SCALE, root=demo), file=sys.stderr)
    # generate keeps finished files, so a tree an interrupted run left behind is completed; its files
    # are independent, so the usable cores write them (the same bytes as one process, in less time:
    # docs/data.md)
    generate(demo, scale=DEMO_SCALE, seed=seed, progress=True, jobs=usable_cores())
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
    steps = [Step(prepare.Options(jobs=jobs or None, **cs))]
    if Model.LGBM in models:
        steps.append(Step(features.Options(**cs)))
    steps += [Step(train.Options(model=m, **cs)) for m in models]
    for m in [*UNTRAINED, *models]:
        steps.append(Step(predict.Options(model=m, split="valid", **cs)))
    steps.append(Step(train.Options(model=Model.ENSEMBLE.value, **cs)))
    steps.append(Step(predict.Options(model=Model.ENSEMBLE.value, split="valid", **cs)))
    steps.append(Step(validate.Options()))
    for m in [*models, SUBMITTED_MODEL]:
        steps.append(Step(predict.Options(model=m, split="test", partial=partial, **cs)))
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
    """Its declaration (tpurank.core.declared): the reports folder (the pipeline state) is locked, so
    a second `all` into the same --out-dir is refused; each step keeps its own record and locks its
    own folders."""
    return run_io(args.paths)


def models_to_train(ensemble_models: list[str], extra: list[str]) -> list[str]:
    """The ensemble's members plus the ones asked for, in training order."""
    wanted = set(ensemble_models) | set(extra)
    unknown = sorted(wanted - set(LEARNED_MODELS))
    if unknown:
        raise TpurankError(
            f"config ensemble.models: unknown model(s) {', '.join(unknown)} (known: {', '.join(LEARNED_MODELS)})"
        )
    return [m for m in LEARNED_MODELS if m in wanted]


def run_steps(
    steps: list[Step], paths: Paths, budget: RunBudget, force: bool, t0: float, isolated: bool = False
) -> Config:
    """Run the steps in order, skipping those whose record still matches (tpurank.run.records); the config
    they ran with (the budget's plan applied) is returned. `isolated`: each step in a child process
    of its own (tpurank.core.isolated), else all in this one."""
    with thaw_after_steps():
        return _run_each(steps, paths, budget, force, t0, isolated)


def _run_each(
    steps: list[Step], paths: Paths, budget: RunBudget, force: bool, t0: float, isolated: bool
) -> Config:
    """The loop of run_steps, inside its thaw_after_steps."""
    cfg = budget.config()
    for k, step in enumerate(steps, 1):
        if step.name.neural_training and not budget.final:
            cfg = budget.second_look(steps, k, time.perf_counter() - t0)
        options = step.options
        run = StageRun(
            sys.modules[type(options).__module__], step_namespace(options.COMMAND, options, paths, cfg)
        )
        if not force and run.up_to_date():
            step.skipped, step.estimate = True, 0.0
            print(f"[all] {step.name}: up to date, skipped (step {k}/{len(steps)})", file=sys.stderr)
            continue
        print(progress_line(k, steps, step, time.perf_counter() - t0, budget.seconds), file=sys.stderr)
        print(f"[all] {step.name}: tpurank {command_line(options)}", file=sys.stderr)
        if not force and (why := run.why()) != NEVER_RAN:
            print(f"[all] {step.name}: runs again: {why}", file=sys.stderr)
        t = time.perf_counter()
        if isolated:
            rc = run_isolated(functools.partial(guarded, options.COMMAND, run))
        else:
            rc = guarded(options.COMMAND, run)
            clear_chunk_cache()  # one process runs every step: each starts from what it needs (core/memory)
            release_between_steps()
        step.seconds = time.perf_counter() - t
        step.estimate = 0.0
        if rc != 0:
            raise TpurankError(
                f"step '{step.name}' failed (exit {rc}); fix it and rerun: finished steps are kept"
            )
    return cfg


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
    data_root, scale = resolve_data(args.paths, seed_before_data(args))
    paths = args.paths.with_data(data_root)
    resolve_config(args, data_root)  # the config, once: the data decides the demo preset
    print(f"[all] {args.profile_info.line}", file=sys.stderr)
    if any(layer.source.startswith("preset ") for layer in args.layers):
        print("[all] small synthetic data: the shortened training of configs/demo.toml", file=sys.stderr)
    models = models_to_train(args.cfg.ensemble.models, args.models)
    print(
        f"[all] models: {' '.join(models)} (ensemble: {' '.join(args.cfg.ensemble.models)})", file=sys.stderr
    )
    subset = [c for c in COLLECTIONS if c in args.collections]
    partial = incomplete_test_set(paths) or subset != list(COLLECTIONS)
    steps = plan(models, args.jobs or args.cfg.prepare.jobs, subset, partial)
    budget = first_budget(args, paths, budget_s, subset, models, steps)
    isolated = isolate_steps(paths, subset)
    cfg = run_steps(steps, paths, budget, args.force, t0, isolated)
    submission = publish_submission(paths)
    checked = subset if subset != list(COLLECTIONS) else None
    if run_step(check.Options(str(submission), partial=partial, collections=checked), paths, cfg):
        raise TpurankError(f"{submission}: failed its check")
    seconds = time.perf_counter() - t0
    print_summary(paths, models, steps, scale=scale, seconds=seconds, budget_s=budget.seconds)
    return 0


def clear_chunk_cache() -> None:
    """Empty the prepared cache's decoded chunks (tpurank.prepare.store.CHUNKS) when a step run in
    this process loaded them; `all` itself never imports the store (it stays light)."""
    store = sys.modules.get("tpurank.prepare.store")
    if store is not None:
        store.CHUNKS.clear()


def isolate_steps(paths: Paths, collections: list[str]) -> bool:
    """Each step in its own process when the data is not small (SMALL_DATA_BYTES of npz; said once)."""
    size = npz_bytes(paths.data, collections)
    if size < SMALL_DATA_BYTES:
        return False
    print(
        f"[all] {size / 1e9:.1f} GB of data: each step in a process of its own (what it held dies with it)",
        file=sys.stderr,
    )
    return True
