"""`tpurank tune FILE --models DIR --rounds R --per-round M`: the autotuning loop replayed on a file
whose configs have measured runtimes.

Each round proposes M configs, reads their runtimes from FILE as if it had measured them, calibrates
and proposes again (tpurank.tune.replay). After each round it prints the best runtime found over
the true best, beside random search with as many measurements (its expectation) and beside the
uncalibrated model; at the end, how many measurements each needed to come within 0.5% of the best.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

import numpy as np

from tpurank.core.atomic import write_text
from tpurank.core.env import WORK
from tpurank.core.errors import TpurankError
from tpurank.rank.cli import add_gnn_tuning, add_model_choice, calibration
from tpurank.tune.replay import TOLERANCE, TOP_K, Replay, replay
from tpurank.tune.tuner import Tuner, Tuning


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", metavar="FILE", help=".pb or .npz whose configs have measured runtimes")
    p.add_argument("--models", required=True, metavar="DIR", help="a trained out folder, or a models dataset")
    p.add_argument("--rounds", type=int, default=5, metavar="R", help="rounds of the loop (default 5)")
    p.add_argument(
        "--per-round", type=int, default=10, metavar="M", help="configs measured per round (default 10)"
    )
    p.add_argument("--graph", action="append", metavar="NAME", help="only this graph of FILE (repeatable)")
    add_model_choice(p)
    p.add_argument("--seed", type=int, default=0, help="seeds the calibration: a replay is repeatable")
    add_gnn_tuning(p)
    p.add_argument(
        "--explore",
        type=float,
        default=0.0,
        metavar="SHARE",
        help="share of each round drawn at random (default 0)",
    )
    p.add_argument("--out", type=Path, metavar="FILE.json", help="every round of every graph, as JSON")
    p.add_argument("--work", type=Path, metavar="DIR", help="work folder, kept (default: a temporary one)")


def table(r: Replay) -> str:
    """One graph's replay: a row per round, then the measurements each search needed."""
    lines = [
        "| measured | loop: best found / true best | random search (expected) | uncalibrated model "
        "| tau of the loop on the rest | tau uncalibrated, same configs |",
        "|---|---|---|---|---|---|",
    ]
    for row in r.rounds:
        lines.append(
            f"| {row.measured} | {row.tuner:.4f} | {row.random:.4f} | {row.model:.4f} "
            f"| {_num(row.tau)} | {_num(row.tau_model)} |"
        )
    n = r.needed
    tuner = (
        f"{n['tuner']}"
        if n["tuner"] is not None
        else f"not within {r.rounds[-1].measured if r.rounds else 0}"
    )
    lines.append(
        f"measurements to come within {TOLERANCE:.1%} of the best: loop {tuner}, random search "
        f"{n['random']:.1f} (expected), uncalibrated model {n['model']}"
    )
    lines.append(top_k_line(r))
    return "\n".join(lines)


def top_k_line(r: Replay) -> str:
    """`top-K error (best of the first K over the best, minus 1): K = 1: loop 0.0123, ...`."""
    e = r.top_k_error
    cells = [
        f"K = {k}: loop {_err(e['tuner'][k])}, random search {_err(e['random'][k])}, "
        f"uncalibrated model {_err(e['model'][k])}"
        for k in TOP_K
    ]
    return "top-K error (the best of the first K over the true best, minus 1): " + "; ".join(cells)


def _err(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"


def _num(v: float) -> str:
    return "-" if math.isnan(v) else f"{v:.4f}"


def replay_one(tuning: Tuning, rounds: int, per_round: int, explore: float = 0.0) -> Replay:
    """Replay the loop on one graph with its runtimes in the file."""
    truth = tuning.program.candidates.runtime.astype(np.float64)
    if tuning.program.candidates.normalizer is not None:  # tile: compared as the competition does
        truth = np.where(truth > 0, truth / np.maximum(tuning.program.candidates.normalizer, 1), 0.0)
    return replay(tuning, truth, rounds, per_round, explore)


def run(args: argparse.Namespace) -> int:
    if args.rounds < 1 or args.per_round < 1:
        raise TpurankError(f"--rounds and --per-round must be >= 1, got {args.rounds} and {args.per_round}")
    if args.out is not None and args.out.suffix != ".json":
        raise TpurankError(f"{args.out}: --out must end in .json")
    apart = args.work_dir or WORK.read()
    how = calibration(args, seed=args.seed)
    replays = []
    with Tuner.load(args.models, args.work, args.paths.prepared if apart else None, how) as tuner:
        for program in tuner.programs(args.file, args.kind, args.collection, args.model, args.graph):
            known = program.candidates.runtime > 0
            if known.sum() < 2:
                print(
                    f"{program.name}: {int(known.sum())} configs with a runtime: nothing to replay",
                    file=sys.stderr,
                )
                continue
            for note in program.notes:
                print(f"tpurank tune: {note}", file=sys.stderr)
            if args.rounds * args.per_round > known.sum():
                print(
                    f"tpurank tune: {program.name}: {args.rounds} rounds of {args.per_round} ask for more "
                    f"measurements than its {int(known.sum())} configs with a runtime: the loop ends when all are measured",
                    file=sys.stderr,
                )
            tuning = Tuning(program, how, program.candidates.file_index[known])
            r = replay_one(tuning, args.rounds, args.per_round, args.explore)
            replays.append(r)
            head = f"{Path(args.file).name} [{r.graph}] ranked by {program.model} ({program.collection})"
            tile = program.candidates.normalizer is not None
            best = f"{r.best:.4g} of the default's runtime" if tile else f"{r.best:,.0f} ns"
            print(f"{head}: {r.configs} configs with a runtime, the best {best}\n{table(r)}\n")
    if not replays:
        raise TpurankError(f"{args.file}: no graph with two or more measured configs to replay")
    if len(replays) > 1:
        print(mean_line(replays))
    if args.out is not None:
        write_text(args.out, json.dumps([r.as_json() for r in replays], indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


def mean_line(replays: list[Replay]) -> str:
    """Over several graphs: the mean measurements each search needed (the loop's, where it got there)."""
    reached = [r.needed["tuner"] for r in replays if r.needed["tuner"] is not None]
    random = float(np.mean([r.needed["random"] for r in replays]))
    model = float(np.mean([r.needed["model"] for r in replays]))
    loop = (
        f"{np.mean(reached):.1f} over the {len(reached)} of {len(replays)} graphs it got there"
        if reached
        else "never"
    )
    return (
        f"mean measurements to come within {TOLERANCE:.1%} of the best: loop {loop}; random search "
        f"{random:.1f} (expected), uncalibrated model {model:.1f}, over {len(replays)} graphs"
    )
