"""Graph Segment Training against whole-graph training: memory, time per step, and tau.

Two parts (docs/models.md, "Graph Segment Training"):

- `memory`: the largest full-scale nlp layout graph (by nodes) of `--full-root`, prepared whole
  (`prepare.hops=-1`) in a temporary folder, then `--steps` training steps of `--configs` configs
  each, whole-graph (`gnn.segment_nodes=0`) and with GST at each `--segment-nodes`, every mode in
  its own process: peak RSS of that process (after loading: imports, the graph, the model) and
  seconds per step (the first step, which warms allocators, not counted), plus one scoring pass.
- `tau`: demo layout collections, trained with the same step budget: the default (pruned to 1 hop,
  whole-graph training), whole graphs (`hops=-1`) with GST at each `--segment-nodes`, and with
  `--whole` whole graphs trained whole; the best valid tau of each (model.json), seconds, and the
  GST table's hit rate.

    .venv/bin/python bench/runs/bench_gst.py memory --segment-nodes 1000 4000
    .venv/bin/python bench/runs/bench_gst.py tau --max-steps 100 --configs 32 --segment-nodes 500
    .venv/bin/python bench/runs/bench_gst.py table    # the saved `tau` table, with its real rows

Results go to bench/results/gst.json (each part under its own key). The `tau` table shows, below
each variant, its real-sample row (`REAL`: bench_real.py's GNN on the real unet graph, under `real` in
gst.json; "-" where the variant was never measured on real data).
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results" / "gst.json"
LAYOUT = ["layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random"]

sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402
import real_rows as rr  # noqa: E402

from tpurank.core.paths import NPZ_SUBDIR  # noqa: E402

# variant -> its real-sample rows: `bench_real.py --only layout --models gnn --quick` (seeds 0 1), saved
# under `real` in gst.json; the GST run with 1000-node segments and 30 fine-tuning steps
_QUICK = "gnn, 150 steps, bench_real --quick"
REAL: dict[str, list[rr.Real]] = {
    "pruned (default)": [rr.Real(_QUICK, ("gst.json",), ("real", "pruned_default", "all", "gnn"))],
    "whole + GST 1000": [rr.Real(_QUICK, ("gst.json",), ("real", "whole_gst_1000", "all", "gnn"))],
}


def _save(key: str, value: object) -> None:
    data = json.loads(RESULTS.read_text()) if RESULTS.exists() else {}
    data[key] = {**value, "provenance": provenance.stamp()} if isinstance(value, dict) else value
    RESULTS.write_text(json.dumps(data, indent=1) + "\n")


def _tpurank(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "tpurank", *args], check=True, cwd=ROOT)


# ------------------------------------------------------------------------------------------- memory


def largest_graph(full_root: Path) -> tuple[Path, int]:
    """The npz with the most nodes under full_root/{default,random}/{train,valid,test}/."""
    best, most = None, -1
    for f in sorted(glob.glob(str(full_root / "*" / "*" / "*.npz"))):
        with np.load(f) as z:
            n = int(z["node_opcode"].shape[0])
        if n > most:
            best, most = Path(f), n
    if best is None:
        raise SystemExit(f"{full_root}: no npz files")
    return best, most


def _timed_steps(model, opt, g, r, cpu, state, steps: int) -> list[float]:
    """`steps` training steps, each timed, after one that warms the allocators (not counted)."""
    from tpurank.core.memory import release_free_memory
    from tpurank.gnn.data import batch_rows
    from tpurank.gnn.training.segment_step import SegmentStep
    from tpurank.gnn.training.step import micro_batches, train_step

    times = []
    for step in range(steps + 1):
        rng = np.random.default_rng([0, step])
        rows = [batch_rows(g, r.configs_per_graph, rng)]
        t = time.perf_counter()
        if state is not None:
            train_step(model, opt, SegmentStep(state, [g], rows, rng), r, cpu, precision="fp32", scaler=None)
        else:
            train_step(model, opt, micro_batches([g], rows, r.max_batch_nodes), r, cpu, precision="fp32")
        release_free_memory()
        if step:
            times.append(time.perf_counter() - t)
    return times


def child(args: argparse.Namespace) -> None:
    """One mode in this process: prints a JSON line."""
    import torch

    from tpurank.core.config_files import load_config
    from tpurank.core.paths import Paths
    from tpurank.gnn.data import load_split
    from tpurank.gnn.families import gnn as gnn_model
    from tpurank.gnn.gst.segments import cut_edges, split_graph
    from tpurank.gnn.gst.state import GstState
    from tpurank.gnn.scoring import score_rows
    from tpurank.gnn.training.step import make_optimizer

    torch.set_num_threads(args.threads)
    cfg = load_config(overrides=[f"gnn.segment_nodes={args.child}", f"gnn.configs_per_graph={args.configs}"])
    paths = Paths(data=Path(args.data), out=Path(args.out))
    (g,) = load_split(paths, "layout:nlp:default", "train", progress=False)
    r = gnn_model.SPEC.recipe(cfg, "layout")
    torch.manual_seed(0)
    model = gnn_model.SPEC.new_network(cfg, "layout", int(g.node_feat.shape[1]))
    opt = make_optimizer(model, r)
    cpu = torch.device("cpu")
    state = GstState(r, cfg.gnn.hidden) if r.segment_nodes else None
    loaded = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    times = _timed_steps(model, opt, g, r, cpu, state, args.steps)
    train_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    model.eval()
    t = time.perf_counter()
    score_rows(model, g, np.arange(min(256, g.num_unique)), r.predict_chunk, cpu, "fp32", r.segment_nodes)
    score_s = time.perf_counter() - t
    segs = split_graph(g, r.segment_nodes)
    print(
        json.dumps(
            {
                "segment_nodes": r.segment_nodes,
                "segments": len(segs),
                "cut_edge_share": round(cut_edges(g, segs) / max(1, g.edge_index.shape[1]), 4),
                "nodes": len(g.opcode),
                "edges": int(g.edge_index.shape[1]),
                "configurable": len(g.config_nodes),
                "configs_per_step": min(r.configs_per_graph, g.num_unique),
                "peak_rss_gb_after_load": round(loaded, 2),
                "peak_rss_gb_train": round(train_peak, 2),
                "s_per_step": round(float(np.median(times)), 2),
                "score_256_configs_s": round(score_s, 2),
                "peak_rss_gb_with_scoring": round(
                    resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2
                ),
            }
        )
    )


def memory(args: argparse.Namespace) -> None:
    """Whole-graph training against GST on the largest graph, prepared whole in a temporary folder."""
    src, nodes = largest_graph(Path(args.full_root))
    tmp = Path(tempfile.mkdtemp(prefix="bench_gst_"))
    try:
        data = tmp / "data"
        folder = data / NPZ_SUBDIR / "layout" / "nlp" / "default" / "train"
        folder.mkdir(parents=True)
        (folder / src.name).symlink_to(src)
        out = tmp / "out"
        print(f"graph: {src} ({nodes} nodes)", flush=True)
        _tpurank(
            "prepare",
            "--data-dir",
            str(data),
            "--out-dir",
            str(out),
            "--collections",
            "layout:nlp:default",
            "--set",
            "prepare.hops=-1",
            "--set",
            "prepare.jobs=1",
        )
        rows = []
        for seg in [0, *args.segment_nodes]:
            rows.append(_run_mode(args, seg, data, out))
            print(json.dumps(rows[-1]), flush=True)
        _save(
            "memory",
            {
                "graph": str(src),
                "steps": args.steps,
                "configs": args.configs,
                "threads": args.threads,
                "modes": rows,
            },
        )
        _print_modes(rows)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _run_mode(args: argparse.Namespace, seg: int, data: Path, out: Path) -> dict:
    """One mode in a fresh process, so that its peak RSS is its own: its JSON line, or its error."""
    cmd = [
        sys.executable,
        __file__,
        "memory",
        "--child",
        str(seg),
        "--data",
        str(data),
        "--out",
        str(out),
        "--steps",
        str(args.steps),
        "--configs",
        str(args.configs),
        "--threads",
        str(args.threads),
    ]
    done = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    )
    if done.returncode:
        return {"segment_nodes": seg, "error": done.stderr.strip().splitlines()[-1:]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _print_modes(rows: list[dict]) -> None:
    """The modes side by side: segments, cut edges, peak RSS, seconds per step and per scoring pass."""
    print(f"{'mode':<16}{'segments':>9}{'cut edges':>10}{'peak RSS GB':>12}{'s/step':>8}{'score 256 s':>12}")
    for m in rows:
        if "error" in m:
            print(f"segment_nodes={m['segment_nodes']}: failed: {m['error']}")
            continue
        name = "whole graph" if m["segment_nodes"] == 0 else f"GST {m['segment_nodes']}"
        print(
            f"{name:<16}{m['segments']:>9}{m['cut_edge_share']:>10.1%}{m['peak_rss_gb_train']:>12.2f}"
            f"{m['s_per_step']:>8.2f}{m['score_256_configs_s']:>12.2f}"
        )


# ---------------------------------------------------------------------------------------------- tau


def tau(args: argparse.Namespace) -> None:
    base = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench_gst_tau_"))
    budget = [f"gnn.max_steps={args.max_steps}", f"gnn.configs_per_graph={args.configs}", f"seed={args.seed}"]
    variants = {"pruned (default)": ("hops1", [])}
    if args.whole:
        variants["whole graph"] = ("whole", ["prepare.hops=-1"])
    for seg in args.segment_nodes:
        variants[f"whole + GST {seg}"] = (
            "whole",
            ["prepare.hops=-1", f"gnn.segment_nodes={seg}", f"gnn.finetune_steps={args.finetune_steps}"],
        )
    results: dict[str, dict] = {}
    for name, (work, sets) in variants.items():
        out = base / name.replace(" ", "_").replace("(", "").replace(")", "")
        flags = ["--data-dir", args.demo, "--work-dir", str(base / work), "--out-dir", str(out)]
        for s in [*budget, *sets]:
            flags += ["--set", s]
        _tpurank("prepare", "--collections", *args.collections, *flags)
        t = time.perf_counter()
        _tpurank("train", "--model", "gnn", "--collections", *args.collections, *flags)
        seconds = time.perf_counter() - t
        per = {}
        for c in args.collections:
            side = json.loads((out / "models" / "gnn" / c.replace(":", "-") / "model.json").read_text())
            per[c] = {
                "valid_tau": round(side["best_valid_score"], 4),
                "steps": side["steps_run"],
                "seconds": side["seconds"],
                **({"hit_rate": side["history_table"]["hit_rate"]} if "history_table" in side else {}),
            }
        results[name] = {
            "collections": per,
            "mean_tau": round(float(np.mean([p["valid_tau"] for p in per.values()])), 4),
            "train_seconds": round(seconds, 1),
        }
        print(name, json.dumps(results[name]), flush=True)
    _save(
        "tau",
        {
            "max_steps": args.max_steps,
            "finetune_steps": args.finetune_steps,
            "seed": args.seed,
            "demo": args.demo,
            "variants": results,
        },
    )
    print(tau_table(results, rr.RealRows(REAL, rr.folders(args.real_dir))))
    if not args.work:
        shutil.rmtree(base, ignore_errors=True)


def tau_table(variants: dict[str, dict], real: rr.RealRows) -> str:
    """The `tau` part's table: each variant's demo valid tau per collection, then its real rows; the
    variants measured on real data only last."""
    collections = list(next(iter(variants.values()))["collections"])
    lines = [
        "| variant | data | " + " | ".join(collections) + f" | mean | train s | {rr.LAYOUT} |",
        "|---" * (len(collections) + 5) + "|",
    ]
    for name in [*variants, *(v for v in real.mapping if v not in variants)]:
        if res := variants.get(name):
            cells = " | ".join(f"{res['collections'][c]['valid_tau']:.4f}" for c in collections)
            cells += f" | {res['mean_tau']:.4f} | {res['train_seconds']:.0f}"
        else:
            cells = " | ".join(["-"] * (len(collections) + 2))
        lines.append(f"| {name} | synthetic | {cells} |  |")
        blank = " |" * (len(collections) + 2)
        lines += [f"| {name} | real |{blank} {r[0]} |" for r in real.cells(name, [rr.LAYOUT])]
    return "\n".join(lines) + "\n\n" + rr.LEGEND


def table(args: argparse.Namespace) -> None:
    """Print the saved `tau` table of gst.json."""
    try:
        variants = json.loads(RESULTS.read_text())["tau"]["variants"]
    except (OSError, ValueError, KeyError) as e:
        raise SystemExit(f"{RESULTS}: no saved `tau` part ({type(e).__name__}: {e})") from None
    print(tau_table(variants, rr.RealRows(REAL, rr.folders(args.real_dir))))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="part", required=True)
    m = sub.add_parser("memory", help="peak RSS and time per step on the largest full-scale nlp graph")
    m.add_argument("--full-root", default=str(Path("/work/full") / NPZ_SUBDIR / "layout/nlp"))
    m.add_argument("--segment-nodes", type=int, nargs="+", default=[4000])
    m.add_argument("--steps", type=int, default=3)
    m.add_argument("--configs", type=int, default=64)
    m.add_argument("--threads", type=int, default=1)
    m.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    m.add_argument("--data", help=argparse.SUPPRESS)
    m.add_argument("--out", help=argparse.SUPPRESS)
    t = sub.add_parser("tau", help="valid tau on the demo layout collections with a step budget")
    t.add_argument("--demo", default=str(ROOT / "data" / "synthetic-demo"))
    t.add_argument("--collections", nargs="+", default=LAYOUT)
    t.add_argument("--max-steps", type=int, default=200)
    t.add_argument("--configs", type=int, default=64, help="gnn.configs_per_graph of every variant")
    t.add_argument("--whole", action="store_true", help="also train whole graphs without GST (slow)")
    t.add_argument("--segment-nodes", type=int, nargs="+", default=[1000])
    t.add_argument("--finetune-steps", type=int, default=50)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--work", default="", help="keep intermediates here (default: a temporary folder)")
    rr.add_option(t)
    rr.add_option(sub.add_parser("table", help="print the saved `tau` table, with its real rows"))
    args = ap.parse_args()
    if args.part == "memory":
        child(args) if args.child is not None else memory(args)
    elif args.part == "table":
        table(args)
    else:
        tau(args)


if __name__ == "__main__":
    main()
