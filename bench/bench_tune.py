"""Calibration and the autotuning loop measured on real programs (`rank --measured`, `Tuner`).

Every real program with runtimes is ranked by models trained on the others (the `cpu` profile, as
`tpurank` trains them, through the CLI, into `--work`):

- layout (`layout:xla:default`): the sample's two real xla graphs with runtimes, each ranked by
  models trained on the other (`unet_3d.4x4.bf16`, 1965 configs; `unet3d`, 1159), and the real
  layout protobuf's measured runs (the `unet_3d.4x4.bf16` module: models trained on `unet3d`);
- tile (`tile:xla`): the 15 real kernels of the tile protobuf, by kernel-grouped folds (no kernel
  in its own training fold).

For each program, k configs drawn at random among those with a runtime are measured (k in `--ks`,
`--draws` draws each); the models calibrate on them and rank the others: Kendall tau on the configs
not measured, for every calibration variant (`--variants`), beside the uncalibrated model's tau
on the same configs. Then the loop (`tpurank.tune.replay`): rounds of `--per-round` proposals,
the best runtime found over the true best after m measurements against random search (expected)
and the uncalibrated model, and the measurements each needed to come within 0.5% of the best.

    .venv/bin/python bench/bench_tune.py --work /tmp/bench-tune             # everything
    .venv/bin/python bench/bench_tune.py --only layout --gnn-steps 0         # LightGBM only, layout
    .venv/bin/python bench/bench_tune.py --variants boost:w=10:r=50 refit:w=10 --ks 0 20
    .venv/bin/python bench/bench_tune.py --table bench/results/tune_layout.json   # saved tables

Quality figures are valid on a loaded machine; the calibration seconds it prints are not (the cost
target is bench/bench_tune_cost.py's). Saves bench/results/tune.json (or --out). Exits 0 with the
reason when ../shared is absent.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import time
import zlib
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

import real_data as rd  # noqa: E402

from tpurank.core.metrics import kendall_tau, order_from_costs, slowdown_at_k  # noqa: E402
from tpurank.core.paths import NPZ_SUBDIR  # noqa: E402
from tpurank.rank.calibrate import Calibration  # noqa: E402
from tpurank.rank.program import Program  # noqa: E402
from tpurank.tune.replay import replay  # noqa: E402
from tpurank.tune.tuner import Tuner, Tuning  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "tune.json"
PYTHON = sys.executable
LAYOUT_PB = "pb/module_tuning_data_layout.pb"
MIN_LEFT = 10  # configs left to score: fewer and a tau is noise
DEFAULT_VARIANTS = ["boost:w=auto:r=50", "refit:w=1"]  # the default calibration, then the alternative
LOOP_AT = (5, 10, 20, 50, 100)  # measurements at which the loop's slowdowns are reported


def parse_variant(text: str) -> Calibration:
    """`boost:w=10:r=50`, `refit:w=3`, `boost:w=auto:r=50:e=lgbm` -> a Calibration (w=auto: the
    weight grows with the measurements, `Calibration.weight_for`)."""
    method, *parts = text.split(":")
    keys = {"w": "weight", "r": "rounds", "e": "ensemble"}
    values = {keys[k]: v for k, _, v in (p.partition("=") for p in parts)}
    kinds = {"weight": lambda v: None if v == "auto" else float(v), "rounds": int, "ensemble": str}
    kwargs = {k: kinds[k](v) for k, v in values.items()}
    return Calibration(method=method, **kwargs)


def train(root: Path, folder: Path, collection: str, a: argparse.Namespace) -> tuple[Path, Path]:
    """The cpu profile's models of `collection` on a data root: (out folder, prepared cache)."""
    out, work, log = folder / "out", folder / "work", folder / "train.log"
    models = ["lgbm", "gnn"] if a.gnn_steps else ["lgbm"]
    sets = [f"ensemble.models={models!r}".replace(" ", ""), f"seed={a.seed}", *a.set]
    if a.gnn_steps:  # one seed of a fixed length: the issue's own GNN row
        sets += ["gnn.seeds=1", f"gnn.max_steps={a.gnn_steps}", "gnn.time_budget_min=0"]
        sets += [f"gnn.eval_every={a.gnn_steps}", f"gnn.warmup_steps={a.gnn_steps // 10}"]
    common = ["--data-dir", str(root), "--out-dir", str(out), "--work-dir", str(work), "--profile", "cpu"]
    common += [x for s in sets for x in ("--set", s)]
    only = ["--collections", collection]
    rd.stage(["prepare", "--no-progress", *only, *common], log)
    rd.stage(["features", *only, *common], log)
    for m in models:
        rd.stage(["train", "--model", m, *only, *common], log)
        rd.stage(["predict", "--model", m, "--split", "valid", "--partial", *only, *common], log)
    rd.stage(["train", "--model", "ensemble", *only, *common], log)
    return out, work / "features" / "prepared"


