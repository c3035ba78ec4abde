"""Benchmark at real scale: every stage of `all` on a `full`-scale synthetic dataset.

Runs the steps of `./run.sh all` one by one, as a user runs them (`python -m tpurank <stage>` in a
subprocess, with the options `all` gives it), and prints per stage: wall time, peak RSS of the whole
process tree (sampled every 0.2 s), bytes read and written by that tree (/proc io rchar/wchar,
sampled), and graphs / rows / configs processed. Then each target (docs/scale.md) with its measured
ratio and pass/fail, and projections (labelled as such) for what was not run whole. Saves
`bench/results/scale.json`.

Beside the steps it measures, in the same run: decompressing every input array once (the yardstick
of `prepare`), the prepared cache's bytes against the npz's on the full data and on the real sample
files (`../shared`), and the synthetic data's shape and compressibility next to the real files'.

    .venv/bin/python bench/runs/bench_scale.py                                   # all five (hours on 2 cores)
    .venv/bin/python bench/runs/bench_scale.py --collections tile:xla layout:xla:random   # the 60-minute target
Options: --data DIR (default data/synthetic-full, generated when missing), --work DIR, --config F
(default configs/profile-cpu.toml), --models (default lgbm gnn), --gnn-steps N (the measured GNN
slice for the default-config projection), --out F (default bench/results/scale.json).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import provenance  # noqa: E402
from scale_measure import GB, decompress_all, folder_bytes, run_measured  # noqa: E402
from scale_modes import demo_cap_only, features_lgbm_default, gnn_slice, gnn_slice_only, prepare_only  # noqa: E402
from scale_report import report  # noqa: E402

from tpurank import cli  # noqa: E402
from tpurank.core.collections import COLLECTIONS, collection_dir  # noqa: E402
from tpurank.core.config_files import load_config  # noqa: E402
from tpurank.core.paths import NPZ_SUBDIR, Paths  # noqa: E402
from tpurank.data.dataset import discover  # noqa: E402
from tpurank.prepare.cache import INDEX_FILE  # noqa: E402
from tpurank.run.pipeline import plan  # noqa: E402
from tpurank.run.stages import command_argv  # noqa: E402

SHARED = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
RESULTS = ROOT / "bench" / "results" / "scale.json"
REAL_SIZES = {  # the real dataset (../shared/docs/tpugraphs.md), for the results table
    "npz_gb": 7.0,
    "mean_nodes": {"xla": 14_000, "nlp": 5_700},
}


# ----------------------------------------------------------------------------------- synthetic vs real


def config_stats(files: list[Path]) -> dict:
    """Shape and compressibility of layout files: nodes, configurable nodes, configs, duplicate
    share, npz bytes per config value, share of -1 entries (configs read as int8)."""
    nodes, cfgn, configs, dup, per_value, minus1 = [], [], [], [], [], []
    for f in files:
        with np.load(f) as z:
            c = z["node_config_feat"].astype(np.int8)
            nodes.append(len(z["node_opcode"]))
        cfgn.append(c.shape[1])
        configs.append(c.shape[0])
        rows = np.ascontiguousarray(c.reshape(len(c), -1))
        u = len(np.unique(rows.view(np.dtype((np.void, rows.shape[1])))) if rows.size else 0)
        dup.append(1 - u / max(1, len(c)))
        per_value.append(f.stat().st_size / max(1, c.size))
        minus1.append(float((c == -1).mean()) if c.size else np.nan)
    return {
        "files": len(files),
        "mean_nodes": float(np.mean(nodes)),
        "mean_configurable": float(np.mean(cfgn)),
        "median_configs": float(np.median(configs)),
        "duplicate_share": float(np.mean(dup)),
        "npz_bytes_per_config_value": float(np.median(per_value)),
        "share_minus1": float(np.nanmean(minus1)),
    }


def synthetic_vs_real(data: Path, collections: list[str], per_collection: int = 6) -> dict:
    """The stats above for up to `per_collection` train/valid files of each layout collection of
    the synthetic tree, and for every layout file of the real sample."""
    out: dict = {}
    for c in collections:
        if c.startswith("tile"):
            continue
        files = [gf.path for gf in discover(data / NPZ_SUBDIR, [c], ["train", "valid"])]
        rng = np.random.default_rng(0)
        pick = (
            sorted(rng.choice(len(files), size=min(per_collection, len(files)), replace=False))
            if files
            else []
        )
        out[f"synthetic {c}"] = config_stats([files[i] for i in pick])
    if SHARED.is_dir():
        for fam in ("xla", "nlp"):
            real = sorted((SHARED / NPZ_SUBDIR / "layout" / fam).rglob("*.npz"))
            if real:
                out[f"real sample layout:{fam}"] = config_stats(real)
    return out


def real_sample_cache_ratio(work: Path) -> dict | None:
    """prepare on the real sample files: cache bytes / npz bytes (the 1.5x target holds there too)."""
    if not SHARED.is_dir():
        return None
    out = work / "real-sample"
    rec = run_measured(
        "prepare (real sample)",
        ["prepare", "--no-progress", "--data-dir", str(SHARED), "--out-dir", str(out)],
        work / "prepare-real.log",
    )
    npz = folder_bytes(SHARED / NPZ_SUBDIR)
    cache = folder_bytes(out / "features/prepared")
    return {**rec, "npz_bytes": npz, "cache_bytes": cache, "ratio": cache / npz}


# ------------------------------------------------------------------------------------------- the run


def stage_counts(paths: Paths, collections: list[str]) -> dict:
    """Graphs, configs and feature rows the stages processed (from their own output files)."""
    out: dict = {}
    index = paths.prepared / INDEX_FILE
    if index.exists():
        idx = pd.read_parquet(index)
        idx = idx[idx["collection"].isin(collections)]
        out.update(
            graphs=len(idx),
            configs=int(idx["configs"].sum()),
            unique_configs=int(idx["configs_unique"].sum()),
        )
    rows = 0
    for c in collections:
        for s in ("train", "valid", "test"):
            meta = paths.tabular / collection_dir(c) / f"{s}.json"
            if meta.exists():
                rows += int(json.loads(meta.read_text()).get("rows", 0))
    out["feature_rows"] = rows
    return out


def budget_summary(paths: Paths, collections: list[str]) -> dict:
    """What the GNNs of the budgeted run did (from their model.json)."""
    out: dict = {}
    for model in ("gnn", "baseline"):
        for c in collections:
            side = paths.model_dir(model, c) / "model.json"
            if side.exists():
                s = json.loads(side.read_text())
                hist = s.get("history", [])
                out[f"{model} {c}"] = {
                    "steps_run": s.get("steps_run"),
                    "seconds": s.get("seconds"),
                    "stopped_by": s.get("stopped_by"),
                    "configs_per_s": round(float(np.mean([h["configs_per_s"] for h in hist])), 1)
                    if hist
                    else None,
                    "best_valid_score": s.get("best_valid_score"),
                }
    return out


def parse_args() -> argparse.Namespace:
    """The options of a whole run and of each partial mode, apart so that main reads as the modes."""
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", type=Path, default=ROOT / "data" / "synthetic-full")
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench" / "scale")
    p.add_argument("--collections", nargs="+", choices=COLLECTIONS, default=list(COLLECTIONS))
    p.add_argument("--config", type=Path, default=ROOT / "configs" / "profile-cpu.toml")
    p.add_argument("--models", nargs="+", default=["lgbm", "gnn"])
    p.add_argument("--jobs", type=int, default=2, help="synth workers when the data is generated")
    p.add_argument("--out", type=Path, default=RESULTS, help="results file of the whole run")
    p.add_argument(
        "--gnn-steps", type=int, default=10, help="steps of the default-config GNN slice (0: skip)"
    )
    p.add_argument(
        "--features-lgbm-default",
        action="store_true",
        help="only: features + train lgbm at the default config per collection, projected to all five",
    )
    p.add_argument(
        "--prepare-only",
        action="store_true",
        help="only: prepare into a fresh folder between two decompression passes (its time ratio, less noise)",
    )
    p.add_argument(
        "--gnn-slice-only",
        action="store_true",
        help="only: the default-config GNN slice per collection (--gnn-steps), into --out",
    )
    p.add_argument(
        "--demo-cap",
        action="store_true",
        help="only: LightGBM on demo valid with the default feature cap vs none",
    )
    return p.parse_args()


def main() -> int:
    """The mode the options ask for: a partial mode alone, else the whole run."""
    a = parse_args()
    collections = [c for c in COLLECTIONS if c in a.collections]
    a.work.mkdir(parents=True, exist_ok=True)
    if a.prepare_only:
        return prepare_only(a, collections)
    if a.features_lgbm_default:
        return features_lgbm_default(a, collections)
    if a.gnn_slice_only:  # needs a prepared cache in <work>/work (a whole run's)
        return gnn_slice_only(a, collections)
    if a.demo_cap:
        return demo_cap_only(a)
    return whole_run(a, collections)


def whole_run(a: argparse.Namespace, collections: list[str]) -> int:
    """Every step of `all` measured beside its yardsticks: the figures the targets of docs/scale.md judge."""
    results: dict = {
        "collections": collections,
        "config": str(a.config),
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / GB, 1),
        "stages": [],
    }
    generate_missing(a, collections, results)
    measure_inputs(a, collections, results)
    out = a.work / "out"
    paths = Paths(data=a.data, out=out, work=a.work / "work")
    common = [
        "--data-dir",
        str(a.data),
        "--out-dir",
        str(out),
        "--work-dir",
        str(paths.work),
        "--config",
        str(a.config),
    ]
    run_steps(a, collections, results, common)
    measure_outputs(a, collections, results, paths, common)
    report(results, collections)
    results["provenance"] = provenance.stamp()
    a.out.write_text(json.dumps(results, indent=2, default=float) + "\n")
    print(f"\nsaved {a.out}")
    return 0


def generate_missing(a: argparse.Namespace, collections: list[str], results: dict) -> None:
    """Generate the full-scale tree only where it is missing (hours on 2 cores), measured as a step."""
    if not (a.data / NPZ_SUBDIR).is_dir() or any(
        not (a.data / NPZ_SUBDIR / collection_dir(c)).is_dir() for c in collections
    ):
        print(f"generating the full-scale synthetic dataset in {a.data} ...", flush=True)
        gen = run_measured(
            "synth --scale full",
            [
                "synth",
                "--scale",
                "full",
                "--out",
                str(a.data),
                "--jobs",
                str(a.jobs),
                "--collections",
                *collections,
            ],
            a.work / "synth.log",
        )
        results["generate"] = gen


def measure_inputs(a: argparse.Namespace, collections: list[str], results: dict) -> None:
    """The dataset's size and shape beside the real files', and decompressing it once: prepare's yardstick."""
    files = [gf.path for gf in discover(a.data / NPZ_SUBDIR, collections)]
    npz_bytes = sum(f.stat().st_size for f in files)
    results["dataset"] = {"files": len(files), "npz_bytes": npz_bytes}
    print(f"dataset {a.data}: {len(files)} files, {npz_bytes / GB:.2f} GB of npz ({', '.join(collections)})")

    print("synthetic vs real (layout files):", flush=True)
    results["synthetic_vs_real"] = synthetic_vs_real(a.data, collections)
    print(pd.DataFrame(results["synthetic_vs_real"]).T.round(4).to_string())

    cfg = load_config(a.config)
    jobs = cfg.prepare.jobs or min(os.cpu_count() or 1, 2)
    print(f"decompressing every input array once ({jobs} processes) ...", flush=True)
    results["decompress"] = decompress_all(files, jobs)
    print(f"  decompress all               {results['decompress']['seconds']:>8.1f} s")


