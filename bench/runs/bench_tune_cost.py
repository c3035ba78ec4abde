"""The cost of calibrating: `rank --measured` on a ~2,000-config program with the `cpu` profile's
models, wall time and peak memory (target: <= 30 s and <= 2 GB on 2 cores).

The models are the `cpu` profile's (LightGBM of its 300 rounds, kept whole: no early stopping; the
GNN of its width and 3 seeds, trained only a few steps: ranking costs the same after 20 steps as
after 4,000), trained on the real layout graph `unet3d`, unless `--models` names a trained out
folder. Calibration's cost grows with the training rows shipped with the model, so they are padded
to their bound (`--training-rows`, default tpurank.lgbm.training_rows.MAX_ROWS, rows drawn again
from the real ones): the worst a model of any training set ships. The program is the real
`unet_3d.4x4.bf16` (1965 configs) unless `--program`; `--k` of its configs are measured.

Each command runs in a fresh process: `rank` without `--measured`, with it (the calibration
checked on held-out folds of the measured configs, the default) and with `--measured --no-select`
(the calibrated models used whole, without the check). With `--against REV` the same commands run
from a clean clone at REV too, in alternating pairs on the same models, and the ratios HEAD / REV
per pair say what changed, whatever the machine's speed that day. The seconds mean something only
on an idle machine.

    .venv/bin/python bench/runs/bench_tune_cost.py                      # trains into /tmp/bench-tune-cost
    .venv/bin/python bench/runs/bench_tune_cost.py --models OUT --work-dir WORK --against 502765c --pairs 3
    .venv/bin/python bench/runs/bench_tune_cost.py --models OUT --work-dir WORK --program prog.pb --k 100
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import provenance  # noqa: E402
import real_data as rd  # noqa: E402
from checkouts import checkout_at, commit_of  # noqa: E402

from tpurank.core.paths import NPZ_SUBDIR  # noqa: E402
from tpurank.lgbm import training_rows  # noqa: E402
from tpurank.rank.candidates import read_candidates  # noqa: E402

TARGET_S, TARGET_GB = 30.0, 2.0
COLLECTION = rd.LAYOUT
RUNS = ("rank", "rank --measured", "rank --measured --no-select")


def train(work: Path, log: Path) -> tuple[Path, Path]:
    """The cpu profile's models of the real layout pair (out folder, work folder of its cache)."""
    root = rd.layout_root(work / "data")
    out, cache = work / "out", work / "work"
    sets = [
        "lgbm.early_stopping_rounds=300",
        "gnn.max_steps=20",
        "gnn.eval_every=20",
        "gnn.time_budget_min=0",
    ]
    common = ["--data-dir", str(root), "--out-dir", str(out), "--work-dir", str(cache), "--profile", "cpu"]
    common += [x for s in sets for x in ("--set", s)]
    only = ["--collections", COLLECTION]
    rd.stage(["prepare", "--no-progress", *only, *common], log)
    rd.stage(["features", *only, *common], log)
    for m in ("lgbm", "gnn"):
        rd.stage(["train", "--model", m, *only, *common], log)
        rd.stage(["predict", "--model", m, "--split", "valid", "--partial", *only, *common], log)
    rd.stage(["train", "--model", "ensemble", *only, *common], log)
    return out, cache


