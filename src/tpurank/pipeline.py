"""`tpurank all`: the whole pipeline, from whatever data there is to a checked submission.

Data: the data root when it holds the dataset; else a Kaggle download when credentials exist; else
the synthetic `demo` dataset in `data/synthetic-demo/` (announced: its scores are not Kaggle
scores). Then every stage runs through the same CLI a user would call. A step whose inputs (code,
data fingerprint, the config sections it reads, its arguments) are unchanged since it last
succeeded, and whose outputs exist, is skipped, so a second `./run.sh all` is fast.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from tpurank import cli
from tpurank.atomic import atomic_path, write_json
from tpurank.config import Config, load_config, to_dict
from tpurank.dataset import COLLECTIONS
from tpurank.download import download, have_credentials
from tpurank.errors import TpurankError
from tpurank.paths import NPZ_SUBDIR, Paths, project_root
from tpurank.provenance import data_fingerprint
from tpurank.synth.tree import PLAN_FILE as SYNTH_MARKER

DEMO_SCALE = "demo"  # the synthetic fallback: finishes within 15 minutes on 2 cores
LEARNED_MODELS = ("lgbm", "gnn", "baseline")  # the order they are trained in
BASELINE_RANKERS = ("random", "heuristic")  # no training; always in the report
SUBMITTED_MODEL = "ensemble"

# The defaults in config.py are sized for the real data. On small synthetic data (tiny, demo) the
# pipeline trains less so `./run.sh all` ends well within 15 minutes on 2 CPU cores; any --set of
# the user's comes after these and wins.
SMALL_SYNTHETIC_BUDGET = [
    # both GNNs get the same steps: about three passes over the demo's unique train configs
    "gnn.max_steps=240", "baseline.max_steps=240", "lgbm.num_boost_round=300",
    'collections."tile:xla".gnn.max_steps=600', 'collections."tile:xla".baseline.max_steps=600',
    # layout graphs of a few hundred configs: a narrower GNN, and more optimizer steps per pass
    "gnn.hidden=32", "gnn.configs_per_graph=32",
    # tile trains in seconds and scores better at full size
    'collections."tile:xla".gnn.hidden=64', 'collections."tile:xla".gnn.configs_per_graph=64',
    # one seed (the demo's time), a warm-up of 10% of the steps as in config.py
    "gnn.seeds=1", "gnn.warmup_steps=24", 'collections."tile:xla".gnn.warmup_steps=60',
]  # fmt: skip
SMALL_SCALES = ("tiny", "demo")

BANNER = """
==============================================================================
 No TpuGraphs data found and no Kaggle credentials: running on the SYNTHETIC
 '{scale}' dataset in {root}.
 Its scores measure the pipeline, they are NOT Kaggle scores. For the real data
 see README.md ("Using the real data").
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
        "--jobs", type=cli.jobs_arg, default=0, help="worker processes for prepare (0 = config / all cores)"
    )
    p.add_argument(
        "--collections",
        nargs="+",
        choices=COLLECTIONS,
        default=list(COLLECTIONS),
        metavar="C",
        help="run these collections only (default: all five); the submission is then partial",
    )


@dataclass
class Step:
    name: str
    argv: list[str]
    sections: list[str]  # config sections the step reads
    outputs: list[Path]
    seconds: float = 0.0
    skipped: bool = False
    extra_key: list[str] = field(default_factory=list)


