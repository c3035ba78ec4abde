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

    .venv/bin/python bench/bench_scale.py                                   # all five (hours on 2 cores)
    .venv/bin/python bench/bench_scale.py --collections tile:xla layout:xla:random   # the 60-minute target
Options: --data DIR (default data/synthetic-full, generated when missing), --work DIR, --config F
(default configs/profile-cpu.toml), --models (default lgbm gnn), --gnn-steps N (the measured GNN
slice for the default-config projection), --out F (default bench/results/scale.json).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import pandas as pd
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tpurank import cli  # noqa: E402
from tpurank.core.collections import COLLECTIONS, collection_dir  # noqa: E402
from tpurank.core.config import Config  # noqa: E402
from tpurank.core.config_files import load_config  # noqa: E402
from tpurank.core.paths import Paths  # noqa: E402
from tpurank.data.dataset import discover  # noqa: E402
from tpurank.pipeline import plan  # noqa: E402
from tpurank.stages import command_argv  # noqa: E402

PYTHON = sys.executable
SHARED = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
RESULTS = ROOT / "bench" / "results" / "scale.json"
GB = 1e9
# the scale targets (docs/scale.md) on this 2-core, 24 GB machine
MAX_CACHE_RATIO = 1.5  # prepared cache bytes / npz bytes
MAX_STAGE_RSS = 12 * GB
MAX_GNN_RSS = 4 * GB
MAX_PREPARE_VS_DECOMPRESS = 2.0
MAX_FEATURES_LGBM_MIN = 60.0  # all five collections
MAX_PARTIAL_ALL_MIN = 60.0  # `all --collections tile:xla layout:xla:random` with the CPU budget config
REAL_SIZES = {  # the real dataset (../shared/docs/tpugraphs.md), for the results table
    "npz_gb": 7.0,
    "mean_nodes": {"xla": 14_000, "nlp": 5_700},
}


# ----------------------------------------------------------------------------------------- measuring


