"""Benchmark the LightGBM rankers on a (synthetic) dataset: speed, memory and validation quality.

Reports, per collection: feature-building throughput, training and prediction wall time and peak
memory (each step runs in a fresh process, so its peak RSS is its own; an idle process that only
imports tpurank is reported for reference), and the validation score of lgbm next to the random
and heuristic baselines (every original config scored with its own measured runtime from the raw
files, as the validation report does). Targets: lgbm beats both baselines everywhere,
tile >= 0.90.

`--out FILE` saves the table, the targets' verdict, the idle process's peak and the whole run's
seconds with their provenance (bench/lib/provenance.py), for docs/models.md to quote.

    python -m tpurank synth --scale demo --out data/synthetic-demo
    .venv/bin/python bench/runs/bench_lgbm.py --data-dir data/synthetic-demo --out-dir /tmp/bench-lgbm
    .venv/bin/python bench/runs/bench_lgbm.py --set lgbm.threads=1 --out bench/results/lgbm_demo.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402  its clock and load averages start here, with the run

TILE_TARGET = 0.90  # the tile score lgbm must reach on the demo data


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # Linux reports KiB


def _step(step: str, data: str, out: str, overrides: list[str], collection: str, queue: mp.Queue) -> None:
    """One measured step in a fresh process; puts (seconds, peak MB, result) on the queue."""
    from tpurank.core.config_files import load_config
    from tpurank.core.paths import Paths

    paths, cfg = Paths.resolve(data, out), load_config(None, overrides)
    start = time.perf_counter()
    result: object = None
    if step == "features":
        from tpurank.features.stage import build_features

        result = build_features(paths, cfg, [collection], ["train", "valid", "test"], force=True)
    elif step == "train":
        from tpurank.lgbm import model

        model.train(paths, cfg.for_collection(collection), collection)
        result = json.loads((paths.model_dir("lgbm", collection) / "provenance.json").read_text())
    elif step == "predict":
        from tpurank.lgbm import model

        result = model.predict(paths, cfg.for_collection(collection), collection, "valid")
    queue.put((time.perf_counter() - start, _peak_mb(), result))


def measure(step: str, args: argparse.Namespace, collection: str = "") -> tuple[float, float, object]:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_step, args=(step, args.data_dir, args.out_dir, args.set, collection, queue))
    proc.start()
    result = queue.get()
    proc.join()
    if proc.exitcode != 0:
        sys.exit(f"bench: step {step} {collection} failed")
    return result


def idle_mb() -> float:
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    proc = ctx.Process(target=_idle, args=(queue,))
    proc.start()
    mb = queue.get()
    proc.join()
    return mb


def _idle(queue: mp.Queue) -> None:
    import lightgbm  # noqa: F401
    import pandas  # noqa: F401

    import tpurank.lgbm.model  # noqa: F401

    queue.put(_peak_mb())


def parse_args() -> argparse.Namespace:
    """The options, parsed before tpurank is imported: `--help` stays fast."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", default="data/synthetic-demo")
    parser.add_argument(
        "--out-dir", help="where the cache, tables and models go (default: a new temp folder)"
    )
    parser.add_argument("--collections", nargs="+", help="default: every collection in the dataset")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    parser.add_argument("--out", type=Path, help="save the results here (JSON, with their provenance)")
    return parser.parse_args()


def collection_row(args: argparse.Namespace, paths: Any, cfg: Any, c: str) -> dict[str, Any]:
    """One collection's row: its features, training and prediction each measured in a fresh process,
    then lgbm, `heuristic` and `random` scored on its valid graphs."""
    from tpurank.core.metrics import graph_metrics, mean_score, order_from_costs
    from tpurank.data.dataset import discover
    from tpurank.models.registry import get_model
    from tpurank.submission.score import load_runtimes

    f_s, _, summaries = measure("features", args, c)
    t_s, t_mb, info = measure("train", args, c)
    p_s, p_mb, costs = measure("predict", args, c)
    truth = {gf.id: load_runtimes(gf.path, c) for gf in discover(paths.npz, [c], ["valid"])}

    def score(pred: dict) -> float:
        return mean_score(
            graph_metrics(c, order_from_costs(pred[g]), rt)["score"] for g, rt in truth.items()
        )[0]

    base = {m: score(get_model(m).predict(paths, cfg, c, "valid")) for m in ("heuristic", "random")}
    return {
        "collection": c,
        "graphs": sum(s["graphs"] for s in summaries.values()),
        "rows": sum(s["rows"] for s in summaries.values()),
        "features_s": round(f_s, 2),
        "train_s": round(t_s, 2),
        "train_mb": round(t_mb),
        "rounds": info["best_iteration"],
        "predict_s": round(p_s, 2),
        "predict_mb": round(p_mb),
        "lgbm": round(score(costs), 4),
        **{m: round(v, 4) for m, v in base.items()},
    }


def main() -> int:
    """Prepare once, then per collection each step in a fresh process, and the targets' verdict."""
    args = parse_args()
    started = time.perf_counter()
    args.out_dir = args.out_dir or tempfile.mkdtemp(prefix="bench-lgbm-")

    from tpurank.core.collections import COLLECTIONS
    from tpurank.core.config_files import load_config
    from tpurank.core.paths import Paths
    from tpurank.prepare.cache import INDEX_FILE, read_index
    from tpurank.prepare.stage import prepare_dataset

    paths, cfg = Paths.resolve(args.data_dir, args.out_dir), load_config(None, args.set)
    if not (paths.prepared / INDEX_FILE).exists():
        t = time.perf_counter()
        prepare_dataset(paths, cfg, jobs=0, progress=False)
        print(f"prepared {paths.data} in {time.perf_counter() - t:.1f}s")
    present = set(read_index(paths.prepared)["collection"])
    collections = [c for c in (args.collections or COLLECTIONS) if c in present]

    idle = idle_mb()
    print(f"data: {paths.data}; out: {paths.out}; idle process (imports only): {idle:.0f} MB peak RSS\n")
    print(
        "| collection | graphs | rows | features s | rows/s | train s | train MB | rounds | predict s "
        "| predict MB | lgbm | heuristic | random |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    rows: list[dict[str, Any]] = []
    for c in collections:
        r = collection_row(args, paths, cfg, c)
        rows.append(r)
        ok &= r["lgbm"] > max(r["heuristic"], r["random"]) and (
            not c.startswith("tile") or r["lgbm"] >= TILE_TARGET
        )
        print(
            f"| {c} | {r['graphs']} | {r['rows']} | {r['features_s']:.1f} | {r['rows'] / r['features_s']:.0f} | "
            f"{r['train_s']:.1f} | {r['train_mb']} | {r['rounds']} | {r['predict_s']:.2f} | {r['predict_mb']} | "
            f"{r['lgbm']:.4f} | {r['heuristic']:.4f} | {r['random']:.4f} |",
            flush=True,
        )
    print(
        f"\ntargets (lgbm beats both baselines everywhere, tile >= {TILE_TARGET}): {'met' if ok else 'NOT met'}"
    )
    if args.out:
        results = {
            "provenance": provenance.stamp(),
            "data": str(paths.data),
            "set": args.set,
            "idle_import_mb": round(idle),
            "rows": rows,
            "targets_met": ok,
            "total_s": round(time.perf_counter() - started, 1),
        }
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