def swapped_layout_root(folder: Path) -> Path:
    """The layout data root the other way round: train on unet_3d.4x4.bf16, rank unet3d."""
    npz = folder / NPZ_SUBDIR / "layout/xla/default"
    for split in ("train", "valid", "test"):
        (npz / split).mkdir(parents=True, exist_ok=True)
        for old in (npz / split).glob("*.npz"):
            old.unlink()
    scored, trained = rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_TRAIN, rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_SCORED
    (npz / "train" / trained.name).symlink_to(trained)
    (npz / "valid" / f"{rd.FIT_PREFIX}{trained.name}").symlink_to(trained)
    (npz / "test" / scored.name).symlink_to(scored)
    return folder


def layout_programs(a: argparse.Namespace) -> list[tuple[str, Path, Path, Path]]:
    """(name, file, out folder, prepared cache) of each real layout program and its models."""
    base = a.work / "layout"
    forward = rd.layout_root(base / "fwd" / "data")
    out_f, prep_f = train(forward, base / "fwd", rd.LAYOUT, a)
    found = [
        ("unet_3d.4x4.bf16 (npz)", rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_SCORED, out_f, prep_f),
        ("unet_3d.4x4.bf16 (pb runs)", rd.SHARED / LAYOUT_PB, out_f, prep_f),
    ]
    if a.forward_only:
        return found
    backward = swapped_layout_root(base / "bwd" / "data")
    out_b, prep_b = train(backward, base / "bwd", rd.LAYOUT, a)
    return [found[0], ("unet3d (npz)", rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_TRAIN, out_b, prep_b), found[1]]


def tile_programs(a: argparse.Namespace) -> list[tuple[str, Path, Path, Path]]:
    """(name, kernel npz, out folder, prepared cache) of each real tile kernel and its fold's models."""
    base = a.work / "tile"
    base.mkdir(parents=True, exist_ok=True)
    folder = base / "kernels"
    rd.stage(
        ["featurize-pb", str(rd.SHARED / rd.TILE_PB), str(folder), "--kind", "tile"], base / "featurize.log"
    )
    kernels = sorted(folder.glob("*.npz"))
    out = []
    for i, held in enumerate(rd.kernel_folds(len(kernels), a.tile_folds, seed=0)):
        root = rd.tile_root(base / f"fold{i}" / "data", kernels, held)
        models, prepared = train(root, base / f"fold{i}", rd.TILE, a)
        out += [(kernels[j].stem, kernels[j], models, prepared) for j in held]
    return out


def truth_of(program: Program) -> np.ndarray:
    """Each config's runtime as scored (tile: over its normalizer), 0 where not measured."""
    c = program.candidates
    rt = c.runtime.astype(np.float64)
    return rt if c.normalizer is None else np.where(rt > 0, rt / np.maximum(c.normalizer, 1), 0.0)


def draws(program: Program, k: int, draw: int) -> np.ndarray:
    """k positions drawn among the configs with a runtime (seeded by program, k and draw)."""
    known = np.flatnonzero(program.candidates.runtime > 0)
    rng = np.random.default_rng([draw, k, zlib.crc32(program.name.encode())])
    return np.sort(rng.choice(known, size=k, replace=False))


def scores(costs: np.ndarray, truth: np.ndarray, left: np.ndarray) -> dict[str, float]:
    """Kendall tau and top-5 slowdown of `costs` over the configs of `left`."""
    order = order_from_costs(costs[left])
    return {"tau": kendall_tau(order, truth[left]), "slowdown@5": slowdown_at_k(order, truth[left], 5)}


