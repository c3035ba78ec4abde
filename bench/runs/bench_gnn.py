"""Benchmark of the GNN rankers: throughput, memory, and GNN vs the official baseline.

In one run, each measurement in a fresh subprocess (so peak RSS is that of the work alone, imports
and data included):
  1. training throughput (configs/s, after 2 warm-up steps) and peak memory of `--steps` training
     steps per collection on the synthetic `demo` data, for `gnn` and `baseline` (default configs);
  2. peak memory of training steps on the largest `full`-scale nlp graph (synthetic: 25,000 nodes,
     2,500 configurable nodes, 10,000 configs; target <= 8 GB);
  3. validation score of `gnn` vs the official `baseline` on demo, both trained as `./run.sh all`
     trains them on demo (configs/demo.toml: the same step budget for both, early stopping
     on valid), per collection (target: gnn wins every layout collection);
  4. with `--ablate CHANGE ...`: the gnn's valid score under that demo budget, then with each
     change alone (what each design choice is worth on demo).
Results go to bench/results/gnn_<device>.json (the device is named inside); the comparison and the
ablation print as tables with each row's real-sample rows beside it (bench_real.py; "-" where none).

    .venv/bin/python bench/runs/bench_gnn.py                 # generates data/synthetic-demo and data/bench once
    .venv/bin/python bench/runs/bench_gnn.py --skip-big --max-steps 40 --steps 5    # a quick look
    .venv/bin/python bench/runs/bench_gnn.py --threads 2 --ablate gnn.aggr=mean gnn.loss=hinge
    .venv/bin/python bench/runs/bench_gnn.py --table     # the tables of bench/results/gnn_cpu.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

from tpurank.core.paths import NPZ_SUBDIR

ROOT = Path(__file__).resolve().parents[2]
DEMO_ROOT = ROOT / "data" / "synthetic-demo"
WORK = (
    ROOT / "data" / "bench" / "gnn"
)  # prepared demo cache and the comparison's models (data/ is gitignored)
BIG_ROOT = ROOT / "data" / "bench" / "gnn-big"
BIG = {"nodes": 25_000, "configurable": 2_500, "configs": 10_000}  # synth `full` nlp: up to 25,000 nodes
BIG_FILE = BIG_ROOT / NPZ_SUBDIR / "layout/nlp/random/train/bench_gnn_big_nlp.npz"
MEMORY_TARGET = 8 * 10**9  # bytes: peak RSS of training on the largest graph (docs/scale.md)
PYTHON = sys.executable
RESULTS = ROOT / "bench" / "results"

sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402
import real_rows as rr  # noqa: E402

# model -> its real-sample rows: bench_real.py at the code the docs quote (the GNN at width 64); no
# change of `--ablate` was measured on real data, so its real rows are all "-"
_LAYOUT, _TILE = ("real_layout_issue25.json",), ("real_tile_issue25.json",)
REAL_MODELS: dict[str, list[rr.Real]] = {
    m: [
        rr.layout(_LAYOUT, m, "bench_real, 300 steps, gnn width 64"),
        rr.tile(_TILE, m, "bench_real, 600 steps"),
    ]
    for m in ("gnn", "baseline")
}
REAL_ABLATION: dict[str, list[rr.Real]] = {}

# Child: train `steps` steps of one model on one collection; prints one JSON line.
_STEPS = """
import json, resource, sys, time
import numpy as np, torch
from tpurank.core.config import Config
from tpurank.core.collections import kind_of
from tpurank.gnn.families import baseline as official, gnn
from tpurank.gnn.data import batch_rows
from tpurank.gnn import device as devices
from tpurank.gnn.data import load_split
from tpurank.gnn.device import setup_runtime
from tpurank.gnn.training.step import make_optimizer, micro_batches, train_step
from tpurank.core.paths import Paths

