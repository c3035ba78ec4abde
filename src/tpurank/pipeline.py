"""`tpurank all`: the whole pipeline, from whatever data there is to a checked submission.

Data: the data root when it holds the dataset; else a Kaggle download when credentials exist; else
the synthetic `demo` dataset in `data/synthetic-demo/` (announced: its scores are not Kaggle
scores). Then every stage runs as a user would run it, on the paths and config the CLI resolved
once (tpurank.stages.run_stage). Each step is skipped only when its record (tpurank.chain) still
matches: same code, options and config, the same content read, and its outputs still the ones it
wrote. So a second `./run.sh all` is fast, and `all` after any manual command ends where a clean
`all` ends.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tpurank.chain import Step as ChainStep
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import LEARNED_MODELS, Config, load_config
from tpurank.core.errors import TpurankError
from tpurank.core.options import add_collections, add_jobs
from tpurank.core.paths import NPZ_SUBDIR, Paths, preset_file
from tpurank.data.download import download, have_credentials
from tpurank.rankers.ensemble import summary_note
from tpurank.stages import execute, guarded, run_command, stage_args
from tpurank.submission.publish import SUBMITTED_MODEL, incomplete_test_set, publish_submission
from tpurank.synth.tree import synthetic_scale

DEMO_SCALE = "demo"  # the synthetic fallback: finishes within 15 minutes on 2 cores
BASELINE_RANKERS = ("random", "heuristic")  # no training; always in the report
# core/config.py's defaults are sized for the real data; on small synthetic data `all` trains less
# (this preset, under the user's --config and --set), so it ends within 15 minutes on 2 cores
SMALL_SCALES = ("tiny", "demo")
DEMO_PRESET = "demo.toml"

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
    add_jobs(p, 0, "worker processes for prepare (0 = config / all cores)")
    add_collections(p, help="run these collections only (default: all five); the submission is then partial")


@dataclass
class Step:
    """One step of `all`: a stage with its own options (`argv[0]` names the stage)."""

    name: str
    argv: list[str]
    seconds: float = 0.0
    skipped: bool = False


def resolve_data(paths: Paths, seed: int) -> tuple[Path, str | None]:
    """(data root, its synthetic scale or None for real data). Real data if present, else Kaggle,
    else the synthetic demo."""
    root = paths.data
    if (root / NPZ_SUBDIR).is_dir():
        return root, synthetic_scale(root)
    if paths.data_named:
        raise TpurankError(f"{root}: no dataset here (expected {NPZ_SUBDIR}/...)")
    if have_credentials():
        return download(root), None
    from tpurank.synth import generate

    demo = Paths.demo_data(DEMO_SCALE)
    print(BANNER.format(scale=DEMO_SCALE, root=demo), file=sys.stderr)
    # generate keeps finished files, so a tree an interrupted run left behind is completed
    generate(demo, scale=DEMO_SCALE, seed=seed, progress=True)
    return demo, DEMO_SCALE


def run_config(args: argparse.Namespace, scale: str | None) -> Config:
    """The run's config: on small synthetic data the demo preset goes under the user's own."""
    if scale not in SMALL_SCALES:
        return args.cfg
    preset = preset_file(DEMO_PRESET)
    print(f"[all] small synthetic data: the shortened training of {preset}", file=sys.stderr)
    return load_config(args.config_file, args.set, preset=preset)


def plan(paths: Paths, models: list[str], jobs: int, collections: list[str] | None = None) -> list[Step]:
    """The steps of `all`, in order; `collections` (default: all) restricts every step that takes them."""
    steps = [Step("prepare", ["prepare", *(["--jobs", str(jobs)] if jobs else [])])]
    if "lgbm" in models:
        steps.append(Step("features", ["features"]))
    steps += [Step(f"train {m}", ["train", "--model", m]) for m in models]
    for m in [*BASELINE_RANKERS, *models]:
        steps.append(Step(f"predict {m} valid", ["predict", "--model", m, "--split", "valid"]))
    steps.append(Step("train ensemble", ["train", "--model", "ensemble"]))
    steps.append(Step("predict ensemble valid", ["predict", "--model", "ensemble", "--split", "valid"]))
    steps.append(Step("validate", ["validate"]))
    steps += [Step(f"predict {m} test", ["predict", "--model", m, "--split", "test"]) for m in models]
    steps.append(
        Step(f"predict {SUBMITTED_MODEL} test", ["predict", "--model", SUBMITTED_MODEL, "--split", "test"])
    )
    subset = [c for c in COLLECTIONS if c in (collections or COLLECTIONS)]
    for s in steps:
        if subset != list(COLLECTIONS) and s.argv[0] in ("prepare", "features", "train", "predict"):
            s.argv += ["--collections", *subset]
    return steps


def scores_table(paths: Paths, models: list[str]) -> str:
    rows = []
    for m in [*BASELINE_RANKERS, *models, SUBMITTED_MODEL]:
        side = paths.submissions / f"valid_{m}.json"
        if not side.exists():
            continue
        scores = json.loads(side.read_text()).get("scores", {})
        rows.append((m, [scores.get(c) for c in (*COLLECTIONS, "overall")]))
    head = f"{'model':<10}" + "".join(f"{c.replace('layout:', ''):>13}" for c in (*COLLECTIONS, "overall"))
    lines = [head]
    for m, vals in rows:
        lines.append(f"{m:<10}" + "".join(f"{v:>13.4f}" if v is not None else f"{'-':>13}" for v in vals))
    return "\n".join(lines)


def output_folders(args: argparse.Namespace) -> list[Path]:
    """The reports folder (the pipeline state): a second `all` into the same --out-dir is refused;
    each stage it runs also locks its own folders (tpurank.core.lock)."""
    return [args.paths.reports]


def models_to_train(ensemble_models: list[str], extra: list[str]) -> list[str]:
    """The ensemble's members plus the ones asked for, in training order."""
    wanted = set(ensemble_models) | set(extra)
    unknown = sorted(wanted - set(LEARNED_MODELS))
    if unknown:
        raise TpurankError(
            f"config ensemble.models: unknown model(s) {', '.join(unknown)} (known: {', '.join(LEARNED_MODELS)})"
        )
    return [m for m in LEARNED_MODELS if m in wanted]


