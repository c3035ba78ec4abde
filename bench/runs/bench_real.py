"""Benchmark on real measurements only: every model side by side on the real sample files.

- layout: train on the real `layout:xla:default` train graph `unet3d`, rank the real valid graph
  `unet_3d.4x4.bf16` that no model saw; Kendall tau on all its 1965 configs and on the official
  1000-config subset (`eval_indices/xla_default.json`).
- tile: the 15 real kernels of `pb/op_tuning_data.pb` (754 runs), featurized with `featurize-pb`,
  scored by grouped k-fold over kernels (no kernel in its own training fold): the competition's
  tile score `2 - slowdown@5`, averaged over the 15 held-out kernels.

Every stage runs as a user runs it (`python -m tpurank prepare/features/train/predict ...` in a
subprocess) on a temporary data root of symlinks to the real files (bench/lib/real_data.py): the scored
graphs sit in its `test/` split, so no model trains or selects a checkpoint on them. Training
lengths are step budgets (no time budget, no early stopping on held-out data). Models: random,
heuristic, lgbm, gnn, baseline (the official GraphSAGE) and the ensemble of `ensemble.models`
with EQUAL weights (a rank average: with one scored layout graph, weights fitted on it and scored
on it would be circular; that circular figure is printed too, labelled, as an upper bound; on
tile a third row fits each fold's weights on the other folds' kernels). Each model runs with every
seed of `--seeds`; the table shows mean, std and min..max.

    .venv/bin/python bench/runs/bench_real.py              # seeds 0 1 2, 5 tile folds
    .venv/bin/python bench/runs/bench_real.py --quick      # seeds 0 1, 3 tile folds, shorter training
    .venv/bin/python bench/runs/bench_real.py --only layout      # one half: bench/results/real_layout.json
    .venv/bin/python bench/runs/bench_real.py --merge bench/results/real_layout.json bench/results/real_tile.json
Every stage runs under the `gpu` profile (the defaults; `--profile` for another), whatever the
machine picks by itself, so a row means the same on a laptop and on a GPU.
Saves bench/results/real.json (or --out). Exits 0 with the reason when ../shared is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import provenance  # noqa: E402
import real_data as rd  # noqa: E402
from real_table import FOLD_FITTED, table  # noqa: E402
from real_table import fmt as fmt  # noqa: E402  re-exported: tests/project/test_bench_real.py
from real_table import summary as summary  # noqa: E402  re-exported: tests/project/test_bench_real.py

from tpurank.core.config import Config  # noqa: E402
from tpurank.core.config_files import load_config  # noqa: E402
from tpurank.core.paths import Paths  # noqa: E402
from tpurank.data.subsets import load_subsets  # noqa: E402
from tpurank.models.ensemble import combine, weight_grid  # noqa: E402
from tpurank.models.predictions import load_predictions  # noqa: E402

PYTHON = sys.executable
RESULTS = ROOT / "bench" / "results" / "real.json"
RANKERS = ("random", "heuristic")  # no training
LEARNED = ("lgbm", "gnn", "baseline")
# step budgets (the same on every machine and load): no early stopping, one validation at the end
BUDGETS = {
    "full": {"lgbm": 300, "gnn": 300, "baseline": 300, "tile_gnn": 600, "tile_baseline": 600},
    "quick": {"lgbm": 100, "gnn": 100, "baseline": 100, "tile_gnn": 200, "tile_baseline": 200},
}


def budget_sets(b: dict[str, int]) -> list[str]:
    """`--set` overrides of a budget: fixed lengths, validation only at the end (so the kept model
    is the last one), LightGBM without early stopping. The GNN trains one model per bench seed (the
    spread across `--seeds` is the point; seed averaging is measured by bench_recipe.py) and warms
    up for 10% of its budget, as `config.py` does for its own `max_steps`. It keeps the width and
    dropout of the GPU profile before it took the 1st place's scale (64, 0): their 256 and 0.2 are
    for ~50k steps, and 300 steps at width 256 take about an hour a seed on 2 cores."""
    t = 'collections."tile:xla"'
    out = [f"lgbm.num_boost_round={b['lgbm']}", f"lgbm.early_stopping_rounds={b['lgbm']}"]
    for m in ("gnn", "baseline"):
        out += [f"{m}.max_steps={b[m]}", f"{m}.eval_every={b[m]}", f"{m}.time_budget_min=0"]
        out += [f"{t}.{m}.max_steps={b['tile_' + m]}", f"{t}.{m}.eval_every={b['tile_' + m]}"]
    out += [
        "gnn.seeds=1",
        "gnn.hidden=64",
        "gnn.dropout=0",
        f"gnn.warmup_steps={b['gnn'] // 10}",
        f"{t}.gnn.warmup_steps={b['tile_gnn'] // 10}",
    ]
    return out


def run_models(
    root: Path,
    out: Path,
    work: Path,
    collection: str,
    seed: int,
    sets: list[str],
    models: list[str],
    log: Path,
) -> dict[str, dict[str, np.ndarray]]:
    """prepare, features, train and `predict --split test` through the CLI; model -> test costs."""
    common = [
        "--data-dir",
        str(root),
        "--out-dir",
        str(out),
        "--work-dir",
        str(work),
        "--set",
        f"seed={seed}",
    ]
    common += [x for s in sets for x in ("--set", s)]
    only = ["--collections", collection]
    rd.stage(["prepare", "--no-progress", *only, *common], log)
    learned = [m for m in models if m in LEARNED]
    if "lgbm" in learned:
        rd.stage(["features", *only, *common], log)
    for m in learned:
        rd.stage(["train", "--model", m, *only, *common], log)
    for m in models:
        rd.stage(["predict", "--model", m, "--split", "test", "--partial", *only, *common], log)
    paths = Paths(root, out, work)
    return {m: load_predictions(paths.prediction_file(m, "test")) for m in models}


def tile_kernels(work: Path, log: Path) -> list[Path]:
    """The 15 real kernels of op_tuning_data.pb as tile npz files (featurize-pb, through the CLI)."""
    folder = work / "tile-kernels"
    folder.parent.mkdir(parents=True, exist_ok=True)
    rd.stage(["featurize-pb", str(rd.SHARED / rd.TILE_PB), str(folder), "--kind", "tile"], log)
    return sorted(folder.glob("*.npz"))


def with_ensembles(costs: dict[str, dict[str, np.ndarray]], members: list[str], how: str) -> None:
    """Add the equal-weight ensemble of `members` (those predicted) to one seed's costs."""
    have = [m for m in members if m in costs]
    if len(have) >= 2:
        costs["ensemble"] = rd.equal_weight([costs[m] for m in have], how)