def calibrations(program: Program, variants: list[str], a: argparse.Namespace) -> list[dict]:
    """One record per (k, draw, variant): scores on the configs not measured, and seconds."""
    truth, rows = truth_of(program), []
    known = truth > 0
    with_gnn = program.weights is not None and len(program.weights["members"]) > 1
    members = ["lgbm", "ensemble"] if with_gnn else ["lgbm"]
    for k in a.ks:
        if known.sum() - k < MIN_LEFT:
            continue
        for draw in range(a.draws if k else 1):
            measured = draws(program, k, draw)
            left = known.copy()
            left[measured] = False
            for model in members:
                p = dataclasses.replace(program, model=model)
                base = scores(p.costs[model], truth, left)
                rows.append(
                    {"k": k, "draw": draw, "model": model, "variant": "uncalibrated", **base, "s": 0.0}
                )
                for v in variants if k else []:
                    t = time.perf_counter()
                    costs = p.costs_with(
                        measured, program.candidates.runtime[measured].astype(float), parse_variant(v)
                    )
                    rows.append({"k": k, "draw": draw, "model": model, "variant": v, **scores(costs, truth, left),
                                 "s": round(time.perf_counter() - t, 3)})  # fmt: skip
    return rows


def loop(program: Program, variant: str, a: argparse.Namespace) -> dict:
    """The replayed loop on one program: its rounds and the measurements each search needed."""
    known = program.candidates.runtime > 0
    tuning = Tuning(program, parse_variant(variant), program.candidates.file_index[known])
    n = int(known.sum())
    per_round = a.per_round if n > 4 * a.per_round else 1  # a small kernel: one at a time
    rounds = min(a.rounds, -(-n // per_round))  # a small program: until every config is measured
    return replay(tuning, truth_of(program), rounds, per_round, a.explore).as_json()


def shrink_training_rows(program: Program, share: float, seed: int) -> None:
    """Keep `share` of each shipped training query (at least 2 rows): the full dataset trains on
    far more rows than the bound ships (tpurank.lgbm.training_rows), which the sample's small
    training sets cannot show. A refit sees only what ships; boosting keeps the trained trees."""
    t = program.lgbm.training if program.lgbm else None
    if t is None:
        return
    rng = np.random.default_rng(seed)
    starts = np.cumsum(np.r_[0, t.sizes[:-1]])
    keep = [np.sort(rng.choice(np.arange(s, s + n), max(2, round(n * share)), replace=False))
            for s, n in zip(starts, t.sizes, strict=True)]  # fmt: skip
    rows = np.concatenate(keep)
    sizes = np.array([len(k) for k in keep], dtype=np.int64)
    program.lgbm.training = dataclasses.replace(t, x=t.x[rows], runtime=t.runtime[rows], sizes=sizes)


def run_kind(kind: str, a: argparse.Namespace) -> list[dict]:
    """Every program of one kind: its calibration records and its loop."""
    programs = layout_programs(a) if kind == "layout" else tile_programs(a)
    collection = rd.LAYOUT if kind == "layout" else rd.TILE
    out = []
    for name, file, models, prepared in programs:
        t = time.perf_counter()
        with Tuner.load(models, prepared=prepared) as tuner:
            program = tuner.programs(file, kind, collection if kind == "layout" else None)[0]
            if a.threads and program.lgbm is not None:
                program.lgbm.params["num_threads"] = a.threads
            if a.training_share < 1:
                shrink_training_rows(program, a.training_share, a.seed)
            record = {
                "program": name,
                "file": str(file),
                "configs": int((program.candidates.runtime > 0).sum()),
            }
            record["calibration"] = calibrations(program, a.variants, a)
            lgbm_only = dataclasses.replace(program, model="lgbm")
            with_gnn = len(program.weights["members"]) > 1 if program.weights else False
            pairs = [("lgbm", lgbm_only)] + ([(program.model, program)] if with_gnn else [])
            record["loop"] = {m: loop(q, a.variants[0], a) for m, q in pairs}
        print(f"  {kind} {name}: {record['configs']} configs, {time.perf_counter() - t:.0f} s", flush=True)
        out.append(record)
    return out


def _mean(values: list[float]) -> float:
    v = [x for x in values if x is not None and not np.isnan(x)]
    return float(np.mean(v)) if v else float("nan")


def calibration_table(records: list[dict], ks: list[int], metric: str = "tau") -> str:
    """Per model and variant, the mean over programs and draws of `metric` on the configs not
    measured, per k; the uncalibrated model on the same configs beside it."""
    rows = [r | {"program": rec["program"]} for rec in records for r in rec["calibration"]]
    ks = [k for k in ks if any(r["k"] == k for r in rows)]
    lines = [f"| model, calibration | {' | '.join(f'k = {k}' for k in ks)} | seconds per calibration |",
             "|---|" + "---|" * (len(ks) + 1)]  # fmt: skip
    for model in dict.fromkeys(r["model"] for r in rows):
        for v in dict.fromkeys(r["variant"] for r in rows if r["model"] == model):
            cells = []
            for k in ks:
                got = [r[metric] for r in rows if r["model"] == model and r["variant"] == v and r["k"] == k]
                if not got and k == 0:  # a variant at k = 0 is the uncalibrated model
                    got = [r[metric] for r in rows if r["model"] == model and r["k"] == 0]
                cells.append(f"{_mean(got):.4f}" if got else "-")
            secs = [r["s"] for r in rows if r["model"] == model and r["variant"] == v and r["k"]]
            lines.append(f"| {model}, {v} | {' | '.join(cells)} | {_mean(secs):.2f} |")
    return "\n".join(lines)


def per_program_table(records: list[dict], ks: list[int], model: str, variant: str) -> str:
    """One row per program: tau on the configs not measured for each k (each draw, then the mean)."""
    lines = [f"| program (configs) | {' | '.join(f'k = {k}' for k in ks)} |", "|---|" + "---|" * len(ks)]
    for rec in records:
        cells = []
        for k in ks:
            got = [r["tau"] for r in rec["calibration"] if r["model"] == model and r["k"] == k
                   and r["variant"] == (variant if k else "uncalibrated")]  # fmt: skip
            cells.append("-" if not got else f"{got[0]:.3f}" if len(got) == 1 else
                          ", ".join(f"{g:.3f}" for g in got) + f" (mean {_mean(got):.3f})")  # fmt: skip
        lines.append(f"| {rec['program']} ({rec['configs']}) | {' | '.join(cells)} |")
    return "\n".join(lines)


def loop_table(records: list[dict], model: str) -> str:
    """The loop's best found over the true best after m measurements (mean over programs), beside
    random search and the uncalibrated model; then the measurements each needed."""
    lines = [
        "| measured | loop | random search (expected) | uncalibrated model | programs "
        "| tau of the loop on the rest | tau uncalibrated, same configs |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in LOOP_AT:
        got = [next((r for r in rec["loop"][model]["rounds"] if r["measured"] == m), None) for rec in records
               if model in rec["loop"]]  # fmt: skip
        got = [g for g in got if g is not None]
        if got:
            cells = [f"{_mean([g[c] for g in got]):.4f}" for c in ("tuner", "random", "model")]
            taus = [f"{_mean([g[c] for g in got]):.4f}" for c in ("tau", "tau_model")]
            lines.append(f"| {m} | {' | '.join(cells)} | {len(got)} | {' | '.join(taus)} |")
    lines += [
        "",
        "| program (configs) | loop | random search (expected) | uncalibrated model |",
        "|---|---|---|---|",
    ]
    for rec in records:
        n = rec["loop"].get(model, {}).get("needed")
        if n:
            loop_n = "-" if n["tuner"] is None else n["tuner"]
            lines.append(
                f"| {rec['program']} ({rec['configs']}) | {loop_n} | {n['random']:.1f} | {n['model']} |"
            )
    needed = [rec["loop"][model]["needed"] for rec in records if model in rec["loop"]]
    fewer = sum(n["tuner"] is not None and n["tuner"] < n["random"] for n in needed)
    more = sum(n["tuner"] is None or n["tuner"] > n["random"] for n in needed)
    lines.append(f"\nthe loop needed fewer than random search on {fewer} programs, more on {more}")
    reached = [n["tuner"] for n in needed if n["tuner"] is not None]
    lines.append(
        f"\nmeasurements to come within 0.5% of the best (mean over {len(needed)} programs): loop "
        f"{_mean(reached):.1f} (reached by {len(reached)} of {len(needed)}), random search "
        f"{_mean([n['random'] for n in needed]):.1f} (expected), uncalibrated model "
        f"{_mean([n['model'] for n in needed]):.1f}"
    )
    return "\n".join(lines)


def report(res: dict) -> str:
    out = []
    for kind in ("layout", "tile"):
        if kind not in res:
            continue
        recs = res[kind]
        out.append(f"## {kind}: tau on the configs not measured (mean over programs and draws)\n")
        out.append(calibration_table(recs, res["ks"]))
        out.append(f"\n## {kind}: per program, lgbm, {res['variants'][0]}\n")
        out.append(per_program_table(recs, res["ks"], "lgbm", res["variants"][0]))
        for model in dict.fromkeys(m for rec in recs for m in rec["loop"]):
            out.append(f"\n## {kind}: the loop ({model}, {res['variants'][0]})\n")
            out.append(loop_table(recs, model))
    return "\n".join(out)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", choices=["layout", "tile"], help="one of the two kinds")
    p.add_argument("--ks", type=int, nargs="+", default=[0, 10, 20, 50, 100], help="measured configs")
    p.add_argument("--draws", type=int, default=3, help="random draws of the k measured configs")
    p.add_argument("--variants", nargs="+", default=DEFAULT_VARIANTS,
                   help="calibrations, METHOD[:w=WEIGHT][:r=ROUNDS][:e=kept|lgbm]; the first runs the loop")  # fmt: skip
    p.add_argument(
        "--gnn-steps", type=int, default=300, help="GNN training steps, one seed (0: LightGBM only)"
    )
    p.add_argument(
        "--forward-only",
        action="store_true",
        help="layout: only the programs ranked by models trained on unet3d",
    )
    p.add_argument("--tile-folds", type=int, default=5, help="kernel folds (15 = leave one kernel out)")
    p.add_argument("--rounds", type=int, default=10, help="rounds of the loop")
    p.add_argument(
        "--per-round", type=int, default=10, help="configs per round (a small program: a tenth of it)"
    )
    p.add_argument("--seed", type=int, default=0, help="the models' training seed")
    p.add_argument(
        "--explore", type=float, default=0.0, help="the loop's share of each round drawn at random"
    )
    p.add_argument("--threads", type=int, default=0, help="LightGBM threads calibrating (0: as trained)")
    p.add_argument(
        "--training-share",
        type=float,
        default=1.0,
        help="share of the shipped training rows calibration sees",
    )
    p.add_argument(
        "--set", action="append", default=[], metavar="KEY=VALUE", help="config override for training"
    )
    p.add_argument("--work", type=Path, default=Path("/tmp/bench-tune"), help="models and caches (rebuilt)")
    p.add_argument("--reuse", action="store_true", help="keep --work's trained models (same settings only)")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument(
        "--table", type=Path, nargs="+", metavar="RESULTS", help="only print the tables of saved results"
    )
    a = p.parse_args()
    if a.table:
        for f in a.table:
            print(f"# {f}: {json.loads(f.read_text())['command']}\n\n{report(json.loads(f.read_text()))}\n")
        return 0
    if reason := rd.missing_sample(rd.SHARED):
        print(f"bench_tune: skipped: {reason}")
        return 0
    for v in a.variants:
        parse_variant(v)  # a bad variant stops before hours of training
    if a.work.exists() and not a.reuse:
        shutil.rmtree(a.work)
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    res: dict = {"command": " ".join(["bench/bench_tune.py", *sys.argv[1:]]), "commit": commit.stdout.strip(),
                 "ks": a.ks, "draws": a.draws, "variants": a.variants, "gnn_steps": a.gnn_steps,
                 "profile": "cpu", "tile_folds": a.tile_folds, "sets": a.set, "training_share": a.training_share, "explore": a.explore, "forward_only": a.forward_only,
                 "load": os.getloadavg()[0]}  # fmt: skip
    for kind in ("layout", "tile"):
        if a.only in (None, kind):
            print(f"{kind}: training and calibrating", flush=True)
            res[kind] = run_kind(kind, a)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["report"] = report(res)
    print(f"\n{res['report']}\n\n{res['seconds'] / 60:.1f} min")
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
