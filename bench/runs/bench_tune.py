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

    .venv/bin/python bench/runs/bench_tune.py --work /tmp/bench-tune             # everything
    .venv/bin/python bench/runs/bench_tune.py --only layout --gnn-steps 0         # LightGBM only, layout
    .venv/bin/python bench/runs/bench_tune.py --variants boost:w=10:r=50 refit:w=10 --ks 0 20
    .venv/bin/python bench/runs/bench_tune.py --table bench/results/tune_layout.json   # saved tables
    .venv/bin/python bench/runs/bench_tune.py --only layout --models gnn --rounds 0 \
        --variants boost:g=20:lr=5e-4                                         # GNN fine-tuning

A variant `METHOD[:w=WEIGHT][:r=ROUNDS][:e=kept|lgbm][:g=STEPS][:lr=LR][:gs=SECONDS][:gm=MEMBERS][:sel=0|1]
[:m=MARGIN][:f=FOLDS][:reach=R][:s=SEED]` is a `Calibration`; `g` fine-tunes the GNN (`FineTune(steps, seconds, lr,
members)`: `gm` the seed members fine-tuned, all by default), which
calibrates the `gnn` model and, with `e=kept` or `sel=1`, the ensemble's GNN member; `sel=0` uses the
calibrated models whole, `sel=1` (the default) trusts them as far as held-out folds of the measured
configs say (`m`: the margin, `f`: the folds, `reach`: how far from the measured configs a
calibration is trusted, `inf` everywhere; tpurank.rank.select). Variants share each fit they have in common (`memoize`).

`--measure uniform top` scores both ways of choosing the k measured configs: a uniform draw, and each
model's own top k (what an autotuner measures first; its draws vary the calibration's seed).
`--loop-seeds N` replays the loop with N calibration seeds.