from pathlib import Path
out, collection, name, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
paths = Paths(data=Path(out), out=Path(out))
cfg = Config().for_collection(collection)
spec = gnn.SPEC if name == "gnn" else official.SPEC
r = spec.recipe(cfg, kind_of(collection))
rt = setup_runtime()
graphs = [g for g in load_split(paths, collection, "train", progress=False) if g.rankable]
torch.manual_seed(0)
model = spec.new_network(cfg, graphs[0].kind, graphs[0].node_feat.shape[1]).to(rt.device)
opt = make_optimizer(model, r)
precision = devices.pick_precision(rt.device, r.bf16)  # as training runs
scaler = devices.grad_scaler(precision)
rng = np.random.default_rng(0)
b = min(r.graphs_per_batch, len(graphs))
configs, t0 = 0, None
for step in range(steps + 2):
    if step == 2:
        t0 = time.perf_counter()
    pick = rng.choice(len(graphs), size=b, replace=False)
    chosen = [graphs[i] for i in pick]
    rows = [batch_rows(g, r.configs_per_graph, rng) for g in chosen]
    batches = micro_batches(chosen, rows, r.max_batch_nodes)
    train_step(model, opt, batches, r, rt.device, precision=precision, scaler=scaler)
    if step >= 2:
        configs += sum(int(b.mask.sum()) for b in batches)
if rt.device.type == "cuda":
    torch.cuda.synchronize()
