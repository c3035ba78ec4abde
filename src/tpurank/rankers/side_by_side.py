"""Where `train` runs a neural model's collections on the CPU: side by side on small data, each in
a fresh process of its own on big data.

Small data: on the demo's graphs (a few hundred nodes, 32 configs a step) a training step's tensors
are too small for torch's threads to share a step well, so two one-thread processes, each training
its own collection, finish the five collections sooner than one process whose two threads train
them one after another (the figures: docs/scale.md, "The first run"). Each collection's training
is the same call either way, with its own seed: where steps end it (the demo's `gnn.max_steps`),
only the thread count differs, which changes a float's last bits. Where a time share ends it (`all
--budget`), each collection still stops at its share, with a core of its own instead of all of
them; the budget's plan counts the collections one after another, so side by side the step ends
sooner than planned, never later.

Big data: one collection at a time with every core (its tensors share the threads well, and a
second process would hold a second model's memory), each in a fresh process, so the heap one
collection's training leaves does not raise the next one's peak (docs/scale.md, "Memory on the
CPU"); a few seconds of imports per collection.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from multiprocessing import get_context

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.progress import lines_only
from tpurank.core.workers import die_with_parent, usable_cores
from tpurank.data.dataset import SMALL_DATA_BYTES, npz_bytes

NEURAL = ("gnn", "baseline")  # models whose steps are torch's: LightGBM shares its threads well


@dataclass(frozen=True)
class Workers:
    """How `train` runs a model's collections outside its own process.

    Args:
        jobs: processes at once.
        threads: torch's threads in each (None: torch's default, every core).
        fresh: a new process for every collection (else a worker trains one after another).
    """

    jobs: int
    threads: int | None
    fresh: bool


def collection_workers(model: str, paths: Paths, collections: list[str]) -> Workers | None:
    """Side by side on small data (one one-thread process per usable core: affinity and
    $OMP_NUM_THREADS, not the machine's load, so a run's models do not depend on what else ran),
    one fresh process per collection on big data, both on the CPU only; None: in this process (a
    GPU, torchrun's ranks, LightGBM, one usable core on small data).

    Args:
        model: the model to train.
        paths: its paths (the data's size is read).
        collections: the collections to train.
    """
    ranks = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's ranks share the steps instead
    if model not in NEURAL or not collections or ranks > 1:
        return None
    cores = usable_cores(sample_s=0)
    small = npz_bytes(paths.data, collections) < SMALL_DATA_BYTES
    if small and (cores < 2 or len(collections) < 2):
        return None
    from tpurank.gnn.device import usable_cuda  # torch: imported only where a GNN trains

    if usable_cuda(0)[0]:
        return None
    return Workers(min(cores, len(collections)), 1, fresh=False) if small else Workers(1, None, fresh=True)


def _worker_start(parent_pid: int, threads: int | None) -> None:
    """Pool initializer: die with the stage, take `threads` threads (None: torch's default), and
    print progress as lines when another worker shares the terminal."""
    die_with_parent(parent_pid)
    if threads is None:
        return
    import torch

    torch.set_num_threads(threads)
    lines_only()


def train_in_workers(
    train_one: Callable[[str, Paths, Config, str], float],
    model: str,
    paths: Paths,
    configs: dict[str, Config],
    workers: Workers,
) -> None:
    """`train_one(model, paths, config, collection)` for every collection of `configs` in spawned
    worker processes (`collection_workers`), the biggest collection first.

    Args:
        train_one: trains one collection and returns its seconds (a module-level function).
        model: the model to train.
        paths: resolved paths.
        configs: collection -> its config (`Config.for_collection`), in training order.
        workers: how many processes, their threads, fresh per collection or not.
    """
    if workers.jobs > 1:
        order = sorted(configs, key=lambda c: npz_bytes(paths.data, [c]), reverse=True)
        print(
            f"train {model}: {len(order)} collections, {workers.jobs} at a time (1 thread each)",
            file=sys.stderr,
        )
    else:
        order = list(configs)
        print(f"train {model}: each collection in a process of its own", file=sys.stderr)
    sys.stderr.flush()
    pool = ProcessPoolExecutor(
        workers.jobs,
        get_context("spawn"),
        initializer=_worker_start,
        initargs=(os.getpid(), workers.threads),
        max_tasks_per_child=1 if workers.fresh else None,
    )
    try:
        futures = [pool.submit(train_one, model, paths, configs[c], c) for c in order]
        for done in as_completed(futures):
            done.result()  # a TpurankError comes through as itself: one line (stages.guarded)
    except BrokenProcessPool:
        stop(pool)
        alone = "; rerun with OMP_NUM_THREADS=1 to train one collection at a time" if workers.jobs > 1 else ""
        raise TpurankError(f"train {model}: a training process died (out of memory?){alone}") from None
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