def circular_ensemble(
    costs: dict[str, dict[str, np.ndarray]], members: list[str], how: str, score
) -> tuple[float, list[float]]:
    """The ensemble with weights fitted on the scored graphs and scored on them (circular: an upper
    bound, not a measurement of generalisation). `score(costs) -> float`."""
    preds = [costs[m] for m in members]
    ids = sorted(set.intersection(*(set(p) for p in preds)))
    best, best_w = -np.inf, None
    for w in weight_grid(len(preds)):
        s = score({g: combine([p[g] for p in preds], w, how) for g in ids})
        if s > best + 1e-12:
            best, best_w = s, w
    return float(best), [float(x) for x in best_w]


def layout_bench(a: argparse.Namespace, sets: list[str], cfg) -> dict:
    cfg = cfg.for_collection(rd.LAYOUT)  # its per-collection defaults (ensemble.normalize)
    log = a.work / "layout.log"
    root = rd.layout_root(a.work / "layout" / "data", extra_train=a.extra_train)
    files = rd.scored_graphs(root, rd.LAYOUT)
    subsets = load_subsets(rd.SHARED / "eval_indices").get(rd.LAYOUT, {})
    per: dict[str, dict[str, list[float]]] = {"all": {}, "subset": {}}
    circ: dict[str, list] = {"all": [], "subset": []}
    for seed in a.seeds:
        t = time.perf_counter()
        out = a.work / "layout" / f"seed{seed}"
        costs = run_models(root, out, a.work / "layout" / "work", rd.LAYOUT, seed, sets, a.models, log)
        with_ensembles(costs, cfg.ensemble.models, cfg.ensemble.normalize)
        for kind, sub in (("all", None), ("subset", subsets)):
            for m, c in costs.items():
                per[kind].setdefault(m, []).append(rd.mean_of(rd.score_costs(c, files, rd.LAYOUT, sub)))
            if "ensemble" in costs:
                members = [m for m in cfg.ensemble.models if m in costs]
                circ[kind].append(
                    circular_ensemble(
                        costs,
                        members,
                        cfg.ensemble.normalize,
                        lambda x, sub=sub: rd.mean_of(rd.score_costs(x, files, rd.LAYOUT, sub)),
                    )
                )
        print(
            f"  layout seed {seed}: {time.perf_counter() - t:.0f} s; tau (all configs) "
            + ", ".join(f"{m} {v[-1]:.4f}" for m, v in per["all"].items()),
            flush=True,
        )
    return {"per_seed": per, "circular_ensemble": circ, "scored": sorted(files), "log": str(log)}


