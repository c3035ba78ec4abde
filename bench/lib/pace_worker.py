"""The measurements of bench_gnn_pace.py, each run in a fresh process with one checkout's code.

`bench_gnn_pace.py --worker score|train|peak --checkout DIR` imports the tpurank of DIR (before
torch, with the CLI's memory settings) and prints one JSON line: scoring `--configs` candidates of
the sample's valid layout graph, `--steps` training steps of the loop's own `step_once`, or the
matmul peak. What each measures: bench_gnn_pace.py's docstring.
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from peak_rss import peak_rss_gb, reset_peak_rss

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
COLLECTION = "layout:xla:default"  # the sample's layout pair: a train graph and a valid graph of 223 nodes
THREADS = 2
PEAK_SIZE = 2048


def _rusage() -> tuple[float, float]:
    u = resource.getrusage(resource.RUSAGE_SELF)
    return u.ru_utime, u.ru_stime


def setup(checkout: Path, work: Path, threads: int = THREADS) -> SimpleNamespace:
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
    return SimpleNamespace(torch=torch, rt=rt, cfg=cfg, train=train, valid=valid)


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


def worker_score(env: SimpleNamespace, configs: int, lanes: int = 1) -> dict:
    """Seconds, CPU times and FLOPs of scoring `configs` candidates of the valid graph, `lanes` passes
    side by side where the checkout's `score_rows` runs passes so (an older one: one at a time)."""
    import inspect

    import flop_count  # imports torch: only once `setup` has set the process up
    import numpy as np

    from tpurank.gnn.data import make_batch
    from tpurank.gnn.nets import tile_inputs
    from tpurank.gnn.scoring import score_rows

    torch = env.torch
    g = candidates(env.valid[0], configs)
    model = _network(env, g).eval()
    chunk = env.cfg.gnn.predict_chunk
    rows = np.arange(configs)
    with torch.no_grad(), flop_count.counted() as counter:
        model(make_batch([g], [rows[:chunk]], tile_inputs.wanted(model)))
    flops = counter.total / chunk
    side = {"lanes": lanes} if "lanes" in inspect.signature(score_rows).parameters else {}
    score_rows(model, g, rows[:chunk], chunk, env.rt.device)  # warm-up: the first pass's one-time costs
    reset_peak_rss()
    u0, s0, t0 = *_rusage(), time.perf_counter()
    cost = score_rows(model, g, rows, chunk, env.rt.device, **side)
    seconds, (u1, s1) = time.perf_counter() - t0, _rusage()
    return {
        "graph": g.id,
        "nodes": len(g.opcode),
        "configurable": len(g.config_nodes),
        "configs": configs,
        "chunk": chunk,
        "lanes": side.get("lanes", 1),
        "seconds": seconds,
        "user_s": u1 - u0,
        "sys_s": s1 - s0,
        "peak_rss_gb": peak_rss_gb(),
        "flops_per_config": flops,
        "costs": cost.tolist(),
    }


def worker_train(env: SimpleNamespace, steps: int) -> dict:
    """Seconds, CPU times and FLOPs of `steps` training steps (after one warm-up step)."""
    import flop_count  # imports torch: only once `setup` has set the process up
    import numpy as np

    from tpurank.gnn.data import batch_rows, make_batch
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
    rows = [batch_rows(g, r.configs_per_graph, np.random.default_rng(0)) for g in train]
    batch = make_batch(train, rows, bool(env.cfg.gnn.tile_features))
    with flop_count.counted() as counter:
        loss = ranking_loss(r.loss, model(batch).float(), batch.runtime, batch.mask, r.margin, batch.weight)
        loss.backward()
    flops = counter.total / sum(len(x) for x in rows)
    opt.zero_grad(set_to_none=True)
    every = len(train)
    loop.step_once(training, st, train, every)  # warm-up
    reset_peak_rss()
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
        "peak_rss_gb": peak_rss_gb(),
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
