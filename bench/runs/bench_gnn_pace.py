"""The GNN's pace against the machine's: achieved GFLOP/s of scoring and training, side by side with an earlier commit.

What a profiler would measure, in one run, on the `cpu` profile's GNN (layout:xla:default's settings,
an untrained network seeded alike in both checkouts, 2 threads):
- the limit: a 2048x2048 FP32 matmul in torch (2 threads and 1), and one of the model's own shape
  (configs x nodes of a pass, hidden) @ (hidden, hidden);
- scoring: `gnn.scoring.score_rows` of `--configs` candidate configs of the real sample's valid
  layout graph (223 nodes, 62 configurable after `prepare`), the candidates drawn per configurable
  node from the graph's real configs (the same seed, so the same candidates in both checkouts),
  `predict_chunk` configs a pass, as `rank` and `predict` score; with `--lanes N`, N passes side by
  side where the checkout runs passes so (`predict` runs a model trained on one thread, as on small
  data, with `--threads 1 --lanes 2` on 2 cores);
- training: `--steps` optimizer steps of the training loop's own `step_once` (sampling,
  micro-batches, the step, the loop's heap trim) on the sample's layout:xla:default train graph,
  timed after one warm-up step.
For each: configs/s, GFLOP/s from the project's FLOP counter (`torch.utils.flop_counter`, as
bench_gpu_projection.py counts a step: the dense matrix products, not message passing's sums, whether
scatter/gather or sparse products (bench/lib/flop_count.py); counted at `--against` and used for both
sides, since both compute the same maths), its share of
the matmul peak, user and sys CPU seconds of the timed part, and the process's peak RSS. Each
measurement runs in a fresh process with the CLI's memory settings (huge pages asked for before
torch's first allocation, `setup_runtime`'s heap bound). HEAD and `--against` (a clean clone of the
checkout at that revision, this checkout's `.venv` when the requirements are the same) run in
alternating pairs (HEAD first in odd pairs, second in even ones) and the ratios are per pair.

    .venv/bin/python bench/runs/bench_gnn_pace.py --against 923756c [--pairs 3] [--configs 10000] \\
        [--steps 200] [--out bench/results/gnn_pace.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import pace_worker  # noqa: E402
from checkouts import checkout_at, commit_of  # noqa: E402
from pace_worker import PEAK_SIZE, SAMPLE, THREADS  # noqa: E402


def worker(args: argparse.Namespace) -> None:
    """One measurement (`--worker score|train|peak`), printed as one JSON line."""
    if args.worker == "peak":
        print(json.dumps(pace_worker.worker_peak()))
        return
    env = pace_worker.setup(args.checkout, args.work, args.threads)
    score, train = pace_worker.worker_score, pace_worker.worker_train
    out = score(env, args.configs, args.lanes) if args.worker == "score" else train(env, args.steps)
    print(json.dumps(out))


# --- the driver: checkouts, alternating pairs, the report -----------------------------------------


def prepare(checkout: Path, work: Path) -> None:
    """`tpurank prepare` of the sample with the checkout's own code (its cache format)."""
    cmd = [str(checkout / ".venv" / "bin" / "python"), "-m", "tpurank", "prepare", "--data-dir", str(SAMPLE)]
    cmd += ["--out-dir", str(work), "--work-dir", str(work)]
    env = {**os.environ, "PYTHONPATH": str(checkout / "src")}
    r = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"bench_gnn_pace: prepare at {checkout} failed: {r.stderr.strip()[-300:]}")