def tile_bench(a: argparse.Namespace, sets: list[str], cfg) -> dict:
    cfg = cfg.for_collection(rd.TILE)  # its per-collection defaults (ensemble.normalize)
    log = a.work / "tile.log"
    kernels = tile_kernels(a.work, log)
    folds = rd.kernel_folds(len(kernels), a.tile_folds, seed=0)
    per: dict[str, list[float]] = {}
    circ: list = []
    weights: list = []  # per seed, per fold: the fold-fitted ensemble's weights
    for seed in a.seeds:
        t = time.perf_counter()
        pooled: dict[str, dict[str, np.ndarray]] = {}
        files: dict[str, Path] = {}
        fold_ids: list[list[str]] = []
        for i, held in enumerate(folds):
            base = a.work / "tile" / f"fold{i}"
            root = rd.tile_root(base / "data", kernels, held)
            scored = rd.scored_graphs(root, rd.TILE)
            files.update(scored)
            fold_ids.append(sorted(scored))
            costs = run_models(root, base / f"seed{seed}", base / "work", rd.TILE, seed, sets, a.models, log)
            for m, c in costs.items():
                pooled.setdefault(m, {}).update(c)
        with_ensembles(pooled, cfg.ensemble.models, cfg.ensemble.normalize)
        members = [m for m in cfg.ensemble.models if m in pooled]
        if len(members) >= 2:  # weights fitted on the other folds' kernels: not circular
            pooled[FOLD_FITTED], fold_w = rd.fold_fitted(
                [pooled[m] for m in members],
                rd.truth_of(files, rd.TILE),
                fold_ids,
                rd.TILE,
                cfg.ensemble.normalize,
            )
            weights.append(fold_w)
        for m, c in pooled.items():
            per.setdefault(m, []).append(rd.mean_of(rd.score_costs(c, files, rd.TILE)))
        if "ensemble" in pooled:
            circ.append(
                circular_ensemble(
                    pooled,
                    members,
                    cfg.ensemble.normalize,
                    lambda x, files=files: rd.mean_of(rd.score_costs(x, files, rd.TILE)),
                )
            )
        print(
            f"  tile seed {seed}: {time.perf_counter() - t:.0f} s; score "
            + ", ".join(f"{m} {v[-1]:.4f}" for m, v in per.items()),
            flush=True,
        )
    return {
        "per_seed": per,
        "circular_ensemble": circ,
        "fold_fitted_weights": weights,
        "kernels": [k.name for k in kernels],
        "folds": [[kernels[j].name for j in f] for f in folds],
        "log": str(log),
    }


def merge(layout: Path, tile: Path, out: Path | None) -> int:
    """Write one results file from the layout half of `layout` and the tile half of `tile` (runs of
    `--only layout` and `--only tile`, e.g. side by side), refused unless seeds, budget, config
    overrides and models agree."""
    a, b = (json.loads(Path(f).read_text()) for f in (layout, tile))
    if "layout" not in a or "tile" not in b:
        raise SystemExit(f"bench_real --merge: {layout} must hold a layout half and {tile} a tile half")
    differ = [k for k in ("seeds", "budget", "sets", "models") if a.get(k) != b.get(k)]
    if differ:
        raise SystemExit(f"bench_real --merge: the two runs differ in {', '.join(differ)}")
    res = {**a, "tile": b["tile"], "tile_folds": b["tile_folds"], "seconds": a["seconds"] + b["seconds"]}
    if a.get("ensemble") != b.get("ensemble"):  # e.g. runs of commits with other per-collection defaults
        res["ensemble"] = {"layout": a.get("ensemble"), "tile": b.get("ensemble")}
    res["command"] = (
        f"{a['command']} ; {b['command']} ; bench/runs/bench_real.py --merge {layout.name} {tile.name}"
    )
    res["commit"] = (
        a["commit"] if a.get("commit") == b.get("commit") else f"{a.get('commit')} / {b.get('commit')}"
    )
    res["table"] = table(res, res["models"])
    out = out or RESULTS
    print(f"{res['table']}\n\nmean ± std [min, max] over seeds {res['seeds']}")
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"saved {out}")
    return 0


