"""The GNN recipe ablation on real measurements: bench_real's layout task, GNN only.

Trains the GNN on the real `layout:xla:default` train graph `unet3d` and ranks the real valid graph
`unet_3d.4x4.bf16` that no model saw (bench/runs/bench_real.py's data root, stages run through the CLI
as a user runs them), once per seed and variant, under one step budget (validation only at the
end). Reports Kendall tau on all configs and on the official 1000-config subset: mean and spread
over seeds, and the tau of the seeds' predictions averaged after per-graph rank normalisation
(what `gnn.seeds = N` predicts). `today` pins every recipe option to its value before the top solutions' recipe was adopted.

    .venv/bin/python bench/runs/bench_recipe_real.py --seeds 0 1 2 --steps 150 \\
        --variants today recipe=gnn.standardize=true,gnn.warmup_steps=15
Saves bench/results/recipe_real.json (or --out). Exits 0 with the reason when ../shared is absent.
`bench_recipe.py --table` prints these rows (data `real`) beside the same recipes' demo rows.
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
import real_data as rd  # noqa: E402
from bench_real import run_models  # noqa: E402

from tpurank.data.subsets import load_subsets  # noqa: E402
from tpurank.gnn.seeds import average_costs  # noqa: E402

# the GNN as it was before the top solutions' recipe (config.py defaults then), whatever the defaults are now
TODAY = (
    "gnn.hidden=64,gnn.dropout=0.0,gnn.warmup_steps=0,gnn.seeds=1,gnn.standardize=false,"
    "gnn.layer_attention=false,gnn.cross_config_attention=false,gnn.tile_all_configs=false"
)


def parse_variant(text: str) -> tuple[str, list[str]]:
    """`name=key=value,key=value` or `today` or `key=value,...` (named by itself) -> (name, overrides)."""
    if text == "today":
        return "today", TODAY.split(",")
    head, _, rest = text.partition("=")
    if rest and "." not in head:
        return head, [*TODAY.split(","), *rest.split(",")]
    return text, [*TODAY.split(","), *text.split(",")]


def parse_args() -> argparse.Namespace:
    """The options, apart so that main reads as the run: resume, then each variant seed by seed."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--variants", nargs="+", default=["today"], help="today, or [NAME=]KEY=VALUE[,...] over today"
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--steps", type=int, default=150, help="GNN training steps (one validation, at the end)")
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench" / "recipe-real")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "recipe_real.json")
    return p.parse_args()


def main() -> int:
    """Each variant, seed by seed, on the real layout graph; saved after each (a rerun resumes)."""
    a = parse_args()
    if reason := rd.missing_sample():
        print(f"bench_recipe_real: skipped: {reason}")
        return 0
    root = rd.layout_root(a.work / "data")
    files = rd.scored_graphs(root, rd.LAYOUT)
    subsets = load_subsets(rd.SHARED / "eval_indices").get(rd.LAYOUT, {})
    budget = [f"gnn.max_steps={a.steps}", f"gnn.eval_every={a.steps}", "gnn.time_budget_min=0"]
    res: dict = {
        "command": " ".join(["bench/runs/bench_recipe_real.py", *sys.argv[1:]]),
        "steps": a.steps,
        "seeds": a.seeds,
        "rows": {},
    }
    if a.out.exists():  # finished variants of an interrupted run (same steps and seeds) are kept
        old = json.loads(a.out.read_text())
        if (old.get("steps"), old.get("seeds")) == (a.steps, a.seeds):
            res["rows"] = old.get("rows", {})
    for text in a.variants:
        name, sets = parse_variant(text)
        if name in res["rows"]:
            continue
        costs, seconds = [], []
        for seed in a.seeds:
            t = time.perf_counter()
            out = a.work / name.replace("=", "-") / f"seed{seed}"
            got = run_models(
                root, out, a.work / "work", rd.LAYOUT, seed, [*budget, *sets], ["gnn"], a.work / "log"
            )
            costs.append(got["gnn"])
            seconds.append(round(time.perf_counter() - t, 1))
        row = {"sets": sets, "seconds": seconds}
        for kind, sub in (("all", None), ("subset", subsets)):
            taus = [rd.mean_of(rd.score_costs(c, files, rd.LAYOUT, sub)) for c in costs]
            avg = {g: average_costs([c[g] for c in costs], "rank") for g in files}
            row[kind] = {
                "taus": taus,
                "mean": float(np.mean(taus)),
                "std": float(np.std(taus)),
                "seed_average": rd.mean_of(rd.score_costs(avg, files, rd.LAYOUT, sub)),
            }
        res["rows"][name] = row
        print(
            f"  {name:10s} tau all configs {row['all']['mean']:.4f} +- {row['all']['std']:.4f} "
            f"(seeds {' '.join(f'{x:.4f}' for x in row['all']['taus'])}; seed average {row['all']['seed_average']:.4f}); "
            f"official subset {row['subset']['mean']:.4f} +- {row['subset']['std']:.4f} "
            f"(seed average {row['subset']['seed_average']:.4f}); {sum(seconds):.0f} s",
            flush=True,
        )
        res["provenance"] = provenance.stamp()
        a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"saved {a.out}; beside the demo rows: bench/runs/bench_recipe.py --table")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
