"""The partial modes of bench_scale.py, each into its own results file (`--prepare-only`,
`--features-lgbm-default`, `--gnn-slice-only`, `--demo-cap`), and the default-config GNN slice that
a whole run measures too."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

import pandas as pd
import provenance
from scale_measure import GB, ROOT, decompress_all, folder_bytes, run_measured
from scale_report import MAX_CACHE_RATIO, MAX_FEATURES_LGBM_MIN, MAX_GNN_RSS, MAX_PREPARE_VS_DECOMPRESS

from tpurank.core.collections import COLLECTIONS, collection_dir
from tpurank.core.config import Config
from tpurank.core.config_files import load_config
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.dataset import discover


def gnn_slice(a: argparse.Namespace, collections: list[str], steps: int) -> dict:
    """Train the GNN with the DEFAULT config for `steps` steps on each layout collection and
    tile, measured (peak RSS is the 4 GB target), and PROJECT the default max_steps from the rate."""
    out: dict = {}
    defaults = Config()
    work = a.work / "slice"
    for c in collections:
        argv = [
            "train",
            "--model",
            "gnn",
            "--collections",
            c,
            "--data-dir",
            str(a.data),
            "--out-dir",
            str(work),
            "--work-dir",
            str(a.work / "work"),
            "--set",
            f"gnn.max_steps={steps}",
            "--set",
            f"gnn.eval_every={steps}",
        ]
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


def gnn_slice_only(a: argparse.Namespace, collections: list[str]) -> int:
    """The GNN slice alone, on a whole run's prepared cache (<work>/work): the 4 GB target in minutes."""
    sliced = gnn_slice(a, collections, a.gnn_steps)
    for c, g in sliced.items():
        ok = g["peak_rss"] <= MAX_GNN_RSS
        print(
            f"[{'PASS' if ok else 'FAIL'}] GNN training, default config, {c} <= 4 GB peak RSS: "
            f"{g['peak_rss'] / GB:.2f} GB"
        )
    result = {"collections": collections, "gnn_slice": sliced, "provenance": provenance.stamp()}
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


def demo_cap_check(work: Path, caps: list[int]) -> dict:
    """LightGBM's valid scores on demo with each feature cap, side by side with no cap (0), the way
    `all` trains it (features, train lgbm, predict lgbm valid); the target: the default
    cap loses at most 0.01 tau on every layout collection."""
    demo = ROOT / "data" / "synthetic-demo"
    if not (demo / NPZ_SUBDIR).is_dir():
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


def demo_cap_only(a: argparse.Namespace) -> int:
    """The feature caps (the default's and --config's) against none on demo: a cap may cost <= 0.01 tau."""
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
    result = {"scores": scores, "default_cap": caps[0], "pass": ok, "provenance": provenance.stamp()}
    out.write_text(json.dumps(result, indent=2) + "\n")
    return 0


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
    print(
        f"PROJECTION for all five: {projected / 60:.1f} min ({rate * 1000:.2f} s per 1000 layout train rows, "
        f"{', '.join(f'{c} <= {n} rows' for c, n in rest.items())})"
    )
    ok = projected <= MAX_FEATURES_LGBM_MIN * 60
    print(
        f"[{'PASS' if ok else 'FAIL'}] features + train lgbm, default config, all five <= 60 min "
        f"({'projected' if rest else 'measured'}): {projected / 60:.1f} min"
    )
    result = {
        "per_collection": per,
        "measured_seconds": measured,
        "projected_seconds_all_five": projected,
        "projection_rows": rest,
        "seconds_per_layout_row": rate,
        "pass": ok,
    }
    result["provenance"] = provenance.stamp()
    (ROOT / "bench" / "results" / "scale_lgbm_default.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


def prepare_only(a: argparse.Namespace, collections: list[str]) -> int:
    """prepare (default jobs, fresh output) between two decompression passes of the same files."""
    files = [gf.path for gf in discover(a.data / NPZ_SUBDIR, collections)]
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
    result = {
        "collections": collections,
        "decompress": [before, after],
        "prepare": rec,
        "ratio": ratio,
        "cache_bytes": cache,
        "npz_bytes": npz,
    }
    result["provenance"] = provenance.stamp()
    (ROOT / "bench" / "results" / "scale_prepare.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0