def run_steps(steps: list[Step], paths: Paths, cfg: Config, force: bool) -> None:
    """Run the steps in order, skipping those whose record still matches (tpurank.chain)."""
    for step in steps:
        module, args = stage_args(step.argv[0], step.argv[1:], paths, cfg)
        if not force and ChainStep(args).up_to_date():
            step.skipped = True
            print(f"[all] {step.name}: up to date, skipped", file=sys.stderr)
            continue
        print(f"[all] {step.name}: tpurank {' '.join(step.argv)}", file=sys.stderr)
        t = time.perf_counter()
        rc = guarded(step.argv[0], lambda module=module, args=args: execute(module, args))
        step.seconds = time.perf_counter() - t
        if rc != 0:
            raise TpurankError(
                f"step '{step.name}' failed (exit {rc}); fix it and rerun: finished steps are kept"
            )


def print_summary(
    paths: Paths, models: list[str], steps: list[Step], scale: str | None, seconds: float
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
    print(f"submission: {paths.submissions / 'submission.csv'}")
    print("time per step:")
    for s in steps:
        print(f"  {s.name:<26} {'skipped' if s.skipped else f'{s.seconds:7.1f} s'}")
    print(f"  {'total':<26} {seconds:7.1f} s")


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    data_root, scale = resolve_data(args.paths, args.cfg.seed)
    paths = args.paths.with_data(data_root)
    cfg = run_config(args, scale)
    models = models_to_train(cfg.ensemble.models, args.models)
    print(f"[all] models: {' '.join(models)} (ensemble: {' '.join(cfg.ensemble.models)})", file=sys.stderr)
    subset = [c for c in COLLECTIONS if c in args.collections]
    partial = incomplete_test_set(paths) or subset != list(COLLECTIONS)
    steps = plan(paths, models, args.jobs or cfg.prepare.jobs, subset)
    if partial:
        for step in steps:
            if step.argv[:1] == ["predict"] and "test" in step.argv:
                step.argv.append("--partial")
    run_steps(steps, paths, cfg, args.force)
    submission = publish_submission(paths)
    check = ["--partial"] if partial else []
    if run_command(["check-submission", str(submission), *check], paths, cfg):
        raise TpurankError(f"{submission}: failed its check")
    print_summary(paths, models, steps, scale=scale, seconds=time.perf_counter() - t0)
    return 0
