"""Ablation of the top solutions' recipe on the GNN: each change alone, a few seeds each.

Every variant (one or more `section.key=value` overrides, comma-separated) trains the GNN once per
seed on the synthetic demo data under the step budget of `./run.sh all` on demo (or `--max-steps`)
and scores demo valid (every original config of each valid graph against its own runtime, as the
validation report does). Per variant and collection it reports the mean and the spread (population
standard deviation) over seeds, and the score of the seeds' predictions averaged after per-graph
normalisation (what `gnn.seeds = N` predicts). Models are kept under data/bench/gnn/recipe/, so a
rerun reuses them; results go to bench/results/recipe_<device>.json. The table shows, below each
variant, its real-sample rows (bench_recipe_real.py, bench_real.py; "-" where none), and the variants
measured on real data only.

    .venv/bin/python bench/runs/bench_recipe.py --seeds 3 --collections tile:xla layout:xla:default \\
        --variants gnn.hidden=128 gnn.dropout=0.1 gnn.warmup_steps=24 gnn.standardize=true
    .venv/bin/python bench/runs/bench_recipe.py --table     # the table of bench/results/recipe_cpu.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402
import real_rows as rr  # noqa: E402
from bench_gnn import DEMO_ROOT, PYTHON, WORK, demo_config, device_name, ensure_demo_prepared  # noqa: E402

BASE = "base"
# the recipe options at their values before the top solutions' recipe, whatever config.py's defaults are now: the
# base is the demo budget of `./run.sh all` as it was, and each variant changes one thing of it
PINNED = [
    "gnn.dropout=0.0",
    "gnn.warmup_steps=0",
    "gnn.seeds=1",
    "gnn.standardize=false",
    "gnn.layer_attention=false",
    "gnn.tile_all_configs=false",
]
TILE_ONLY = {"gnn.tile_all_configs"}  # options the other kind ignores: its rows repeat the base runs
LAYOUT_ONLY = {"gnn.layer_attention"}

# variant -> its real-sample rows (tau on the real unet graph, all configs): bench_recipe_real.py's rows
# (its `today` is this base: every recipe option off) and bench_real.py runs of the CPU profile's GNN. A
# variant measured on real data only is a row of the table too, with "-" on demo.
TODAY = "gnn, width 64, 150 steps, bench_recipe_real"
CPU = "the CPU profile's gnn, 300 steps"
CPU_1X300 = ("real_layout_cpu_gnn_1x300.json",)


def _recipe_real(row: str) -> rr.Real:
    return rr.Real(TODAY, ("recipe_real.json",), ("rows", row, "all", "taus"))


REAL: dict[str, list[rr.Real]] = {
    BASE: [_recipe_real("today")],
    "gnn.dropout=0.1": [  # beside its own base: the CPU profile's GNN has no dropout
        rr.layout(("real_layout_cpu_gnn_dropout01.json",), "gnn", f"{CPU}, dropout 0.1"),
        rr.layout(CPU_1X300, "gnn", f"{CPU}, no dropout: its base"),
    ],
    "gnn.seeds=3,gnn.max_steps=100": [  # the same training steps in all: 3 seeds of 100 against 1 of 300
        rr.layout(
            ("real_layout_cpu_gnn_3x100.json",), "gnn", "the CPU profile's gnn, 3 seeds x 100 steps averaged"
        ),
        rr.layout(CPU_1X300, "gnn", f"{CPU}, 1 seed: its base"),
    ],
    "gnn.standardize=true,gnn.warmup_steps=15": [_recipe_real("recipe")],
    "gnn.standardize=true,gnn.warmup_steps=15,gnn.layer_attention=true": [_recipe_real("recipe+attention")],
}


def run_variant(variant: str, seed: int, collection: str, max_steps: int) -> tuple[dict, float]:
    """Train one variant with one seed on one collection; (valid costs per graph, training seconds)."""
    from tpurank.core.paths import Paths
    from tpurank.gnn.data import load_split
    from tpurank.gnn.families import gnn
    from tpurank.gnn.predict import predict_collection
    from tpurank.gnn.training.collection import train_collection

    folder = WORK / "recipe" / variant.replace("=", "-").replace(",", "+") / f"seed-{seed}"
    (folder / "features").mkdir(parents=True, exist_ok=True)
    link = folder / "features" / "prepared"
    if not link.exists():
        link.symlink_to(WORK / "features" / "prepared", target_is_directory=True)
    extra = [*PINNED, *([] if variant == BASE else variant.split(","))]
    # the demo budget sets tile's own width and configs: a change applies to tile too
    extra += [f'collections."tile:xla".{x}' for x in extra if x.startswith("gnn.")]
    steps = [f"gnn.max_steps={max_steps}"] if max_steps else []  # tile keeps its own budget
    cfg = demo_config([*steps, *extra, f"seed={seed}"]).for_collection(collection)
    paths = Paths(data=DEMO_ROOT, out=folder)
    valid = load_split(paths, collection, "valid", progress=False)
    summary = train_collection(gnn.SPEC, paths, cfg, collection, progress=False)
    costs = predict_collection(gnn.SPEC, paths, cfg, collection, "valid", graphs=valid, progress=False)
    return {g.id: (costs[g.id], g.config_runtime) for g in valid}, sum(
        h["seconds"] for h in summary["history"]
    )


def applies(variant: str, collection: str) -> bool:
    """False where every change of the variant is a no-op for the collection's kind."""
    keys = {x.split("=", 1)[0] for x in variant.split(",")}
    none = TILE_ONLY if collection.startswith("layout") else LAYOUT_ONLY
    return variant == BASE or not keys <= none


