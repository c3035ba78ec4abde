"""PROJECTION of the GNN's training time with the GPU defaults on one H100 and on Kaggle's T4.

No GPU is at hand: this measures what can be measured here and labels the rest as a projection.
Measured: the FLOPs of one training step (forward, loss and backward; torch.utils.flop_counter,
which counts the matrix products and attention, not the scatter/gather of message passing) of the
default model (core/config.py, each collection's overrides applied) on the real sample's graph of
each collection, prepared as `tpurank prepare` prepares it, per config. Projected: FLOPs per config
x configs per step x max_steps x seeds, divided by each GPU's published dense half-precision
throughput times a stated utilisation. Validation, data loading and the scatter ops are not in it.

With `--profile` (gpu, kaggle-t4 or cpu; default gpu) the model and seeds are that profile's, and the
whole-run budget (`--budget`, default the profile's) is split as `all --budget` splits it
(tpurank.run.plan, on the sample's file sizes): the table then shows each collection's share per seed
and the share of its step count that the projected rate reaches within it.

    .venv/bin/python bench/runs/bench_gpu_projection.py [--sample ../shared/data/tpugraphs-sample] \\
        [--utilisation 0.2] [--profile kaggle-t4] [--budget 10h] [--set gnn.hidden=256 ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import flop_count  # noqa: E402
import provenance  # noqa: E402

from tpurank.core.collections import COLLECTIONS, kind_of  # noqa: E402
from tpurank.core.config_files import load_config  # noqa: E402
from tpurank.core.errors import TpurankError  # noqa: E402
from tpurank.core.paths import NPZ_SUBDIR, Paths  # noqa: E402
from tpurank.core.profiles import DEFAULT_BUDGET, PROFILES, Profile, parse_duration  # noqa: E402
from tpurank.gnn.data import batch_rows, load_split, make_batch  # noqa: E402
from tpurank.gnn.families import gnn  # noqa: E402
from tpurank.gnn.nets import tile_inputs  # noqa: E402
from tpurank.gnn.training.losses import ranking_loss  # noqa: E402
from tpurank.run.plan import make_plan  # noqa: E402

# the real sample beside the checkout, where tests/helpers.py finds it too
SAMPLE = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
# Published dense (no sparsity) half-precision tensor throughput, in TFLOP/s.
GPUS = {
    "H100 SXM (bf16)": 989.4,  # NVIDIA H100 datasheet: 1,979 with sparsity
    "T4 (fp16, Kaggle)": 65.0,  # NVIDIA T4 datasheet: mixed-precision tensor cores
}
MAX_CONFIGS = 1024  # tile's "all configs" recipe: about the configs of a big tile graph
UTILISATION = 0.2  # share of the peak a small-batch GNN step reaches (an assumption, stated in the output)


def missing_sample(sample: Path) -> str | None:
    """Why the sample cannot be read (one line), None when its npz tree is there."""
    if (sample / NPZ_SUBDIR).is_dir():
        return None
    return (
        f"the real sample is not at {sample} (no {NPZ_SUBDIR} there; the default is "
        "../shared/data/tpugraphs-sample beside the checkout): pass --sample DIR"
    )


def prepare_sample(sample: Path, work: Path) -> Paths:
    """`tpurank prepare` of the sample into `work`, the cache in `work/features` whatever
    $TPURANK_WORK says (it would move the cache where `step_flops` does not look).

    Raises:
        TpurankError: prepare failed (its last line).
    """
    paths = Paths(data=sample, out=work, work=work)
    cmd = [
        sys.executable,
        "-m",
        "tpurank",
        "prepare",
        "--data-dir",
        str(sample),
        "--out-dir",
        str(work),
        "--work-dir",
        str(work),
    ]
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        last = (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
        raise TpurankError(f"prepare of {sample} failed: {last}")
    return paths


def step_flops(paths: Paths, collection: str, overrides: list[str], profile: str) -> dict:
    """FLOPs of one training step of the profile's model on the collection's largest sample graph, per config."""
    cfg = load_config(None, overrides, profile=Profile(profile, "").file).for_collection(collection)
    kind = kind_of(collection)
    graphs = []
    for split in ("train", "valid", "test"):
        try:
            graphs += load_split(paths, collection, split, False)
        except TpurankError:  # the sample lacks this split of the collection
            continue
    if not graphs:
        raise TpurankError(f"no {collection} graph in the prepared sample under {paths.prepared}")
    g = max(graphs, key=lambda x: len(x.opcode))
    r = gnn.SPEC.recipe(cfg, kind)
    model = gnn.SPEC.new_network(cfg, kind, g.node_feat.shape[1])
    rows = batch_rows(g, r.configs_per_graph, np.random.default_rng(0))
    batch = make_batch([g] * r.graphs_per_batch, [rows] * r.graphs_per_batch, tile_inputs.wanted(model))
    with flop_count.counted() as counter:
        loss = ranking_loss(r.loss, model(batch).float(), batch.runtime, batch.mask, r.margin, batch.weight)
        loss.backward()
    per_config = counter.total / (len(rows) * r.graphs_per_batch)  # linear in configs
    return {
        "nodes": len(g.opcode),
        "configs_per_step": min(r.configs_per_graph, MAX_CONFIGS) * r.graphs_per_batch,
        "flops_per_config": per_config,
        "max_steps": r.max_steps,
        "seeds": cfg.gnn.seeds,
        "hidden": cfg.gnn.hidden,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=Path, default=SAMPLE, help=f"the real sample ({NPZ_SUBDIR} below it)")
    p.add_argument("--utilisation", type=float, default=UTILISATION, help="share of the published peak")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument(
        "--profile", choices=PROFILES, default="gpu", help="the profile's model and seeds (default gpu)"
    )
    p.add_argument("--budget", help="the whole run's time to split (default: the profile's)")
    p.add_argument("--json", type=Path, help="also write the numbers here")
    args = p.parse_args()
    if why := missing_sample(args.sample):
        print(f"bench_gpu_projection: {why}", file=sys.stderr)
        return 1
    torch.manual_seed(0)
    rows, total = {}, 0.0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            paths = prepare_sample(args.sample, Path(tmp))
            for c in COLLECTIONS:
                m = step_flops(paths, c, args.set, args.profile)
                m["total_flops"] = m["flops_per_config"] * m["configs_per_step"] * m["max_steps"] * m["seeds"]
                rows[c], total = m, total + m["total_flops"]
    except TpurankError as e:
        print(f"bench_gpu_projection: {e}", file=sys.stderr)
        return 1
    print(f"PROJECTION (not measured on a GPU): utilisation {args.utilisation:.0%} of the published peak")
    head = f"{'collection':<20}{'nodes':>8}{'configs/step':>14}{'MFLOP/config':>14}{'steps':>9}{'seeds':>7}"
    print(head + "".join(f"{g:>20}" for g in GPUS))
    for c, m in rows.items():
        hours = [m["total_flops"] / (peak * 1e12 * args.utilisation) / 3600 for peak in GPUS.values()]
        print(
            f"{c:<20}{m['nodes']:>8}{m['configs_per_step']:>14}{m['flops_per_config'] / 1e6:>14.1f}"
            f"{m['max_steps']:>9}{m['seeds']:>7}" + "".join(f"{h:>18.2f} h" for h in hours)
        )
    hours = [total / (peak * 1e12 * args.utilisation) / 3600 for peak in GPUS.values()]
    print(f"{'all five':<72}" + "".join(f"{h:>18.2f} h" for h in hours))
    print(
        "measured here: FLOPs per config (torch.utils.flop_counter: dense matrix products and attention; bench/lib/flop_count.py) on the\n"
        "largest sample graph of each collection (real graphs are larger: FLOPs grow with the nodes);\n"
        "projected: steps x configs x seeds at the stated share of each GPU's published dense\n"
        "half-precision peak (validation, loading and the scatter ops of message passing left out)"
    )
    split = budget_split(args, rows)
    if args.json:
        out = {
            "utilisation": args.utilisation,
            "gpus": GPUS,
            "rows": rows,
            "profile": args.profile,
            "split": split,
            "provenance": provenance.stamp(),
        }
        args.json.write_text(json.dumps(out, indent=1))
    return 0


def budget_split(args: argparse.Namespace, rows: dict[str, dict]) -> dict[str, dict]:
    """The budget split `all` would make, and the share of each collection's steps the PROJECTED rate
    on each GPU reaches within its minutes (capped at 1: the step count then ends the training)."""
    budget = parse_duration(args.budget or DEFAULT_BUDGET[args.profile])
    cfg = load_config(None, args.set, profile=Profile(args.profile, "").file)
    plan = make_plan(budget, cfg, args.sample, list(COLLECTIONS), ["lgbm", "gnn"])
    print(
        f"\nbudget split of {args.budget or DEFAULT_BUDGET[args.profile]} ({args.profile} profile), PROJECTED:"
    )
    print(f"{'collection':<20}{'seeds':>6}{'min/seed':>10}" + "".join(f"{g + ' steps':>26}" for g in GPUS))
    out = {}
    for share in plan.shares:
        m = rows[share.collection]
        per_seed_s = [
            m["total_flops"] / m["seeds"] / (peak * 1e12 * args.utilisation) for peak in GPUS.values()
        ]
        reached = [min(1.0, share.minutes * 60 / s) for s in per_seed_s]
        out[share.collection] = {
            "seeds": share.seeds,
            "minutes_per_seed": share.minutes,
            "steps_reached": reached,
        }
        print(
            f"{share.collection:<20}{share.seeds:>6}{share.minutes:>10.1f}"
            + "".join(f"{r:>25.0%} " for r in reached)
        )
    return out


if __name__ == "__main__":
    raise SystemExit(main())