def run_worker(checkout: Path, work: Path, what: str, args: argparse.Namespace) -> dict:
    """One fresh process of this script measuring `what` with `checkout`'s code."""
    cmd = [str(checkout / ".venv" / "bin" / "python"), str(Path(__file__).resolve()), "--worker", what]
    cmd += ["--checkout", str(checkout), "--work", str(work), "--configs", str(args.configs)]
    cmd += ["--steps", str(args.steps), "--threads", str(args.threads), "--lanes", str(args.lanes)]
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "MALLOC_MMAP_THRESHOLD_")}
    r = subprocess.run(cmd, cwd=checkout, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise SystemExit(f"bench_gnn_pace: {what} at {checkout} failed: {r.stderr.strip()[-800:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def rates(m: dict, flops_per_config: float, peak: float) -> dict:
    """configs/s, GFLOP/s (the reference FLOP count) and its share of the matmul peak."""
    per_s = m["configs"] / m["seconds"]
    gflops = per_s * flops_per_config / 1e9
    out = {
        "configs_per_s": round(per_s, 1),
        "gflops": round(gflops, 2),
        "share_of_peak": round(gflops / peak, 4),
        "sys_over_user": round(m["sys_s"] / max(m["user_s"], 1e-9), 3),
    }
    if "steps" in m:
        out["steps_per_s"] = round(m["steps"] / m["seconds"], 2)
    return out


def kendall(a: list[float], b: list[float]) -> float:
    """Kendall's tau between two score lists (the orders the two checkouts give the candidates)."""
    from scipy.stats import kendalltau

    return float(kendalltau(a, b).statistic)


def measure_pairs(checkouts: dict[str, Path], works: dict[str, Path], args: argparse.Namespace) -> dict:
    """Scoring, then training: `--pairs` pairs of fresh processes, HEAD first in odd pairs."""
    whats = (args.only,) if args.only else ("score", "train")
    runs: dict[str, dict[str, list[dict]]] = {w: {n: [] for n in checkouts} for w in whats}
    for what in whats:
        for pair in range(args.pairs):
            order = list(checkouts) if pair % 2 == 0 else list(reversed(checkouts))
            for name in order:
                m = run_worker(checkouts[name], works[name], what, args)
                runs[what][name].append(m)
                print(
                    f"{what} pair {pair + 1} {name}: {m['seconds']:.2f} s, user {m['user_s']:.1f} s, "
                    f"sys {m['sys_s']:.1f} s, peak RSS {m['peak_rss_gb']:.2f} GB",
                    flush=True,
                )
    return runs


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--against", default="923756c", help="the earlier commit (any git revision)")
    p.add_argument("--pairs", type=int, default=3, help="HEAD/REV pairs of each measurement (default 3)")
    p.add_argument("--configs", type=int, default=10_000, help="candidate configs scored (default 10,000)")
    p.add_argument("--steps", type=int, default=200, help="training steps timed (default 200)")
    p.add_argument("--threads", type=int, default=THREADS, help=f"torch threads (default {THREADS})")
    p.add_argument(
        "--lanes",
        type=int,
        default=1,
        help="scoring passes side by side where the checkout can (predict's: cores over the model's threads)",
    )
    p.add_argument("--only", choices=("score", "train"), help="measure scoring or training alone")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gnn_pace.json")
    p.add_argument("--worker", choices=("score", "train", "peak"), help=argparse.SUPPRESS)
    p.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return 0
    sys.path.insert(0, str(ROOT / "src"))
    from tpurank.core.paths import NPZ_SUBDIR

    if not (SAMPLE / NPZ_SUBDIR).is_dir():
        print(f"bench_gnn_pace: the real sample is not at {SAMPLE}", file=sys.stderr)
        return 1
    import provenance

    against = commit_of(args.against)
    head = provenance.COMMIT_AT_START or "HEAD"
    tmp = Path(tempfile.mkdtemp(prefix="bench-gnn-pace-"))
    try:
        checkouts = {
            "head": checkout_at(head, tmp / "head"),
            "against": checkout_at(against, tmp / "against"),
        }
        works = {name: tmp / f"work-{name}" for name in checkouts}
        for name, c in checkouts.items():
            prepare(c, works[name])
        peak = run_worker(checkouts["head"], works["head"], "peak", args)
        print(
            f"matmul FP32 {PEAK_SIZE}x{PEAK_SIZE}: {peak[f'peak_{THREADS}t']} GFLOP/s on {THREADS} threads, "
            f"{peak['peak_1t']} on 1; the model's shape (57088x32)@(32x32): {peak['model_shape']}",
            flush=True,
        )
        runs = measure_pairs(checkouts, works, args)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = report(runs, peak, against, args)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_suffix(".tmp")
    tmp_out.write_text(json.dumps(results, indent=1) + "\n")
    tmp_out.replace(args.out)
    print(f"wrote {args.out}")
    return 0


def report(runs: dict, peak: dict, against: str, args: argparse.Namespace) -> dict:
    """The results: each run's rates, the per-pair speed-ups, the medians; printed as a table."""
    import provenance

    top = peak[f"peak_{THREADS}t"]
    summary: dict[str, Any] = {}
    for what, by in runs.items():
        flops = by["against"][0]["flops_per_config"]  # the same maths on both sides: counted at --against
        for ms in by.values():
            for m in ms:
                m.update(rates(m, flops, top))
        speedups = [
            round(a["seconds"] / h["seconds"], 3) for h, a in zip(by["head"], by["against"], strict=True)
        ]
        med = {
            name: {
                k: statistics.median(m[k] for m in ms)
                for k in (
                    "configs_per_s",
                    "gflops",
                    "share_of_peak",
                    "user_s",
                    "sys_s",
                    "sys_over_user",
                    "peak_rss_gb",
                )
            }
            for name, ms in by.items()
        }
        summary[what] = {
            "flops_per_config": flops,
            "median": med,
            "speedups": speedups,
            "median_speedup": statistics.median(speedups),
        }
        if what == "score":
            taus = [
                kendall(h.pop("costs"), a.pop("costs"))
                for h, a in zip(by["head"], by["against"], strict=True)
            ]
            summary[what]["kendall_tau_head_vs_against"] = min(taus)
        print_summary(what, med, speedups, against)
    for ms in runs.get("score", {}).values():
        for m in ms:
            m.pop("costs", None)
    return {
        "provenance": provenance.stamp(),
        "what": (
            "the cpu profile's GNN (layout:xla:default) scoring candidates of the real sample's valid layout "
            "graph and training on its train graph, HEAD and an earlier commit in alternating fresh processes"
        ),
        "against": against,
        "threads": args.threads,
        "lanes": args.lanes,
        "matmul_gflops": peak,
        "summary": summary,
        "runs": runs,
    }


def print_summary(what: str, med: dict, speedups: list[float], against: str) -> None:
    """The medians of both sides and the per-pair speed-ups of one measurement, as lines."""
    for name in ("against", "head"):
        m = med[name]
        print(
            f"{what:5} {name:7}: {m['configs_per_s']:8.0f} configs/s, {m['gflops']:6.1f} GFLOP/s "
            f"({100 * m['share_of_peak']:.1f}% of peak), user {m['user_s']:.1f} s, sys {m['sys_s']:.1f} s "
            f"(sys/user {m['sys_over_user']:.2f}), peak RSS {m['peak_rss_gb']:.2f} GB"
        )
    print(f"{what:5} speed-up HEAD over {against[:10]}: per pair {speedups}")


if __name__ == "__main__":
    sys.exit(main())
