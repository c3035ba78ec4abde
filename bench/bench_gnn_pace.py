"""The GNN's pace against the machine's: achieved GFLOP/s of scoring and training, side by side with an earlier commit.

What a profiler would measure, in one run, on the `cpu` profile's GNN (layout:xla:default's settings,
an untrained network seeded alike in both checkouts, 2 threads):
- the limit: a 2048x2048 FP32 matmul in torch (2 threads and 1), and one of the model's own shape
  (configs x nodes of a pass, hidden) @ (hidden, hidden);
- scoring: `gnn.scoring.score_rows` of `--configs` candidate configs of the real sample's valid
  layout graph (223 nodes, 62 configurable after `prepare`), the candidates drawn per configurable
  node from the graph's real configs (the same seed, so the same candidates in both checkouts),
  `predict_chunk` configs a pass, as `rank` and `predict` score;
- training: `--steps` optimizer steps of the training loop's own `step_once` (sampling,
  micro-batches, the step, the loop's heap trim) on the sample's layout:xla:default train graph,
  timed after one warm-up step.
For each: configs/s, GFLOP/s from the project's FLOP counter (`torch.utils.flop_counter`, as
bench_gpu_projection.py counts a step: the matrix products, not the scatter/gather of message
passing; counted at `--against` and used for both sides, since both compute the same maths), its share of
the matmul peak, user and sys CPU seconds of the timed part, and the process's peak RSS. Each
measurement runs in a fresh process with the CLI's memory settings (huge pages asked for before
torch's first allocation, `setup_runtime`'s heap bound). HEAD and `--against` (a clean clone of the
checkout at that revision, this checkout's `.venv` when the requirements are the same) run in
alternating pairs (HEAD first in odd pairs, second in even ones) and the ratios are per pair.

    .venv/bin/python bench/bench_gnn_pace.py --against 923756c [--pairs 3] [--configs 10000] \\
        [--steps 200] [--out bench/results/gnn_pace.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
COLLECTION = "layout:xla:default"  # the sample's layout pair: a train graph and a valid graph of 223 nodes
THREADS = 2
PEAK_SIZE = 2048


def git(*args: str, cwd: Path = ROOT) -> str:
    """A git command's output; a failure is one line naming it."""
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_gnn_pace: git {' '.join(args)} failed: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


# --- the worker: one measurement in a fresh process, importing the checkout given -------------------


def _rusage() -> tuple[float, float]:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime


def _setup(checkout: Path, work: Path, threads: int = THREADS) -> SimpleNamespace:
    """The checkout's modules, the CLI's memory settings, the config and the prepared graphs."""
    sys.path.insert(0, str(checkout / "src"))
    from tpurank.core import memory

    memory.ask_torch_for_huge_pages()  # before torch's first allocation, as the CLI does
    import torch

    torch.set_num_threads(threads)
    from tpurank.core.config_files import load_config
    from tpurank.core.paths import Paths
    from tpurank.core.profiles import Profile
    from tpurank.gnn.data import load_split
    from tpurank.gnn.device import setup_runtime

    rt = setup_runtime()  # the heap bound of the CPU (tpurank.core.memory)
    cfg = load_config(None, [], profile=Profile("cpu", "").file).for_collection(COLLECTION)
    paths = Paths(data=SAMPLE, out=work, work=work)
    train = load_split(paths, COLLECTION, "train", False, dim_features=cfg.gnn.dim_features)
    valid = load_split(paths, COLLECTION, "valid", False, dim_features=cfg.gnn.dim_features)
    return SimpleNamespace(torch=torch, rt=rt, cfg=cfg, train=train, valid=valid, memory=memory)


def candidates(g: Any, count: int, seed: int = 0) -> Any:
    """`g` with `count` candidate configs: each configurable node's values drawn from its real configs
    (a resample of the measured configs, as a user's tuner proposes new ones); runtimes zero."""
    import dataclasses

    import numpy as np

    rng = np.random.default_rng(seed)
    real = np.asarray(g.configs[np.arange(g.num_unique)])  # (u, k, 18)
    k = real.shape[1]
    pick = rng.integers(0, len(real), size=(count, k))
    configs = real[pick, np.arange(k)[None, :]]  # (count, k, 18)
    zeros = np.zeros(count)
    return dataclasses.replace(
        g,
        configs=configs,
        runtime=zeros,
        count=np.ones(count, dtype=np.int64),
        inverse=np.arange(count),
        config_runtime=zeros,
        is_test=True,
        eval_rows=np.arange(0),
    )