def pad_training_rows(models: Path, rows: int, seed: int = 0) -> int:
    """Grow the shipped training rows to `rows` (drawn again from the real ones, in queries of the
    same sizes): calibration's worst case. Returns the rows kept."""
    path = models / "models" / "lgbm" / COLLECTION.replace(":", "-") / training_rows.TRAIN_ROWS_FILE
    kept = training_rows.load(path)
    if kept is None:
        raise SystemExit(f"{path}: absent; train lgbm again")
    rng = np.random.default_rng(seed)
    take = rng.choice(kept.rows, size=rows, replace=True)
    size = int(np.median(kept.sizes))
    sizes = np.full(rows // size, size)
    sizes[-1] += rows - int(sizes.sum())
    padded = training_rows.TrainingRows(
        kept.x[take], kept.runtime[take], sizes.astype(np.int64), kept.features
    )
    training_rows.save(path, padded)
    return padded.rows


def measured_csv(program: Path, k: int, path: Path, seed: int = 0) -> int:
    """k of the program's measured configs as `rank --measured` reads them; returns its configs."""
    c = read_candidates(program)[0]
    known = np.flatnonzero(c.runtime > 0)
    picked = np.sort(np.random.default_rng(seed).choice(known, size=min(k, len(known)), replace=False))
    path.write_text("config,runtime_ns\n" + "".join(f"{c.file_index[i]},{c.runtime[i]}\n" for i in picked))
    return len(c.file_index)


def time_runs(
    argv: list[str], work: Path, log: Path, checkout: Path, side: str
) -> dict[str, dict[str, float]]:
    """`rank` without `--measured`, with it, and with it and `--no-select`, each a fresh process of
    `checkout`'s code: seconds and peak RSS."""
    measured = ["--measured", str(work / "measured.csv")]
    extras = {RUNS[0]: [], RUNS[1]: measured, RUNS[2]: [*measured, "--no-select"]}
    res = {}
    for name, extra in extras.items():
        out = ["--out", str(work / "ranking.csv")]
        seconds, gb = rd.measured_stage([*argv, *extra, *out], log, checkout)
        res[name] = {"seconds": round(seconds, 2), "peak_rss_gb": round(gb, 3)}
        print(f"{side} {name}: {seconds:.1f} s, peak RSS {gb:.2f} GB", flush=True)
    return res


def paired(argv: list[str], work: Path, log: Path, checkouts: dict[str, Path], pairs: int) -> dict:
    """Each side's runs, `pairs` times in turn (HEAD first in odd pairs), and per run the median of
    each side's seconds and peak RSS and the ratios HEAD / the other side pair by pair."""
    runs: dict[str, list[dict]] = {side: [] for side in checkouts}
    for pair in range(pairs):
        order = list(checkouts) if pair % 2 == 0 else list(reversed(checkouts))
        for side in order:
            runs[side].append(time_runs(argv, work, log, checkouts[side], side))
    res: dict = {}
    for side, rows in runs.items():
        res[side] = {
            name: {
                "seconds": round(statistics.median(r[name]["seconds"] for r in rows), 2),
                "peak_rss_gb": round(max(r[name]["peak_rss_gb"] for r in rows), 3),
                "runs": [r[name]["seconds"] for r in rows],
            }
            for name in RUNS
        }
    if "against" in runs:
        res["ratio"] = {
            name: [
                round(h[name]["seconds"] / a[name]["seconds"], 3)
                for h, a in zip(runs["head"], runs["against"], strict=True)
            ]
            for name in RUNS
        }
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", type=Path, help="a cpu-profile out folder (default: trained into --work)")
    p.add_argument("--work-dir", type=Path, help="the prepared cache --models was trained with, when apart")
    p.add_argument(
        "--program", type=Path, help="the program (default: the real unet_3d.4x4.bf16, 1965 configs)"
    )
    p.add_argument("--collection", default=COLLECTION, help=f"whose models rank it (default {COLLECTION})")
    p.add_argument("--k", type=int, default=100, help="measured configs (default 100)")
    p.add_argument(
        "--training-rows", type=int, default=training_rows.MAX_ROWS, help="shipped rows, padded to"
    )
    p.add_argument("--against", help="an earlier commit whose code runs the same commands, in turn")
    p.add_argument("--pairs", type=int, default=3, help="runs of each side (default 3)")
    p.add_argument("--work", type=Path, default=Path("/tmp/bench-tune-cost"))
    p.add_argument("--out", type=Path, help="the figures as JSON")
    a = p.parse_args()
    if a.models is None and (reason := rd.missing_sample(rd.SHARED)):
        print(f"bench_tune_cost: skipped: {reason}")
        return 0
    shutil.rmtree(a.work, ignore_errors=True)
    a.work.mkdir(parents=True)
    log = a.work / "cost.log"
    if a.models is None:
        a.models, a.work_dir = train(a.work / "models", log)
    else:  # a copy: padding the training rows must not touch the user's models
        shutil.copytree(a.models / "models", a.work / "copy" / "models")
        if (a.models / "features" / "prepared").is_dir():  # the node-feature rule, beside the models
            shutil.copytree(a.models / "features" / "prepared", a.work / "copy" / "features" / "prepared")
        a.models = a.work / "copy"
    padded = pad_training_rows(a.models, a.training_rows)
    program = a.program or rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_SCORED
    configs = measured_csv(program, a.k, a.work / "measured.csv")
    argv = ["rank", str(program), "--models", str(a.models), "--collection", a.collection]
    argv += ["--work-dir", str(a.work_dir)] if a.work_dir else []
    res = {
        "program": str(program),
        "configs": configs,
        "k": a.k,
        "training_rows": padded,
        "load": os.getloadavg()[0],
    }
    with tempfile.TemporaryDirectory(prefix="bench-tune-cost-") as tmp:
        checkouts = {"head": ROOT}
        if a.against:
            res["against"] = commit_of(a.against)
            checkouts["against"] = checkout_at(res["against"], Path(tmp) / "against")
        timed = paired(argv, a.work, log, checkouts, a.pairs)
    res |= timed.pop("head")
    res |= {f"against {name}": v for name, v in timed.pop("against", {}).items()}
    res |= timed
    report(res, a.k, configs, padded)
    if a.out:
        res["provenance"] = provenance.stamp()
        a.out.write_text(json.dumps(res, indent=1) + "\n")
    return 0


def report(res: dict, k: int, configs: int, padded: int) -> None:
    """The target's verdict at HEAD, and the ratios against the earlier commit."""
    cal = res[RUNS[1]]
    met = cal["seconds"] <= TARGET_S and cal["peak_rss_gb"] <= TARGET_GB
    print(
        f"calibrating on {k} and ranking {configs} configs ({padded} training rows): {cal['seconds']:.1f} s, "
        f"{cal['peak_rss_gb']:.2f} GB; target <= {TARGET_S:.0f} s and <= {TARGET_GB:.0f} GB: {'met' if met else 'NOT met'} "
        f"(load average {res['load']:.1f}: seconds hold on an idle machine only)"
    )
    for name, ratios in res.get("ratio", {}).items():
        print(f"{name}: HEAD / {res['against'][:10]} per pair {ratios}")


if __name__ == "__main__":
    raise SystemExit(main())