def score(collection: str, per_graph: dict) -> float:
    from tpurank.core.metrics import graph_metrics, order_from_costs

    s = [graph_metrics(collection, order_from_costs(c), rt)["score"] for c, rt in per_graph.values()]
    return float(np.nanmean(s))


def parse_args() -> argparse.Namespace:
    """The options, parsed before torch is imported: `--help` and `--table` stay fast."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--variants",
        nargs="*",
        default=[],
        metavar="SECTION.KEY=VALUE[,...][@SEEDS]",
        help="@N: N seeds only",
    )
    p.add_argument("--seeds", type=int, default=3, help="seeds per variant (0, 1, ...)")
    p.add_argument("--collections", nargs="+", default=["tile:xla", "layout:xla:default"])
    p.add_argument(
        "--max-steps", type=int, default=0, help="layout steps (0: as `all` on demo); tile keeps its own"
    )
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--normalize", default="rank", choices=("rank", "zscore"), help="for the seed average")
    rr.add_table_options(p, ROOT / "bench" / "results" / "recipe_cpu.json")
    return p.parse_args()


def main() -> int:
    """Every variant on every collection, seed by seed, saved after each variant; then the table."""
    a = parse_args()
    if a.table:
        return print_table(a.table, rr.folders(a.real_dir))

    import torch

    torch.set_num_threads(a.threads)
    slug, device = device_name(a.threads)
    print(f"device: {device}", flush=True)
    ensure_demo_prepared()
    command = " ".join([Path(PYTHON).name, *sys.argv])
    results: dict = {
        "device": device,
        "command": command,
        "seeds": a.seeds,
        "max_steps": a.max_steps,
        "rows": {},
    }
    t_all = time.perf_counter()
    for spec in [BASE, *a.variants]:
        variant, _, n = spec.partition("@")  # VARIANT@N: this variant with its first N seeds only
        seeds = int(n) if n else a.seeds
        row = {}
        for collection in a.collections:
            if not applies(variant, collection):  # the same model as the base: its runs
                row[collection] = results["rows"][BASE][collection]
                continue
            row[collection] = measure_cell(variant, collection, seeds, a)
        results["rows"][variant] = row
        out = ROOT / "bench" / "results" / f"recipe_{slug}.json"
        results["seconds"] = round(time.perf_counter() - t_all, 1)
        results["provenance"] = provenance.stamp()
        out.write_text(json.dumps(results, indent=2) + "\n")  # after every variant: partial results survive
    print(markdown(results, a.collections, rr.RealRows(REAL, rr.folders(a.real_dir))))
    print(f"wrote {out} ({results['seconds']:.0f} s)")
    return 0


def measure_cell(variant: str, collection: str, seeds: int, a: argparse.Namespace) -> dict:
    """One variant on one collection: a model per seed, their scores and the seeds' averaged score."""
    from tpurank.gnn.seeds import average_costs

    runs = [run_variant(variant, s, collection, a.max_steps) for s in range(seeds)]
    scores = [score(collection, r) for r, _ in runs]
    avg = {
        gid: (average_costs([r[gid][0] for r, _ in runs], a.normalize), runs[0][0][gid][1])
        for gid in runs[0][0]
    }
    r = {
        "scores": scores,
        "mean": float(np.mean(scores)),
        "std": float(np.std(scores)),
        "seed_average": score(collection, avg),
        "train_seconds": [round(t, 1) for _, t in runs],
    }
    print(
        f"  {variant:32s} {collection:20s} {r['mean']:.4f} +- {r['std']:.4f} "
        f"(seeds {' '.join(f'{x:.4f}' for x in scores)}; average of the seeds {r['seed_average']:.4f}; "
        f"{sum(r['train_seconds']):.0f} s)",
        flush=True,
    )
    return r


def markdown(results: dict, collections: list[str], real: rr.RealRows | None = None) -> str:
    """The results table: mean +- spread over seeds, and the seed-averaged score, per collection; below
    each variant its real-sample rows ("-": never measured on real data), then the variants measured on
    real data only."""
    real = real or rr.RealRows(REAL)
    lines = [
        "| variant | data | "
        + " | ".join(f"{c} (mean +- sd) | {c} (seed avg)" for c in collections)
        + f" | {rr.LAYOUT} |",
        "|---" * (3 + 2 * len(collections)) + "|",
    ]
    rows = results["rows"]
    for variant in [*rows, *(v for v in real.mapping if v not in rows)]:
        row = rows.get(variant)
        if row is None:
            cells, note = ["- | -"] * len(collections), ""
        else:
            cells = [
                f"{row[c]['mean']:.4f} +- {row[c]['std']:.4f} | {row[c]['seed_average']:.4f}"
                for c in collections
            ]
            n = {len(row[c]["scores"]) for c in collections}
            note = (
                f" ({'/'.join(str(len(row[c]['scores'])) for c in collections)} seeds)"
                if n != {results["seeds"]}
                else ""
            )
        lines.append(f"| `{variant}`{note} | synthetic | " + " | ".join(cells) + " |  |")
        blank = " |" * (2 * len(collections))
        lines += [f"| `{variant}` | real |{blank} {r[0]} |" for r in real.cells(variant, [rr.LAYOUT])]
    return "\n".join(lines) + "\n\n" + rr.LEGEND


def print_table(path: Path, folders: list[Path]) -> int:
    """The table of a saved results file (every collection it holds), with the real rows."""
    try:
        results = json.loads(path.read_text())
        collections = list(next(iter(results["rows"].values())))
    except (OSError, ValueError, KeyError, StopIteration) as e:
        sys.exit(f"{path}: not a bench_recipe results file ({type(e).__name__}: {e})")
    print(markdown(results, collections, rr.RealRows(REAL, folders)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