def _network(env: SimpleNamespace, g: Any) -> Any:
    from tpurank.gnn.families import gnn

    env.torch.manual_seed(0)
    return gnn.SPEC.new_network(env.cfg, g.kind, int(g.node_feat.shape[1]))


def worker_score(env: SimpleNamespace, configs: int) -> dict:
    """Seconds, CPU times and FLOPs of scoring `configs` candidates of the valid graph."""
    import numpy as np
    from torch.utils.flop_counter import FlopCounterMode

    from tpurank.gnn.data import make_batch
    from tpurank.gnn.nets import tile_inputs
    from tpurank.gnn.scoring import score_rows

    torch = env.torch
    g = candidates(env.valid[0], configs)
    model = _network(env, g).eval()
    chunk = env.cfg.gnn.predict_chunk
    rows = np.arange(configs)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        model(make_batch([g], [rows[:chunk]], tile_inputs.wanted(model)))
    flops = counter.get_total_flops() / chunk
    score_rows(model, g, rows[:chunk], chunk, env.rt.device)  # warm-up: the first pass's one-time costs
    env.memory.reset_peak_rss()
    u0, s0, t0 = *_rusage(), time.perf_counter()
    cost = score_rows(model, g, rows, chunk, env.rt.device)
    seconds, (u1, s1) = time.perf_counter() - t0, _rusage()
    return {
        "graph": g.id,
        "nodes": len(g.opcode),
        "configurable": len(g.config_nodes),
        "configs": configs,
        "chunk": chunk,
        "seconds": seconds,
        "user_s": u1 - u0,
        "sys_s": s1 - s0,
        "peak_rss_gb": env.memory.peak_rss_gb(),
        "flops_per_config": flops,
        "costs": cost.tolist(),
    }


def worker_train(env: SimpleNamespace, steps: int) -> dict:
    """Seconds, CPU times and FLOPs of `steps` training steps (after one warm-up step)."""
    import numpy as np
    from torch.utils.flop_counter import FlopCounterMode

    from tpurank.gnn.data import make_batch, sample_rows
    from tpurank.gnn.device import grad_scaler
    from tpurank.gnn.families import gnn
    from tpurank.gnn.training import loop
    from tpurank.gnn.training.losses import ranking_loss
    from tpurank.gnn.training.step import make_optimizer

    torch = env.torch
    train = [g for g in env.train if g.rankable]
    r = gnn.SPEC.recipe(env.cfg, train[0].kind)
    model = _network(env, train[0]).train()
    opt = make_optimizer(model, r)
    training = SimpleNamespace(
        model=model,
        opt=opt,
        recipe=r,
        rt=env.rt,
        cfg=env.cfg,
        segmented=None,
        precision="fp32",
        scaler=grad_scaler("fp32"),
        sched=torch.optim.lr_scheduler.LambdaLR(opt, lambda _: 1.0),
    )
    st = SimpleNamespace(step=0)
    rows = [sample_rows(g, r.configs_per_graph, np.random.default_rng(0)) for g in train]
    batch = make_batch(train, rows, bool(env.cfg.gnn.tile_features))
    with FlopCounterMode(display=False) as counter:
        loss = ranking_loss(r.loss, model(batch).float(), batch.runtime, batch.mask, r.margin, batch.weight)
        loss.backward()
    flops = counter.get_total_flops() / sum(len(x) for x in rows)
    opt.zero_grad(set_to_none=True)
    every = len(train)
    loop.step_once(training, st, train, every)  # warm-up
    env.memory.reset_peak_rss()
    configs = 0
    u0, s0, t0 = *_rusage(), time.perf_counter()
    for _ in range(steps):
        configs += loop.step_once(training, st, train, every).configs
    seconds, (u1, s1) = time.perf_counter() - t0, _rusage()
    return {
        "graphs": [g.id for g in train],
        "nodes": [len(g.opcode) for g in train],
        "steps": steps,
        "configs": configs,
        "seconds": seconds,
        "user_s": u1 - u0,
        "sys_s": s1 - s0,
        "peak_rss_gb": env.memory.peak_rss_gb(),
        "flops_per_config": flops,
    }