def run_steps(a: argparse.Namespace, collections: list[str], results: dict, common: list[str]) -> None:
    """The steps of `all` one by one, as a user runs them, each measured; stops at the first that fails."""
    steps = plan(a.models, 0, collections)
    print(
        f"the steps of `all --collections {' '.join(collections)} --models {' '.join(a.models)}`:", flush=True
    )
    t_all = time.perf_counter()
    for step in steps:
        name = str(step.name)
        log = a.work / f"{name.replace(' ', '_')}.log"
        rec = run_measured(name, [*command_argv(step.options), *common], log)  # its options, then the run's
        results["stages"].append(rec)
        if rec["rc"] != 0:
            break
    results["all_seconds"] = round(time.perf_counter() - t_all, 1)


def measure_outputs(
    a: argparse.Namespace, collections: list[str], results: dict, paths: Paths, common: list[str]
) -> None:
    """What the steps left (counts, cache bytes, the GNNs' budget, a valid submission), and the GNN slice."""
    npz_bytes = results["dataset"]["npz_bytes"]
    results["counts"] = stage_counts(paths, collections)
    cache_bytes = folder_bytes(paths.prepared)
    results["cache"] = {
        "bytes": cache_bytes,
        "npz_bytes": npz_bytes,
        "ratio": cache_bytes / max(1, npz_bytes),
    }
    results["real_sample_cache"] = real_sample_cache_ratio(a.work)
    results["gnn_budget"] = budget_summary(paths, collections)
    if a.gnn_steps:
        print(
            f"the GNN at its default config, {a.gnn_steps} steps per collection (a measured slice):",
            flush=True,
        )
        results["gnn_slice"] = gnn_slice(a, collections, a.gnn_steps)
    check = cli.main(
        ["check-submission", str(paths.out / "submissions/test_ensemble.csv"), "--partial", *common[:2]]
    )
    results["submission_valid"] = check == 0


if __name__ == "__main__":
    raise SystemExit(main())
