"""`tpurank rank FILE... --models DIR`: rank the candidate configs of your own programs.

Each FILE is a raw tuning protobuf (`ModuleTuningData` for layout, `TuningData` for tile) or an npz
in the dataset's format. It prints the top configs of every graph with their predicted cost above
the predicted best, scores the ranking where the file holds measured runtimes, and writes the
whole ranking to `--out` (CSV, or JSON by its suffix) in the file's own config indices.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import sys
from pathlib import Path

from tpurank.core import env
from tpurank.core.atomic import write_text
from tpurank.core.collections import COLLECTIONS, KINDS
from tpurank.core.errors import TpurankError
from tpurank.rank.calibrate import Calibration
from tpurank.rank.finetune import FineTune
from tpurank.rank.measured import read_measured
from tpurank.rank.models import ENSEMBLE
from tpurank.rank.ranker import DEFAULT_LAYOUT, Ranker
from tpurank.rank.ranking import Ranking, calibration_line

DEFAULT_TOP = 10  # configs printed per graph: an autotuner measures a handful of the best
MODELS = (ENSEMBLE, "lgbm", "gnn", "baseline")


def add_model_choice(p: argparse.ArgumentParser) -> None:
    """`--kind`, `--collection` and `--model`: which trained models rank a file (rank and tune)."""
    p.add_argument("--kind", choices=KINDS, help="insist on layout or tile (default: told by content)")
    p.add_argument(
        "--collection",
        choices=[c for c in COLLECTIONS if c.startswith("layout:")],
        help=f"whose models rank a layout graph (default {DEFAULT_LAYOUT})",
    )
    p.add_argument(
        "--model",
        choices=MODELS,
        help="the ensemble or one member (default: the ensemble where fitted, else the trained member "
        "with the best valid score)",
    )


def add_gnn_tuning(p: argparse.ArgumentParser) -> None:
    """`--gnn-steps`, `--gnn-seconds` and `--no-select`: how the models learn from measurements (rank
    and tune)."""
    p.add_argument(
        "--gnn-steps",
        type=int,
        metavar="N",
        help=(
            f"fine-tune the GNN N steps on the measured configs (default {FineTune.steps} on layout programs; "
            "given, tile kernels too; 0: ranked as trained)"
        ),
    )
    p.add_argument(
        "--gnn-seconds",
        type=float,
        metavar="S",
        help=f"the fine-tuning's time limit, all seed members together (default {FineTune.seconds:g})",
    )
    p.add_argument(
        "--no-select",
        action="store_true",
        help="use the calibrated models whole, without the held-out check of how far to trust them",
    )


def calibration(args: argparse.Namespace, seed: int = 0) -> Calibration:
    """The calibration the command line asks for (`add_gnn_tuning`).

    Raises:
        TpurankError: negative steps, a bad time limit, or a time limit with no fine-tuning.
    """
    steps = FineTune.steps if args.gnn_steps is None else args.gnn_steps
    if steps < 0:
        raise TpurankError(f"--gnn-steps must be >= 0 (0: no fine-tuning), got {steps}")
    if args.gnn_seconds is not None and not steps:
        raise TpurankError("--gnn-seconds limits the GNN's fine-tuning, which --gnn-steps 0 turns off")
    select = not args.no_select
    if not steps:
        return Calibration(seed=seed, gnn=None, select=select)
    seconds = FineTune.seconds if args.gnn_seconds is None else args.gnn_seconds
    tile = args.gnn_steps is not None  # asked for by name: tile kernels' GNN fine-tuned too
    return Calibration(seed=seed, gnn=FineTune(steps=steps, seconds=seconds), gnn_tile=tile, select=select)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("files", nargs="+", metavar="FILE", help=".pb (raw tuning data) or .npz (dataset format)")
    p.add_argument("--models", required=True, metavar="DIR", help="a trained out folder, or a models dataset")
    add_model_choice(p)
    p.add_argument(
        "--top", type=int, default=DEFAULT_TOP, metavar="K", help=f"configs printed (default {DEFAULT_TOP})"
    )
    p.add_argument(
        "--out", type=Path, metavar="PATH", help="the whole ranking: .csv, or .json with the scores"
    )
    p.add_argument("--work", type=Path, metavar="DIR", help="work folder, kept (default: a temporary one)")
    p.add_argument(
        "--measured",
        type=Path,
        metavar="FILE.csv",
        help="runtimes measured so far (config,runtime_ns): the models learn from them first (one FILE)",
    )
    add_gnn_tuning(p)


def report(r: Ranking, top: int) -> str:
    """The graph's top configs and, where measured, its scores: what `rank` prints."""
    scores = r.scores()
    head = (
        f"{r.source.name} [{r.graph}] {r.kind}, ranked by {r.model} ({r.collection}): {len(r.order)} configs"
    )
    lines = [head, f"{'rank':>5} {'config':>7} {'cost above best':>16} {'measured ns':>12}"]
    for row in r.rows()[:top]:
        ns = row["measured_runtime_ns"]
        lines.append(
            f"{row['rank']:>5} {row['config']:>7} {row['relative_cost']:>16.4f} {ns if ns is not None else '-':>12}"
        )
    if r.calibration is not None:
        lines.append(calibration_line(r))
    elif scores is None:
        lines.append(f"measured runtimes: {r.measured} of {len(r.order)} configs: too few to score")
    else:
        name = "2 - top-5 slowdown" if r.kind == "tile" else "Kendall tau"
        lines.append(
            f"against {r.measured} measured of {len(r.order)} configs: {name} {_num(scores['score'])}, the "
            f"predicted best runs {_num(scores['slowdown@1'])}x the true best"
        )
    return "\n".join(lines)