def parse_args() -> argparse.Namespace:
    """The options, apart so that main reads as the run's phases."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--seeds", type=int, nargs="+", default=None, help="seeds of every model (default 0 1 2; quick 0 1)"
    )
    p.add_argument("--quick", action="store_true", help="shorter training, seeds 0 1, 3 tile folds")
    p.add_argument(
        "--tile-folds", type=int, default=None, help="kernel folds (default 5; quick 3; 15 = leave-one-out)"
    )
    p.add_argument("--models", nargs="+", default=[*RANKERS, *LEARNED], choices=[*RANKERS, *LEARNED])
    p.add_argument("--only", choices=["layout", "tile"], help="run one of the two benchmarks")
    p.add_argument(
        "--extra-train", action="store_true", help="also train layout on the xla:random train file"
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override for every run"
    )
    p.add_argument(
        "--profile",
        default="gpu",
        choices=["cpu", "kaggle-t4", "gpu"],
        help="the profile under the budget and --set (default gpu: the defaults, whatever the machine)",
    )
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench" / "real")
    p.add_argument(
        "--out", type=Path, help="results file (default bench/results/real.json; with --only X: real_X.json)"
    )
    p.add_argument(
        "--merge",
        nargs=2,
        type=Path,
        metavar=("LAYOUT.json", "TILE.json"),
        help="only: one table from the layout half of one results file and the tile half of another",
    )
    return p.parse_args()


def main() -> int:
    """Both halves (or one, or a merge of two results files); exits 0 with the reason without the sample."""
    a = parse_args()
    if a.merge:
        return merge(*a.merge, a.out)
    if reason := rd.missing_sample(rd.SHARED):
        print(f"bench_real: skipped: {reason}")
        return 0
    budget, sets, cfg = prepare_run(a)
    t0 = time.perf_counter()
    res = run_record(a, budget, sets, cfg)
    if a.only != "tile":
        print(f"layout: train {rd.LAYOUT_TRAIN}, rank {rd.LAYOUT_SCORED} (seeds {a.seeds})", flush=True)
        res["layout"] = layout_bench(a, sets, cfg)
    if a.only != "layout":
        print(
            f"tile: 15 kernels of {rd.TILE_PB}, {a.tile_folds}-fold over kernels (seeds {a.seeds})",
            flush=True,
        )
        res["tile"] = tile_bench(a, sets, cfg)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["threads"] = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", "TORCH_NUM_THREADS")}
    res["table"] = table(res, a.models)
    res["provenance"] = provenance.stamp()
    print(f"\n{res['table']}\n\nmean ± std [min, max] over seeds {a.seeds}; {res['seconds'] / 60:.1f} min")
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"saved {a.out}")
    return 0


def prepare_run(a: argparse.Namespace) -> tuple[dict[str, int], list[str], Config]:
    """The defaults --quick picks, the budget and profile, and an empty work folder: no stale model reused."""
    a.out = a.out or (RESULTS.with_name(f"{RESULTS.stem}_{a.only}.json") if a.only else RESULTS)
    a.seeds = a.seeds or ([0, 1] if a.quick else [0, 1, 2])
    a.tile_folds = a.tile_folds or (3 if a.quick else 5)
    budget = BUDGETS["quick" if a.quick else "full"]
    sets = [*budget_sets(budget), *a.set]
    os.environ["TPURANK_PROFILE"] = a.profile  # every stage it runs: the same layers on every machine
    cfg = load_config(None, sets, profile=ROOT / "configs" / f"profile-{a.profile}.toml")
    if a.only:  # its own folder, so `--only layout` and `--only tile` can run side by side
        a.work = a.work.with_name(f"{a.work.name}-{a.only}")
    if a.work.exists():
        shutil.rmtree(a.work)  # stale models of another budget would be reused
    a.work.mkdir(parents=True)
    return budget, sets, cfg


def run_record(a: argparse.Namespace, budget: dict[str, int], sets: list[str], cfg: Config) -> dict:
    """How the results were measured (commit, command, seeds, budget, ensemble): a row is read with it."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    return {
        "commit": commit.stdout.strip(),
        "command": " ".join(["bench/runs/bench_real.py", *sys.argv[1:]]),
        "seeds": a.seeds,
        "budget": budget,
        "sets": sets,
        "profile": a.profile,
        "tile_folds": a.tile_folds,
        "models": a.models,
        "ensemble": {
            "members": cfg.ensemble.models,
            "normalize": {c: cfg.for_collection(c).ensemble.normalize for c in (rd.LAYOUT, rd.TILE)},
            "weights": "equal (not fitted)",
        },
    }


if __name__ == "__main__":
    raise SystemExit(main())