seconds = time.perf_counter() - t0
print(json.dumps({
    "configs_per_s": configs / seconds, "steps": steps, "seconds": seconds,
    "nodes_per_graph": float(np.mean([len(g.opcode) for g in graphs])),
    "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    "cuda_peak": torch.cuda.max_memory_allocated() if rt.device.type == "cuda" else None,
}))
"""


def device_name(threads: int) -> tuple[str, str]:
    """(file slug, description) of the device the children will use."""
    import torch

    if torch.cuda.is_available():
        return "cuda", f"CUDA {torch.cuda.get_device_name(0)} (bf16 autocast), torch {torch.__version__}"
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return "cpu", f"CPU {cpu}, {threads} torch thread(s) of {os.cpu_count()} cores, torch {torch.__version__}"


def child(args: list[str], threads: int, timeout: int = 1800) -> dict:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(
        [PYTHON, "-c", _STEPS, *args], capture_output=True, text=True, timeout=timeout, env=env
    )
    if proc.returncode != 0:
        raise SystemExit(f"child {args} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def ensure_demo_prepared() -> Path:
    """data/synthetic-demo (generated once) prepared into data/bench/gnn (train and valid)."""
    from tpurank.core.config import Config
    from tpurank.core.paths import NPZ_SUBDIR, Paths
    from tpurank.prepare.stage import prepare_dataset
    from tpurank.synth import generate

    if not (DEMO_ROOT / NPZ_SUBDIR).is_dir():
        print(f"generating the demo dataset into {DEMO_ROOT} ...", flush=True)
        generate(DEMO_ROOT, scale="demo", seed=0)
    paths = Paths(data=DEMO_ROOT, out=WORK)
    prepare_dataset(paths, Config(), splits=["train", "valid"], jobs=1, progress=False)
    return WORK


def ensure_big_prepared() -> Path:
    """The big nlp graph generated once into data/bench/gnn-big and prepared beside it."""
    from tpurank.core.config import Config
    from tpurank.core.paths import Paths
    from tpurank.prepare.stage import prepare_dataset
    from tpurank.synth import write_big_layout_graph

    if not BIG_FILE.exists():
        print(f"generating the big nlp graph {BIG} into {BIG_FILE} ...", flush=True)
        write_big_layout_graph(BIG_FILE, collection="layout:nlp:random", seed=0, **BIG)
    paths = Paths(data=BIG_ROOT, out=BIG_ROOT / "out")
    prepare_dataset(
        paths, Config(), collections=["layout:nlp:random"], splits=["train"], jobs=1, progress=False
    )
    return paths.out


def demo_config(extra: list[str]):
    """The config `./run.sh all` trains with on demo here (this machine's profile, configs/demo.toml
    above it), plus `extra`."""
    from tpurank.core.config_files import load_config
    from tpurank.core.paths import preset_file
    from tpurank.core.profiles import resolve_profile
    from tpurank.run.context import DEMO_PRESET

    return load_config(None, extra, preset=preset_file(DEMO_PRESET), profile=resolve_profile(None).file)


def train_and_score(spec, out: Path, cfg, collection: str) -> tuple[float, float]:
    """(mean valid score, training seconds) of one model trained on demo into `out` (every original
    config scored against its own runtime, as the validation report does). The seconds are those of
    its training steps, from the checkpoint's history, so a model reused from an earlier run of
    this script reports the time it took then."""
    import numpy as np

    from tpurank.core.metrics import graph_metrics, order_from_costs
    from tpurank.core.paths import Paths
    from tpurank.gnn.data import load_split
    from tpurank.gnn.predict import predict_collection
    from tpurank.gnn.training.collection import train_collection

    paths = Paths(data=DEMO_ROOT, out=out)
    valid = load_split(paths, collection, "valid", progress=False)
    c = cfg.for_collection(collection)
    summary = train_collection(spec, paths, c, collection, progress=False)
    costs = predict_collection(spec, paths, c, collection, "valid", graphs=valid, progress=False)
    scores = [
        graph_metrics(collection, order_from_costs(costs[g.id]), g.config_runtime)["score"] for g in valid
    ]
    return float(np.nanmean(scores)), round(sum(h["seconds"] for h in summary["history"]), 1)


def compare(max_steps: int) -> dict[str, dict[str, float]]:
    """Train gnn and baseline per collection on demo as `all` does (same steps) and score valid.

    Args:
        max_steps: training steps of both (0: the pipeline's demo budget).
    """
    from tpurank.core.collections import COLLECTIONS
    from tpurank.gnn.families import baseline as official
    from tpurank.gnn.families import gnn

    extra = [f"{m}.max_steps={max_steps}" for m in ("gnn", "baseline")] if max_steps else []
    extra += (
        [f'collections."tile:xla".{m}.max_steps={max_steps}' for m in ("gnn", "baseline")]
        if max_steps
        else []
    )
    cfg = demo_config(extra)
    out: dict[str, dict[str, float]] = {}
    for collection in COLLECTIONS:
        row: dict[str, float] = {}
        for name, spec in (("gnn", gnn.SPEC), ("baseline", official.SPEC)):
            row[name], row[f"{name}_seconds"] = train_and_score(spec, WORK, cfg, collection)
            print(
                f"  {collection:20s} {name:8s} valid {row[name]:.4f} ({row[f'{name}_seconds']:.0f} s)",
                flush=True,
            )
        out[collection] = row
    return out


def ablate(changes: list[str]) -> dict[str, dict[str, float]]:
    """The gnn's demo valid score per collection under the demo budget, then with each change alone.

    Args:
        changes: `section.key=value` overrides, one variant each (e.g. gnn.aggr=mean).
    """
    from tpurank.core.collections import COLLECTIONS
    from tpurank.gnn.families import gnn

    out: dict[str, dict[str, float]] = {}
    for change in ["", *changes]:
        folder = WORK / "ablation" / (change.replace("=", "-") or "demo-budget")
        (folder / "features").mkdir(parents=True, exist_ok=True)
        link = folder / "features" / "prepared"
        if not link.exists():
            link.symlink_to(WORK / "features" / "prepared", target_is_directory=True)
        cfg = demo_config([change] if change else [])
        row = {c: train_and_score(gnn.SPEC, folder, cfg, c)[0] for c in COLLECTIONS}
        out[change or "demo budget"] = row
        print(
            f"  {change or 'demo budget':28s} " + " ".join(f"{row[c]:.4f}" for c in COLLECTIONS), flush=True
        )
    return out


def table(rows: dict[str, dict[str, float]], head: str, real: rr.RealRows) -> str:
    """One table of demo valid scores per collection (`rows`: name -> collection -> score), each name
    followed by its real-sample rows ("-": never measured on real data)."""
    collections = list(next(iter(rows.values())))
    columns = [rr.LAYOUT, rr.TILE]
    lines = [
        f"| {head} | data | " + " | ".join([*collections, *columns]) + " |",
        "|---" * (2 + len(collections) + len(columns)) + "|",
    ]
    for name, row in rows.items():
        lines.append(
            f"| {name} | synthetic | " + " | ".join(f"{row[c]:.4f}" for c in collections) + " |  |  |"
        )
        blank = " |" * len(collections)
        lines += [f"| {name} | real |{blank} " + " | ".join(r) + " |" for r in real.cells(name, columns)]
    return "\n".join(lines)


def report(results: dict, folders: list[Path]) -> str:
    """The saved comparison (gnn vs baseline) and ablation as tables, with their real rows."""
    out = []
    if "valid" in results:
        real = rr.RealRows(REAL_MODELS, folders)
        models = {m: {c: r[m] for c, r in results["valid"].items()} for m in ("gnn", "baseline")}
        beats = results.get("gnn_beats_baseline_every_layout")
        out += [
            table(models, "model", real),
            f"gnn vs baseline: beats it on every demo layout collection: "
            f"{beats}; {real.judge('gnn', 'baseline')}",
        ]
    if "ablation" in results:
        out.append(table(results["ablation"], "change", rr.RealRows(REAL_ABLATION, folders)))
    return "\n\n".join([*out, rr.LEGEND]) if out else "no comparison or ablation in these results"


def print_table(path: Path, folders: list[Path]) -> int:
    """The comparison and ablation tables of a saved results file, with their real rows."""
    try:
        saved = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        sys.exit(f"{path}: not a bench_gnn results file ({type(e).__name__}: {e})")
    print(report(saved, folders))
    return 0


def parse_args() -> argparse.Namespace:
    """The options, parsed before torch is imported: `--help` and `--table` stay fast."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=8, help="timed training steps per collection")
    p.add_argument("--big-steps", type=int, default=1, help="timed training steps on the big nlp graph")
    p.add_argument("--max-steps", type=int, default=0, help="comparison training steps (0: as `all` on demo)")
    p.add_argument("--threads", type=int, default=1, help="torch threads (1: the machine is shared)")
    p.add_argument(
        "--ablate",
        nargs="*",
        metavar="SECTION.KEY=VALUE",
        help="also score the gnn under the demo budget with each change alone (e.g. gnn.aggr=mean)",
    )
    p.add_argument("--skip-big", action="store_true")
    p.add_argument("--skip-compare", action="store_true")
    rr.add_table_options(p, RESULTS / "gnn_cpu.json")
    return p.parse_args()


def main() -> int:
    """Throughput, the big graph's memory, the comparison and the ablation, in that order; then saved."""
    a = parse_args()
    if a.table:
        return print_table(a.table, rr.folders(a.real_dir))

    import torch

    from tpurank.core.collections import COLLECTIONS

    torch.set_num_threads(a.threads)
    slug, device = device_name(a.threads)
    results: dict = {"device": device, "command": " ".join([Path(PYTHON).name, *sys.argv]), "throughput": {}}
    print(f"device: {device}", flush=True)
    demo = ensure_demo_prepared()
    throughput(demo, a, results["throughput"])
    if not a.skip_big:
        results["big_nlp_graph"] = big_graph(a)
    if not a.skip_compare:
        results["valid"] = compare(a.max_steps)
        layout = [c for c in results["valid"] if c.startswith("layout")]
        results["gnn_beats_baseline_every_layout"] = all(
            results["valid"][c]["gnn"] > results["valid"][c]["baseline"] for c in layout
        )

    if a.ablate:
        print("gnn valid per collection (" + ", ".join(COLLECTIONS) + "):", flush=True)
        results["ablation"] = ablate(a.ablate)

    out = RESULTS / f"gnn_{slug}.json"
    results["provenance"] = provenance.stamp()
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(report(results, rr.folders(a.real_dir)))
    print(f"wrote {out}")
    return 0


def throughput(demo: Path, a: argparse.Namespace, out: dict) -> None:
    """Each model on each demo collection in a fresh child: configs/s and peak RSS of that work alone."""
    from tpurank.core.collections import COLLECTIONS

    for collection in COLLECTIONS:
        for name in ("gnn", "baseline"):
            r = child([str(demo), collection, name, str(a.steps)], a.threads)
            out[f"{collection} {name}"] = r
            print(
                f"  {collection:20s} {name:8s} {r['configs_per_s']:9.0f} configs/s  "
                f"peak RSS {r['peak_rss'] / 2**20:6.0f} MiB",
                flush=True,
            )


def big_graph(a: argparse.Namespace) -> dict:
    """Training steps on the largest full-scale nlp graph in a fresh child: its peak RSS against 8 GB."""
    big = ensure_big_prepared()
    r = child([str(big), "layout:nlp:random", "gnn", str(a.big_steps)], a.threads)
    r["graph"] = BIG
    r["within_target"] = r["peak_rss"] <= MEMORY_TARGET
    print(
        f"  big nlp graph ({BIG}, {r['nodes_per_graph']:.0f} nodes after pruning): peak RSS "
        f"{r['peak_rss'] / 2**30:.2f} GiB, {r['configs_per_s']:.0f} configs/s",
        flush=True,
    )
    return r


if __name__ == "__main__":
    raise SystemExit(main())