def mean_line(rankings: list[Ranking]) -> str:
    """The mean score of the graphs with measured runtimes, per kind (a tile file holds many)."""
    parts = []
    for kind, name in (("layout", "Kendall tau"), ("tile", "2 - top-5 slowdown")):
        got = [
            s["score"]
            for r in rankings
            if r.kind == kind and (s := r.scores()) and not math.isnan(s["score"])
        ]
        if got:
            parts.append(f"{kind}: mean {name} {sum(got) / len(got):.4f} over {len(got)} graphs")
    return "; ".join(parts)


def _num(v: float) -> str:
    return "undefined" if math.isnan(v) else f"{v:.4f}"


def write_out(path: Path, rankings: list[Ranking]) -> None:
    """The whole ranking: CSV rows, or JSON with each graph's summary and rows (by the suffix)."""
    if path.suffix == ".json":
        doc = [{**r.summary(), "ranking": r.rows()} for r in rankings]
        write_text(path, json.dumps(doc, indent=1) + "\n")
        return
    buf = io.StringIO()
    rows = [row for r in rankings for row in r.rows()]
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    write_text(path, buf.getvalue())


def run(args: argparse.Namespace) -> int:
    if args.top < 1:
        raise TpurankError(f"--top must be >= 1, got {args.top}")
    if args.out is not None and args.out.suffix not in (".csv", ".json"):
        raise TpurankError(f"{args.out}: --out must end in .csv or .json")
    # the prepared cache training used, when it lives apart from the models (`--work-dir`)
    apart = args.work_dir or env.WORK.read()
    how = calibration(args)
    tuning = [
        o for o, v in (("--gnn-steps", args.gnn_steps), ("--gnn-seconds", args.gnn_seconds)) if v is not None
    ]
    if tuning and args.measured is None:
        raise TpurankError(
            f"{tuning[0]} sets how the GNN learns from measurements: give them with --measured"
        )
    measured = read_measured(args.measured) if args.measured is not None else None
    with Ranker.load(args.models, args.work, args.paths.prepared if apart else None) as ranker:
        rankings = ranker.rank_files(
            [Path(f) for f in args.files], args.kind, args.collection, args.model, measured, how
        )
    for note in dict.fromkeys(n for r in rankings for n in r.notes):
        print(f"tpurank rank: {note}", file=sys.stderr)
    for r in rankings:
        print(report(r, args.top) + "\n")
    if len(rankings) > 1 and (line := mean_line(rankings)):
        print(line)
    if args.out is not None:
        write_out(args.out, rankings)
        print(f"wrote {args.out}: {sum(len(r.order) for r in rankings)} rows")
    return 0