Quality figures are valid on a loaded machine; the calibration seconds it prints are not (the cost
target is bench/runs/bench_tune_cost.py's). Saves bench/results/tune.json (or --out). Exits 0 with the
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
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import provenance  # noqa: E402
import real_data as rd  # noqa: E402
import tune_programs  # noqa: E402
import tune_tables  # noqa: E402

from tpurank.core.metrics import kendall_tau, order_from_costs, slowdown_at_k  # noqa: E402
from tpurank.rank.calibrate import Calibration, LgbmInputs  # noqa: E402
from tpurank.rank.finetune import FineTune, GnnInputs  # noqa: E402
from tpurank.rank.program import Program  # noqa: E402
from tpurank.tune.replay import replay  # noqa: E402
from tpurank.tune.tuner import Tuner, Tuning  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "tune.json"
MIN_LEFT = 10  # configs left to score: fewer and a tau is noise
DEFAULT_VARIANTS = ["boost:w=auto:r=50", "refit:w=1"]  # the default calibration, then the alternative


def parse_variant(text: str) -> Calibration:
    """`boost:w=10:r=50`, `refit:w=3`, `boost:w=auto:r=50:e=kept:g=20:lr=5e-4` -> a Calibration
    (w=auto: the weight grows with the measurements, `Calibration.weight_for`; g: GNN fine-tuning
    steps, with lr and gs (seconds) its `FineTune`)."""
    method, *parts = text.split(":")
    keys = {
        "w": "weight",
        "r": "rounds",
        "e": "ensemble",
        "g": "steps",
        "lr": "lr",
        "gs": "seconds",
        "gm": "members",
    }
    keys |= {"sel": "select", "m": "margin", "f": "folds", "reach": "reach", "s": "seed"}
    values = {keys[k]: v for k, _, v in (p.partition("=") for p in parts)}
    kinds = {"weight": lambda v: None if v == "auto" else float(v), "rounds": int, "ensemble": str}
    kinds |= {"steps": int, "lr": float, "seconds": float, "members": int, "select": lambda v: v == "1"}
    kinds |= {"margin": float, "folds": int, "reach": float, "seed": int}
    kwargs = {k: kinds[k](v) for k, v in values.items()}
    tune = {k: kwargs.pop(k) for k in ("steps", "lr", "seconds", "members") if k in kwargs}
    gnn = FineTune(**tune) if "steps" in tune else None
    if tune and gnn is None:
        raise SystemExit(f"{text}: lr, gs and gm set the GNN's fine-tuning: name its steps too (g=STEPS)")
    return Calibration(method=method, gnn=gnn, gnn_tile=gnn is not None, **kwargs)


def memoize() -> None:
    """Every LightGBM calibration and GNN fine-tuning computed once per inputs: variants that differ
    only in how far they trust a calibration (select, margin, reach) share the same fits, and the
    ensemble shares its members'. Results are the same as without: each fit is seeded."""
    cache: dict[tuple, np.ndarray | None] = {}

    def wrap(cls: type, key_of) -> None:  # noqa: ANN001
        plain = cls.calibrated

        def calibrated(self, positions, runtime, *args, **kw):  # noqa: ANN001, ANN202
            key = (id(self), positions.tobytes(), np.asarray(runtime).tobytes(), *key_of(*args, **kw))
            if key not in cache:
                cache[key] = plain(self, positions, runtime, *args, **kw)
            return cache[key]

        cls.calibrated = calibrated

    def lgbm_key(how: Calibration, scored: np.ndarray | None = None, threads: int | None = None) -> tuple:
        return how.method, how.weight, how.rounds, how.seed, None if scored is None else scored.tobytes()

    def gnn_key(
        how: FineTune,
        seed: int,
        scored: np.ndarray | None = None,
        members: int | None = None,
        threads: int | None = None,
    ) -> tuple:  # the members fine-tuned, however named: a fold's fit is shared across `gm`
        count = min((n for n in (members, how.members) if n is not None), default=None)
        return (
            dataclasses.replace(how, members=None),
            seed,
            None if scored is None else scored.tobytes(),
            count,
        )

    wrap(LgbmInputs, lgbm_key)
    wrap(GnnInputs, gnn_key)


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


def members_of(program: Program, wanted: list[str] | None) -> list[str]:
    """The models scored: LightGBM, the GNN and the ensemble where trained, or those of `wanted`."""
    trained = list(program.weights["members"]) if program.weights else ["lgbm"]
    found = [m for m in ("lgbm", "gnn") if m in trained] + (["ensemble"] if len(trained) > 1 else [])
    return [m for m in found if wanted is None or m in wanted]


def top_of(program: Program, model: str, k: int) -> np.ndarray:
    """The model's own k best-ranked configs among those with a runtime (what an autotuner measures)."""
    known = program.candidates.runtime > 0
    order = [p for p in order_from_costs(program.costs[model]) if known[p]]
    return np.sort(np.asarray(order[:k], dtype=np.int64))


def calibrations(program: Program, variants: list[str], a: argparse.Namespace) -> list[dict]:
    """One record per (measure, k, draw, model, variant): scores on the configs not measured, and
    seconds. `uniform`: k configs drawn at random; `top`: the model's own top k, each draw calibrated
    with another seed."""
    truth, rows = truth_of(program), []
    known = truth > 0
    for measure in a.measure:
        for k in a.ks:
            if known.sum() - k < MIN_LEFT or (measure == "top" and not k):
                continue
            for draw in range(a.draws if k else 1):
                for model in members_of(program, a.models):
                    measured = draws(program, k, draw) if measure == "uniform" else top_of(program, model, k)
                    rows += calibrate_one(program, model, measured, truth, variants, measure, draw)
    return rows


def calibrate_one(
    program: Program,
    model: str,
    measured: np.ndarray,
    truth: np.ndarray,
    variants: list[str],
    measure: str,
    draw: int,
) -> list[dict]:
    """One model calibrated on one measured set by each variant, and as trained on the same configs."""
    left = truth > 0
    left[measured] = False
    runtime = program.candidates.runtime[measured].astype(float)
    p = dataclasses.replace(program, model=model)
    row = {"measure": measure, "k": len(measured), "draw": draw, "model": model}
    rows = [row | {"variant": "uncalibrated", **scores(p.costs[model], truth, left), "s": 0.0}]
    for v in variants if len(measured) else []:
        how = parse_variant(v)
        if measure == "top":  # one measured set: the draws vary the calibration's seed
            how = dataclasses.replace(how, seed=draw)
        t = time.perf_counter()
        costs = p.costs_with(measured, runtime, how)
        took = round(time.perf_counter() - t, 3)
        rows.append(row | {"variant": v, **scores(costs, truth, left), "s": took})
        print(
            f"    {program.name} {measure} k={len(measured)} draw {draw} {model} {v}: {rows[-1]['tau']:.4f}",
            flush=True,
        )
    return rows


def loop(program: Program, variant: str, a: argparse.Namespace) -> dict:
    """The replayed loop on one program: its rounds and the measurements each search needed."""
    known = program.candidates.runtime > 0
    tuning = Tuning(program, parse_variant(variant), program.candidates.file_index[known])
    n = int(known.sum())
    per_round = a.per_round if n > 4 * a.per_round else 1  # a small kernel: one at a time
    rounds = min(a.rounds, -(-n // per_round))  # a small program: until every config is measured
    return replay(tuning, truth_of(program), rounds, per_round, a.explore).as_json()


def loops(program: Program, variant: str, a: argparse.Namespace) -> list[dict]:
    """The loop replayed once per calibration seed (`--loop-seeds`)."""
    out = []
    for seed in range(a.loop_seeds):
        v = variant if not seed else f"{variant}:s={seed}"
        out.append(loop(program, v, a) | {"seed": seed})
    return out


def shrink_training_rows(program: Program, share: float, seed: int) -> None:
    """Keep `share` of each shipped training query (at least 2 rows): the full dataset trains on
    far more rows than the bound ships (tpurank.lgbm.training_rows), which the sample's small
    training sets cannot show. A refit sees only what ships; boosting keeps the trained trees."""
    t = program.lgbm.training if program.lgbm else None
    if t is None:
        return
    rng = np.random.default_rng(seed)
    starts = np.cumsum(np.r_[0, t.sizes[:-1]])
    keep = [
        np.sort(rng.choice(np.arange(s, s + n), max(2, round(n * share)), replace=False))
        for s, n in zip(starts, t.sizes, strict=True)
    ]
    rows = np.concatenate(keep)
    sizes = np.array([len(k) for k in keep], dtype=np.int64)
    program.lgbm.training = dataclasses.replace(t, x=t.x[rows], runtime=t.runtime[rows], sizes=sizes)


def run_kind(kind: str, a: argparse.Namespace) -> list[dict]:
    """Every program of one kind: its calibration records and its loop."""
    programs = tune_programs.layout_programs(a) if kind == "layout" else tune_programs.tile_programs(a)
    collection = rd.LAYOUT if kind == "layout" else rd.TILE
    out = []
    for name, file, models, prepared in programs:
        if a.programs and not any(name.startswith(p) for p in a.programs):
            continue
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
            looped = members_of(program, a.models) if a.rounds else []
            record["loops"] = {
                m: loops(dataclasses.replace(program, model=m), a.variants[0], a) for m in looped
            }
            record["loop"] = {m: runs[0] for m, runs in record["loops"].items()}
        print(f"  {kind} {name}: {record['configs']} configs, {time.perf_counter() - t:.0f} s", flush=True)
        out.append(record)
    return out


def arguments() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = p.add_argument
    add("--only", choices=["layout", "tile"], help="one of the two kinds")
    add("--ks", type=int, nargs="+", default=[0, 10, 20, 50, 100], help="measured configs")
    add("--draws", type=int, default=3, help="random draws of the k measured configs")
    add(
        "--variants",
        nargs="+",
        default=DEFAULT_VARIANTS,
        help="calibrations (above); the first runs the loop",
    )
    add("--models", nargs="+", choices=["lgbm", "gnn", "ensemble"], help="the models scored (default: all)")
    add("--gnn-steps", type=int, default=300, help="GNN training steps (0: LightGBM only)")
    add("--gnn-seeds", type=int, default=1, help="GNN seed members trained (the cpu profile trains 3)")
    add(
        "--forward-only",
        action="store_true",
        help="layout: only the programs of the models trained on unet3d",
    )
    add("--tile-folds", type=int, default=5, help="kernel folds (15 = leave one kernel out)")
    add("--rounds", type=int, default=10, help="rounds of the loop (0: no loop)")
    add("--loop-seeds", type=int, default=1, help="the loop replayed with calibration seeds 0..N-1")
    add(
        "--measure",
        nargs="+",
        choices=["uniform", "top"],
        default=["uniform"],
        help="the measured configs: drawn at random, or each model's own top k",
    )
    add("--per-round", type=int, default=10, help="configs per round (a small program: a tenth of it)")
    add("--seed", type=int, default=0, help="the models' training seed")
    add("--explore", type=float, default=0.0, help="the loop's share of each round drawn at random")
    add("--threads", type=int, default=0, help="LightGBM and torch threads calibrating (0: as trained)")
    add(
        "--training-share",
        type=float,
        default=1.0,
        help="share of the shipped training rows calibration sees",
    )
    add("--set", action="append", default=[], metavar="KEY=VALUE", help="config override for training")
    add("--programs", nargs="+", metavar="NAME", help="only the programs whose names start so (default: all)")
    add("--work", type=Path, default=Path("/tmp/bench-tune"), help="models and caches (rebuilt)")
    add("--reuse", action="store_true", help="keep --work's trained models (same settings only)")
    add("--out", type=Path, default=RESULTS)
    add("--table", type=Path, nargs="+", metavar="RESULTS", help="only print the tables of saved results")
    return p.parse_args()


def main() -> int:
    a = arguments()
    if a.table:
        for f in a.table:
            res = json.loads(f.read_text())
            print(f"# {f}: {res['command']}\n\n{tune_tables.report(res)}\n")
        return 0
    if reason := rd.missing_sample(rd.SHARED):
        print(f"bench_tune: skipped: {reason}")
        return 0
    for v in a.variants:
        parse_variant(v)  # a bad variant stops before hours of training
    if a.work.exists() and not a.reuse:
        shutil.rmtree(a.work)
    a.work.mkdir(parents=True, exist_ok=True)
    if a.threads:
        torch.set_num_threads(a.threads)
    memoize()
    t0 = time.perf_counter()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT)
    res: dict = {
        "command": " ".join(["bench/runs/bench_tune.py", *sys.argv[1:]]),
        "commit": commit.stdout.strip(),
    }
    res |= {k: getattr(a, k) for k in ("ks", "draws", "variants", "gnn_steps", "gnn_seeds", "tile_folds")} | {
        "sets": a.set
    }
    res |= {k: getattr(a, k) for k in ("training_share", "explore", "forward_only", "models", "programs")}
    res |= {k: getattr(a, k) for k in ("measure", "rounds", "per_round", "loop_seeds")}
    res |= {"profile": "cpu", "load": os.getloadavg()[0]}
    for kind in ("layout", "tile"):
        if a.only in (None, kind):
            print(f"{kind}: training and calibrating", flush=True)
            res[kind] = run_kind(kind, a)
    res["seconds"] = round(time.perf_counter() - t0, 1)
    res["report"] = tune_tables.report(res)
    print(f"\n{res['report']}\n\n{res['seconds'] / 60:.1f} min")
    res["provenance"] = provenance.stamp()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(res, indent=1) + "\n")
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