class TreeMonitor:
    """Peak RSS and I/O of a process and all its descendants, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.every = every
        self.peak_rss = 0
        self.io: dict[int, tuple[int, int]] = {}  # pid -> last (rchar, wchar) seen
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                break
            rss = 0
            for p in procs:
                try:
                    rss += p.memory_info().rss
                    io = p.io_counters()
                    self.io[p.pid] = (io.read_chars, io.write_chars)
                except psutil.Error:
                    pass
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(self.every)

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join()
        read = sum(r for r, _ in self.io.values())
        written = sum(w for _, w in self.io.values())
        return {"peak_rss": self.peak_rss, "read_bytes": read, "written_bytes": written}


def run_measured(name: str, argv: list[str], log: Path, env: dict | None = None) -> dict:
    """Run `python -m tpurank <argv>` (or any argv starting with a path) and measure its tree."""
    cmd = argv if argv[0].endswith(("python", "python3")) else [PYTHON, "-m", "tpurank", *argv]
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **(env or {})}
        )
        mon = TreeMonitor(proc.pid)
        rc = proc.wait()
    rec = {"stage": name, "seconds": round(time.perf_counter() - t, 2), "rc": rc, **mon.finish()}
    print(
        f"  {name:<28} {rec['seconds']:>8.1f} s  peak {rec['peak_rss'] / GB:5.2f} GB  "
        f"read {rec['read_bytes'] / GB:6.2f} GB  written {rec['written_bytes'] / GB:6.2f} GB"
        + ("" if rc == 0 else f"  FAILED (exit {rc}, log {log})"),
        flush=True,
    )
    return rec


def _decompress_file(path: str) -> int:
    with np.load(path) as z:
        return sum(z[k].nbytes for k in z.files)


def decompress_all(files: list[Path], jobs: int) -> dict:
    """Decompress every array of every file once, in `jobs` processes (prepare's yardstick)."""
    t = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        total = sum(pool.map(_decompress_file, [str(f) for f in files], chunksize=16))
    return {"seconds": round(time.perf_counter() - t, 2), "decoded_bytes": total, "jobs": jobs}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0


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
        files = [gf.path for gf in discover(data / "npz_all/npz", [c], ["train", "valid"])]
        rng = np.random.default_rng(0)
        pick = (
            sorted(rng.choice(len(files), size=min(per_collection, len(files)), replace=False))
            if files
            else []
        )
        out[f"synthetic {c}"] = config_stats([files[i] for i in pick])
    if SHARED.is_dir():
        for fam in ("xla", "nlp"):
            real = sorted((SHARED / "npz_all/npz/layout" / fam).rglob("*.npz"))
            if real:
                out[f"real sample layout:{fam}"] = config_stats(real)
    return out


def real_sample_cache_ratio(work: Path) -> dict | None:
    """prepare on the real sample files: cache bytes / npz bytes (the 1.5x target holds there too)."""
    if not SHARED.is_dir():
        return None
    out = work / "real-sample"
    rec = run_measured("prepare (real sample)", ["prepare", "--no-progress", "--data-dir", str(SHARED),
                       "--out-dir", str(out)], work / "prepare-real.log")  # fmt: skip
    npz = folder_bytes(SHARED / "npz_all/npz")
    cache = folder_bytes(out / "features/prepared")
    return {**rec, "npz_bytes": npz, "cache_bytes": cache, "ratio": cache / npz}


# ------------------------------------------------------------------------------------------- the run


def stage_counts(paths: Paths, collections: list[str]) -> dict:
    """Graphs, configs and feature rows the stages processed (from their own output files)."""
    out: dict = {}
    index = paths.prepared / "index.parquet"
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


def gnn_slice(a: argparse.Namespace, collections: list[str], steps: int) -> dict:
    """Train the GNN with the DEFAULT config for `steps` steps on each layout collection and
    tile, measured (peak RSS is the 4 GB target), and PROJECT the default max_steps from the rate."""
    out: dict = {}
    defaults = Config()
    work = a.work / "slice"
    for c in collections:
        argv = ["train", "--model", "gnn", "--collections", c, "--data-dir", str(a.data), "--out-dir", str(work),
                "--work-dir", str(a.work / "work"), "--set", f"gnn.max_steps={steps}", "--set", f"gnn.eval_every={steps}"]  # fmt: skip
        rec = run_measured(f"gnn slice {c}", argv, a.work / f"slice-{c.replace(':', '-')}.log")
        side = Paths(a.data, work).model_dir("gnn", c) / "model.json"
        if rec["rc"] == 0 and side.exists():
            s = json.loads(side.read_text())
            hist = s["history"]
            train_s = sum(h["seconds"] for h in hist)  # training time between validations
            per_step = train_s / max(1, s["steps_run"])
            eval_s = max(0.0, s["seconds"] - train_s) / max(1, len(hist))
            max_steps = defaults.for_collection(c).gnn.max_steps
            evals = -(-max_steps // 200)  # eval_every = 0: at most every 200 steps
            rec.update(
                configs_per_s=hist[-1]["configs_per_s"],
                seconds_per_step=round(per_step, 3),
                seconds_per_validation=round(eval_s, 1),
                projection_default_max_steps=max_steps,
                projection_hours=round((per_step * max_steps + eval_s * evals) / 3600, 2),
            )
        out[c] = rec
    return out


def demo_cap_check(work: Path, caps: list[int]) -> dict:
    """LightGBM's valid scores on demo with each feature cap, side by side with no cap (0), the way
    `all` trains it (features, train lgbm, predict lgbm valid); the target: the default
    cap loses at most 0.01 tau on every layout collection."""
    demo = ROOT / "data" / "synthetic-demo"
    if not (demo / "npz_all/npz").is_dir():
        run_measured(
            "synth --scale demo", ["synth", "--scale", "demo", "--out", str(demo)], work / "demo-synth.log"
        )
    shared = work / "demo-work"  # one prepared cache, a features/models/predictions folder per cap
    out: dict = {}
    for cap in [0, *caps]:
        folder = work / f"demo-cap-{cap}"
        common = [
            "--data-dir",
            str(demo),
            "--out-dir",
            str(folder),
            "--set",
            f"features.max_configs_per_graph={cap}",
        ]
        (folder / "features").mkdir(parents=True, exist_ok=True)
        run_measured(
            "prepare demo",
            ["prepare", "--no-progress", *common, "--work-dir", str(shared)],
            work / "demo-prepare.log",
        )
        link = folder / "features" / "prepared"
        if not link.exists():
            link.symlink_to(shared / "features" / "prepared", target_is_directory=True)
        for argv in (
            ["features"],
            ["train", "--model", "lgbm"],
            ["predict", "--model", "lgbm", "--split", "valid"],
        ):
            rec = run_measured(
                f"{argv[0]} demo cap {cap}", [*argv, *common], work / f"demo-{argv[0]}-{cap}.log"
            )
            if rec["rc"]:
                return out
        out[cap] = json.loads((folder / "submissions/valid_lgbm.json").read_text())["scores"]
    return out


def features_lgbm_default(a: argparse.Namespace, collections: list[str]) -> int:
    """`features` + `train --model lgbm` at the DEFAULT config on these collections, measured per
    collection; the five-collection total is PROJECTED (labelled) from the seconds per train row
    of the layout collections measured, for the layout collections not measured."""
    out = a.work / "lgbm-default"
    common = ["--data-dir", str(a.data), "--out-dir", str(out), "--work-dir", str(out)]
    run_measured(
        "prepare",
        ["prepare", "--no-progress", "--collections", *collections, *common],
        a.work / "ld-prepare.log",
    )
    per: dict = {}
    for c in collections:
        f = run_measured(
            f"features {c}", ["features", "--collections", c, *common], a.work / f"ld-features-{c}.log"
        )
        t = run_measured(
            f"train lgbm {c}",
            ["train", "--model", "lgbm", "--collections", c, *common],
            a.work / f"ld-lgbm-{c}.log",
        )
        meta = Paths(a.data, out, out).tabular / collection_dir(c) / "train.json"
        rows = json.loads(meta.read_text())["rows"] if meta.exists() else 0
        per[c] = {"features": f, "train_lgbm": t, "train_rows": rows, "seconds": f["seconds"] + t["seconds"]}
    measured = sum(v["seconds"] for v in per.values())
    layout = [v for c, v in per.items() if c.startswith("layout")]
    rate = sum(v["seconds"] for v in layout) / max(1, sum(v["train_rows"] for v in layout))  # s per train row
    # unmeasured layout collections: their train graphs x the default cap (1000 rows each, the upper bound)
    from tpurank.synth.scales import REAL_COUNTS

    cap = Config().features.max_configs_per_graph
    rest = {c: REAL_COUNTS[c][0] * cap for c in COLLECTIONS if c not in per and c.startswith("layout")}
    projected = measured + rate * sum(rest.values())
    print(f"measured: {measured / 60:.1f} min for {', '.join(per)}")
    print(f"PROJECTION for all five: {projected / 60:.1f} min ({rate * 1000:.2f} s per 1000 layout train rows, "
          f"{', '.join(f'{c} <= {n} rows' for c, n in rest.items())})")  # fmt: skip
    ok = projected <= MAX_FEATURES_LGBM_MIN * 60
    print(f"[{'PASS' if ok else 'FAIL'}] features + train lgbm, default config, all five <= 60 min "
          f"({'projected' if rest else 'measured'}): {projected / 60:.1f} min")  # fmt: skip
    result = {"per_collection": per, "measured_seconds": measured, "projected_seconds_all_five": projected,
              "projection_rows": rest, "seconds_per_layout_row": rate, "pass": ok}  # fmt: skip
    (ROOT / "bench" / "results" / "scale_lgbm_default.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def prepare_only(a: argparse.Namespace, collections: list[str]) -> int:
    """prepare (default jobs, fresh output) between two decompression passes of the same files."""
    files = [gf.path for gf in discover(a.data / "npz_all/npz", collections)]
    jobs = min(os.cpu_count() or 1, 2)
    before = decompress_all(files, jobs)
    print(f"  decompress all (before)      {before['seconds']:>8.1f} s", flush=True)
    out = a.work / "prepare-only"
    if out.exists():
        import shutil

        shutil.rmtree(out)
    argv = [
        "prepare",
        "--no-progress",
        "--data-dir",
        str(a.data),
        "--out-dir",
        str(out),
        "--collections",
        *collections,
    ]
    rec = run_measured("prepare", argv, a.work / "prepare-only.log")
    after = decompress_all(files, jobs)
    print(f"  decompress all (after)       {after['seconds']:>8.1f} s", flush=True)
    ratio = rec["seconds"] / ((before["seconds"] + after["seconds"]) / 2)
    cache = folder_bytes(out / "features/prepared")
    npz = sum(f.stat().st_size for f in files)
    print(
        f"[{'PASS' if ratio <= MAX_PREPARE_VS_DECOMPRESS else 'FAIL'}] prepare <= 2x decompressing every array once: {ratio:.2f}x"
    )
    print(
        f"[{'PASS' if cache <= MAX_CACHE_RATIO * npz else 'FAIL'}] cache <= 1.5x npz: {cache / npz:.3f}x ({cache / GB:.3f} of {npz / GB:.2f} GB)"
    )
    result = {"collections": collections, "decompress": [before, after], "prepare": rec, "ratio": ratio,
              "cache_bytes": cache, "npz_bytes": npz}  # fmt: skip
    (ROOT / "bench" / "results" / "scale_prepare.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def main() -> int:
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
    a = p.parse_args()
    collections = [c for c in COLLECTIONS if c in a.collections]
    a.work.mkdir(parents=True, exist_ok=True)
    if a.prepare_only:
        return prepare_only(a, collections)
    if a.features_lgbm_default:
        return features_lgbm_default(a, collections)
    if a.gnn_slice_only:  # needs a prepared cache in <work>/work (a whole run's)
        sliced = gnn_slice(a, collections, a.gnn_steps)
        for c, g in sliced.items():
            ok = g["peak_rss"] <= MAX_GNN_RSS
            print(f"[{'PASS' if ok else 'FAIL'}] GNN training, default config, {c} <= 4 GB peak RSS: "
                  f"{g['peak_rss'] / GB:.2f} GB")  # fmt: skip
        a.out.write_text(json.dumps({"collections": collections, "gnn_slice": sliced}, indent=2) + "\n")
        return 0
    if a.demo_cap:
        caps = [Config().features.max_configs_per_graph, load_config(a.config).features.max_configs_per_graph]
        scores = demo_cap_check(a.work, sorted(set(caps), reverse=True))
        print(pd.DataFrame(scores).round(4).to_string())
        ok = all(
            scores[caps[0]][c] >= scores[0][c] - 0.01
            for c in scores[0]
            if c.startswith("layout") and c in scores[caps[0]]
        )
        print(
            f"[{'PASS' if ok else 'FAIL'}] the default cap ({caps[0]}) loses at most 0.01 tau on every layout collection"
        )
        out = ROOT / "bench" / "results" / "scale_demo_cap.json"
        out.write_text(json.dumps({"scores": scores, "default_cap": caps[0], "pass": ok}, indent=2) + "\n")
        return 0
    results: dict = {"collections": collections, "config": str(a.config), "cpus": os.cpu_count(),
                     "memory_gb": round(psutil.virtual_memory().total / GB, 1), "stages": []}  # fmt: skip

    if not (a.data / "npz_all/npz").is_dir() or any(
        not (a.data / "npz_all/npz" / collection_dir(c)).is_dir() for c in collections
    ):
        print(f"generating the full-scale synthetic dataset in {a.data} ...", flush=True)
        gen = run_measured("synth --scale full", ["synth", "--scale", "full", "--out", str(a.data),
                           "--jobs", str(a.jobs), "--collections", *collections], a.work / "synth.log")  # fmt: skip
        results["generate"] = gen
    files = [gf.path for gf in discover(a.data / "npz_all/npz", collections)]
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
    steps = plan(a.models, 0, collections)
    print(
        f"the steps of `all --collections {' '.join(collections)} --models {' '.join(a.models)}`:", flush=True
    )
    t_all = time.perf_counter()
    for step in steps:
        log = a.work / f"{step.name.replace(' ', '_')}.log"
        rec = run_measured(
            step.name, [*command_argv(step.options), *common], log
        )  # the step's options, then the run's
        results["stages"].append(rec)
        if rec["rc"] != 0:
            break
    results["all_seconds"] = round(time.perf_counter() - t_all, 1)
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
        ["check-submission", str(out / "submissions/test_ensemble.csv"), "--partial", *common[:2]]
    )
    results["submission_valid"] = check == 0

    report(results, collections)
    a.out.write_text(json.dumps(results, indent=2, default=float) + "\n")
    print(f"\nsaved {a.out}")
    return 0


def report(r: dict, collections: list[str]) -> None:
    by = {s["stage"]: s for s in r["stages"]}
    targets: list[tuple[str, str, bool]] = []
    ratio = r["cache"]["ratio"]
    targets.append(("cache <= 1.5x npz (full synthetic)", f"{ratio:.3f}x", ratio <= MAX_CACHE_RATIO))
    if r.get("real_sample_cache"):
        rr = r["real_sample_cache"]["ratio"]
        targets.append(("cache <= 1.5x npz (real sample files)", f"{rr:.3f}x", rr <= MAX_CACHE_RATIO))
    worst = max(r["stages"], key=lambda s: s["peak_rss"])
    targets.append((f"every stage <= 12 GB peak RSS (max: {worst['stage']})", f"{worst['peak_rss'] / GB:.2f} GB",
                    worst["peak_rss"] <= MAX_STAGE_RSS))  # fmt: skip
    for c, g in r.get("gnn_slice", {}).items():
        targets.append((f"GNN training, default config, {c} <= 4 GB peak RSS", f"{g['peak_rss'] / GB:.2f} GB",
                        g["peak_rss"] <= MAX_GNN_RSS))  # fmt: skip
    if "prepare" in by:
        x = by["prepare"]["seconds"] / max(1e-9, r["decompress"]["seconds"])
        targets.append(
            ("prepare <= 2x decompressing every array once", f"{x:.2f}x", x <= MAX_PREPARE_VS_DECOMPRESS)
        )
    fl = sum(by[s]["seconds"] for s in ("features", "train lgbm") if s in by) / 60
    label = "features + train lgbm <= 60 min" + (
        "" if len(collections) == 5 else f" (measured on {len(collections)} collections)"
    )
    targets.append((label, f"{fl:.1f} min", fl <= MAX_FEATURES_LGBM_MIN))
    minutes = r["all_seconds"] / 60
    if collections == ["tile:xla", "layout:xla:random"]:
        ok = minutes <= MAX_PARTIAL_ALL_MIN and r.get("submission_valid", False)
        targets.append(("all --collections tile:xla layout:xla:random, CPU budget: <= 60 min, valid CSV",
                        f"{minutes:.1f} min", ok))  # fmt: skip
    print("\ntargets (2 cores, measured in this run):")
    for name, value, ok in targets:
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {value}")
    r["targets"] = [{"target": n, "measured": v, "pass": ok} for n, v, ok in targets]
    print("\nGNN and baseline under the budget config:")
    for name, g in r["gnn_budget"].items():
        print(
            f"  {name}: {g['steps_run']} steps in {g['seconds']:.0f} s ({g['stopped_by']}), "
            f"{g['configs_per_s']} configs/s, best valid {g['best_valid_score']:.4f}"
        )
    print(
        "GNN at the default config: measured slice, and a PROJECTION of the default max_steps at that rate:"
    )
    for c, g in r.get("gnn_slice", {}).items():
        if "projection_hours" in g:
            print(
                f"  {c}: {g['configs_per_s']:.0f} configs/s, {g['seconds_per_step']:.2f} s/step, "
                f"{g['seconds_per_validation']:.0f} s/validation; PROJECTION for {g['projection_default_max_steps']} "
                f"steps: {g['projection_hours']:.1f} h on this CPU"
            )
    hours = sum(g.get("projection_hours", 0) for g in r.get("gnn_slice", {}).values())
    r["gnn_projection_hours"] = hours
    print(f"  PROJECTION, these {len(r.get('gnn_slice', {}))} collections: {hours:.1f} h")


if __name__ == "__main__":
    raise SystemExit(main())