def worker_peak() -> dict:
    """GFLOP/s of FP32 matmuls: the 2048x2048 peak on 1 and 2 threads and the model's own shape."""
    import torch

    out: dict[str, float] = {}
    for threads in (1, THREADS):
        torch.set_num_threads(threads)
        a, b = torch.randn(PEAK_SIZE, PEAK_SIZE), torch.randn(PEAK_SIZE, PEAK_SIZE)
        out[f"peak_{threads}t"] = _best_gflops(lambda a=a, b=b: a @ b, 2 * PEAK_SIZE**3)
    x, w = torch.randn(256 * 223, 32), torch.randn(32, 32)
    out["model_shape"] = _best_gflops(lambda: x @ w, 2 * x.shape[0] * 32 * 32)
    return out


def _best_gflops(fn: Any, flops: int, reps: int = 10) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return round(flops / best / 1e9, 1)


def worker(args: argparse.Namespace) -> None:
    """One measurement (`--worker score|train|peak`), printed as one JSON line."""
    if args.worker == "peak":
        print(json.dumps(worker_peak()))
        return
    env = _setup(args.checkout, args.work, args.threads)
    out = worker_score(env, args.configs) if args.worker == "score" else worker_train(env, args.steps)
    print(json.dumps(out))


# --- the driver: checkouts, alternating pairs, the report -----------------------------------------


def checkout_at(rev: str, where: Path) -> Path:
    """A clean clone of this checkout at `rev`, with a `.venv` (this one's where the requirements match)."""
    git("clone", "-q", str(ROOT), str(where))
    git("checkout", "-q", rev, cwd=where)
    if (where / "requirements.txt").read_bytes() == (ROOT / "requirements.txt").read_bytes():
        (where / ".venv").symlink_to(ROOT / ".venv")
        return where
    r = subprocess.run(["./run.sh", "setup"], cwd=where, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_gnn_pace: ./run.sh setup failed at {rev}: {(r.stdout + r.stderr)[-500:]}")
    return where


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
    cmd += ["--steps", str(args.steps), "--threads", str(args.threads)]
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


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--against", default="923756c", help="the earlier commit (any git revision)")
    p.add_argument("--pairs", type=int, default=3, help="HEAD/REV pairs of each measurement (default 3)")
    p.add_argument("--configs", type=int, default=10_000, help="candidate configs scored (default 10,000)")
    p.add_argument("--steps", type=int, default=200, help="training steps timed (default 200)")
    p.add_argument("--threads", type=int, default=THREADS, help=f"torch threads (default {THREADS})")
    p.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gnn_pace.json")
    p.add_argument("--worker", choices=("score", "train", "peak"), help=argparse.SUPPRESS)
    p.add_argument("--checkout", type=Path, help=argparse.SUPPRESS)
    p.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.worker:
        worker(args)
        return 0
    if not (SAMPLE / "npz_all").is_dir():
        print(f"bench_gnn_pace: the real sample is not at {SAMPLE}", file=sys.stderr)
        return 1
    sys.path.insert(0, str(ROOT / "bench"))
    import provenance

    against = git("rev-parse", "--verify", f"{args.against}^{{commit}}")
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
        runs: dict[str, dict[str, list[dict]]] = {w: {n: [] for n in checkouts} for w in ("score", "train")}
        for what in ("score", "train"):
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
        for name in ("against", "head"):
            m = med[name]
            print(
                f"{what:5} {name:7}: {m['configs_per_s']:8.0f} configs/s, {m['gflops']:6.1f} GFLOP/s "
                f"({100 * m['share_of_peak']:.1f}% of peak), user {m['user_s']:.1f} s, sys {m['sys_s']:.1f} s "
                f"(sys/user {m['sys_over_user']:.2f}), peak RSS {m['peak_rss_gb']:.2f} GB"
            )
        print(f"{what:5} speed-up HEAD over {against[:10]}: per pair {speedups}")
    for ms in runs["score"].values():
        for m in ms:
            m.pop("costs", None)
    return {
        "provenance": provenance.stamp(),
        "what": (
            "the cpu profile's GNN (layout:xla:default) scoring candidates of the real sample's valid layout "
            "graph and training on its train graph, HEAD and an earlier commit in alternating fresh processes"
        ),
        "against": against,
        "threads": THREADS,
        "matmul_gflops": peak,
        "summary": summary,
        "runs": runs,
    }


if __name__ == "__main__":
    sys.exit(main())
