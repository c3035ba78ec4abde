"""A neural model's collections trained side by side on small data, one process per core.

On the demo's graphs (a few hundred nodes, 32 configs a step) a training step's tensors are too
small for torch's threads to share a step well, so two one-thread processes, each training its own
collection, finish the five collections sooner than one process whose two threads train them one
after another (the figures: docs/scale.md, "The first run"). On big data one process takes every
core: its tensors share the threads well, and a second process would hold a second model's memory.
Each collection's training is the same call either way, with its own seed: where steps end it (the
demo's `gnn.max_steps`), only the thread count differs, which changes a float's last bits. Where a
time share ends it (`all --budget`), each collection still stops at its share, with a core of its
own instead of all of them; the budget's plan counts the collections one after another, so side by
side the step ends sooner than planned, never later.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from multiprocessing import get_context

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.progress import lines_only
from tpurank.core.workers import die_with_parent, usable_cores
from tpurank.data.dataset import SMALL_DATA_BYTES, npz_bytes

NEURAL = ("gnn", "baseline")  # models whose steps are torch's: LightGBM shares its threads well


def side_by_side_jobs(model: str, paths: Paths, collections: list[str]) -> int:
    """How many collections of `model` to train at once: the usable cores (affinity and
    $OMP_NUM_THREADS, not the machine's load, so a run's models do not depend on what else ran) on
    small data on the CPU, else 1 (a GPU, torchrun's ranks, LightGBM, big data: in the stage's process).

    Args:
        model: the model to train.
        paths: its paths (the data's size is read).
        collections: the collections to train.
    """
    ranks = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's ranks share the steps instead
    if model not in NEURAL or len(collections) < 2 or ranks > 1:
        return 1
    cores = usable_cores(sample_s=0)
    if cores < 2 or npz_bytes(paths.data, collections) >= SMALL_DATA_BYTES:
        return 1
    from tpurank.gnn.device import usable_cuda  # torch: imported only where a GNN trains

    return 1 if usable_cuda(0)[0] else min(cores, len(collections))


def _worker_start(parent_pid: int) -> None:
    """Pool initializer: die with the stage, take one thread, print progress as lines (the workers
    share the terminal)."""
    die_with_parent(parent_pid)
    import torch

    torch.set_num_threads(1)
    lines_only()


def train_side_by_side(
    train_one: Callable[[str, Paths, Config, str], float],
    model: str,
    paths: Paths,
    configs: dict[str, Config],
    jobs: int,
) -> None:
    """`train_one(model, paths, config, collection)` for every collection of `configs`, `jobs` at a
    time in spawned one-thread processes, the biggest collection first.

    Args:
        train_one: trains one collection and returns its seconds (a module-level function).
        model: the model to train.
        paths: resolved paths.
        configs: collection -> its config (`Config.for_collection`).
        jobs: processes at once (`side_by_side_jobs`).
    """
    order = sorted(configs, key=lambda c: npz_bytes(paths.data, [c]), reverse=True)
    print(f"train {model}: {len(order)} collections, {jobs} at a time (1 thread each)", file=sys.stderr)
    sys.stderr.flush()
    pool = ProcessPoolExecutor(jobs, get_context("spawn"), initializer=_worker_start, initargs=(os.getpid(),))
    try:
        futures = [pool.submit(train_one, model, paths, configs[c], c) for c in order]
        for done in as_completed(futures):
            done.result()  # a TpurankError comes through as itself: one line (stages.guarded)
    except BrokenProcessPool:
        stop(pool)
        raise TpurankError(
            f"train {model}: a training process died (out of memory?); rerun with OMP_NUM_THREADS=1 "
            "to train one collection at a time"
        ) from None
    except BaseException:  # a failure or Ctrl-C: the others stop too (finished collections are kept)
        stop(pool)
        raise
    pool.shutdown()


def stop(pool: ProcessPoolExecutor) -> None:
    """End the pool now: queued collections cancelled, running ones terminated (a training's staging
    folder keeps its resume state; rankers/staging.py)."""
    workers = list(getattr(pool, "_processes", {}).values())  # the executor offers no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        if w.is_alive():
            w.terminate()
    for w in workers:
        w.join()