def source_hash() -> str:
    """Hash of the package's source: a code change reruns the steps."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    for f in sorted(pkg.rglob("*.py")):
        h.update(f.relative_to(pkg).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def synthetic_scale(root: Path) -> str | None:
    """The scale a synthetic dataset was generated at (from its synth.json), None for real data."""
    marker = root / SYNTH_MARKER
    if not marker.exists():
        return None
    try:
        return str(json.loads(marker.read_text()).get("scale", "unknown"))
    except (OSError, json.JSONDecodeError):
        return "unknown"


def resolve_data(args: argparse.Namespace) -> tuple[Path, str | None]:
    """(data root, its synthetic scale or None for real data). Real data if present, else Kaggle,
    else the synthetic demo."""
    root: Path = args.paths.data
    explicit = bool(args.data_dir or os.environ.get("TPURANK_DATA"))
    if (root / NPZ_SUBDIR).is_dir():
        return root, synthetic_scale(root)
    if explicit:
        raise TpurankError(f"{root}: no dataset here (expected {NPZ_SUBDIR}/...)")
    if have_credentials():
        return download(root), None
    from tpurank.synth import generate

    demo = project_root() / "data" / f"synthetic-{DEMO_SCALE}"
    print(BANNER.format(scale=DEMO_SCALE, root=demo), file=sys.stderr)
    # generate keeps finished files, so a tree an interrupted run left behind is completed
    generate(demo, scale=DEMO_SCALE, seed=args.cfg.seed, progress=True)
    return demo, DEMO_SCALE


def incomplete_test_set(paths: Paths) -> bool:
    """True when sample_submission.csv lists test IDs without a file (e.g. the 10-file sample).

    The pipeline then ranks the files present only and says loudly that Kaggle will not accept it.
    """
    from tpurank.submission import expected_for_split, missing_files

    absent = missing_files(expected_for_split(paths, "test"))
    if absent:
        print(
            f"[all] WARNING: {len(absent)} test IDs of {paths.sample_submission} have no file; the submission "
            "will rank only the files present and is NOT a valid Kaggle submission",
            file=sys.stderr,
        )
    return bool(absent)


def plan(
    paths: Paths, models: list[str], common: list[str], jobs: int, collections: list[str] | None = None
) -> list[Step]:
    """The steps of `all`, in order; `collections` (default: all) restricts every step that takes them."""
    preds = paths.predictions
    steps = [
        Step(
            "prepare",
            ["prepare", *(["--jobs", str(jobs)] if jobs else [])],
            ["prepare"],
            [paths.prepared / "index.parquet"],
        ),
    ]
    if "lgbm" in models:
        steps.append(Step("features", ["features"], ["prepare", "features"], [paths.tabular]))
    for m in models:
        sections = ["prepare", "features", m] if m == "lgbm" else ["prepare", m]
        steps.append(Step(f"train {m}", ["train", "--model", m], sections, [paths.models / m]))
    for m in [*BASELINE_RANKERS, *models]:
        sections = ["prepare", "features", "lgbm", "gnn", "baseline"]
        steps.append(
            Step(
                f"predict {m} valid",
                ["predict", "--model", m, "--split", "valid"],
                sections,
                [preds / m / "valid.npz", paths.submissions / f"valid_{m}.csv"],
            )
        )
    every = ["prepare", "features", "lgbm", "gnn", "baseline", "ensemble"]
    steps.append(Step("train ensemble", ["train", "--model", "ensemble"], every, [paths.models / "ensemble"]))
    steps.append(
        Step(
            "predict ensemble valid",
            ["predict", "--model", "ensemble", "--split", "valid"],
            every,
            [preds / "ensemble" / "valid.npz", paths.submissions / "valid_ensemble.csv"],
        )
    )
    steps.append(Step("validate", ["validate"], every, [paths.reports / "validation.md"]))
    for m in models:
        steps.append(
            Step(
                f"predict {m} test",
                ["predict", "--model", m, "--split", "test"],
                every,
                [preds / m / "test.npz"],
            )
        )
    steps.append(
        Step(
            f"predict {SUBMITTED_MODEL} test",
            ["predict", "--model", SUBMITTED_MODEL, "--split", "test"],
            every,
            [paths.submissions / f"test_{SUBMITTED_MODEL}.csv"],
        )
    )
    subset = [c for c in COLLECTIONS if c in (collections or COLLECTIONS)]
    for s in steps:
        if subset != list(COLLECTIONS) and s.argv[0] in ("prepare", "features", "train", "predict"):
            s.argv += ["--collections", *subset]
        s.argv += common
    return steps


def step_key(step: Step, cfg: Config, fingerprint: str, code: str) -> str:
    d = to_dict(cfg)
    parts = {
        "argv": step.argv,
        "code": code,
        "data": fingerprint,
        "seed": cfg.seed,
        "config": {s: d[s] for s in step.sections},
        "overrides": d["collections"],
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def publish_submission(paths: Paths) -> Path:
    """Copy the submitted model's test CSV (and sidecar) to submissions/submission.csv."""
    src = paths.submissions / f"test_{SUBMITTED_MODEL}.csv"
    dst = paths.submissions / "submission.csv"
    for a, b in ((src, dst), (src.with_suffix(".json"), dst.with_suffix(".json"))):
        if a.exists():
            with atomic_path(b) as tmp:
                shutil.copyfile(a, tmp)
    return dst


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
    each stage it runs also locks its own folders (tpurank.lock)."""
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


def run(args: argparse.Namespace) -> int:
    t0 = time.perf_counter()
    data_root, scale = resolve_data(args)
    paths = Paths(data=data_root, out=args.paths.out, work=args.paths.work)
    if scale in SMALL_SCALES:
        print(
            f"[all] small synthetic data: shortened training ({' '.join(SMALL_SYNTHETIC_BUDGET)})",
            file=sys.stderr,
        )
        args.set = [*SMALL_SYNTHETIC_BUDGET, *args.set]
        args.cfg = load_config(args.config_file, args.set)
    args.models = models_to_train(args.cfg.ensemble.models, args.models)
    print(
        f"[all] models: {' '.join(args.models)} (ensemble: {' '.join(args.cfg.ensemble.models)})",
        file=sys.stderr,
    )
    common = cli.common_argv(args, data_dir=str(data_root))
    jobs = args.jobs or args.cfg.prepare.jobs
    subset = [c for c in COLLECTIONS if c in args.collections]
    partial = incomplete_test_set(paths) or subset != list(COLLECTIONS)
    steps = plan(paths, args.models, common, jobs, subset)
    if partial:
        for step in steps:
            if step.argv[:1] == ["predict"] and "test" in step.argv:
                step.argv.append("--partial")
    state_file = paths.reports / "pipeline_state.json"
    state = json.loads(state_file.read_text()) if state_file.exists() and not args.force else {}
    fingerprint, code = data_fingerprint(data_root), source_hash()
    for step in steps:
        key = step_key(step, args.cfg, fingerprint, code)
        if state.get(step.name) == key and all(p.exists() for p in step.outputs):
            step.skipped = True
            print(f"[all] {step.name}: up to date, skipped", file=sys.stderr)
            continue
        print(
            f"[all] {step.name}: tpurank {' '.join(step.argv[: step.argv.index('--data-dir')])}",
            file=sys.stderr,
        )
        t = time.perf_counter()
        rc = cli.main(step.argv)
        step.seconds = time.perf_counter() - t
        if rc != 0:
            raise TpurankError(
                f"step '{step.name}' failed (exit {rc}); fix it and rerun: finished steps are kept"
            )
        state[step.name] = key
        write_json(state_file, state)
    submission = publish_submission(paths)
    if cli.main(["check-submission", str(submission), *common, *(["--partial"] if partial else [])]) != 0:
        raise TpurankError(f"{submission}: failed its check")
    print("\n" + "=" * 78)
    if scale is not None:
        print("SYNTHETIC DATA: validation scores below are not Kaggle scores.")
    print("Validation scores (Kendall tau for layout, 2 - slowdown for tile):")
    print(scores_table(paths, args.models))
    from tpurank.ensemble import summary_note

    if note := summary_note(paths):
        print(note)
    print(f"\nreport:     {paths.reports / 'validation.md'}")
    print(f"submission: {submission}")
    print("time per step:")
    for s in steps:
        print(f"  {s.name:<26} {'skipped' if s.skipped else f'{s.seconds:7.1f} s'}")
    print(f"  {'total':<26} {time.perf_counter() - t0:7.1f} s")
    return 0
