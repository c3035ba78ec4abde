"""A neural model's collections trained in processes of their own: side by side on small data, one
after another on big data.

A collection trains on torch threads of its own data's size (`training_threads`: one on small
data, else every core the process may use), wherever it trains: alone, in the stage's process, side
by side or in a fresh process. A float sum splits differently over another thread count, so a
collection's weights are then the same bytes however it was scheduled, and whatever the machine's
load (tpurank.core.workers.neural_threads).

Small data, on the CPU: one one-thread process per usable core, each training its own collection.
On the demo's graphs (a few hundred nodes, 32 configs a step) a training step's tensors are too
small for torch's threads to share a step well, so two one-thread processes finish the five
collections sooner than one process whose two threads train them one after another (the figures:
docs/scale.md, "The first run"). Each collection's training is the same call either way, with its
own seed and one thread: where steps end it (the demo's `gnn.max_steps`), the weights are the same
bytes. Where a time share ends it (`all --budget`), each collection still stops at its share, with
a core of its own instead of all of them; the budget's plan splits the time the processes have
together, in the order they start (tpurank.run.shares).

Big data: one collection at a time, each in a fresh process that takes every core (its tensors
share the threads well; a small collection among them keeps its one thread). What a collection's
training leaves on the heap (freed, but not returned to the system) dies with its process instead
of lying under the next collection's graphs; the stage's own process only waits and, on the CPU,
never imports torch (looking for a GPU does: tpurank.core.profiles; docs/scale.md, "Memory on the
CPU").
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
from tpurank.core.workers import affinity_cores, die_with_parent, neural_threads
from tpurank.data.dataset import SMALL_DATA_BYTES, npz_bytes
from tpurank.train.staging import discard

NEURAL = ("gnn", "baseline")  # models whose steps are torch's: LightGBM shares its threads well


@dataclass(frozen=True)
class Processes:
    """How a model's collections train outside the stage's process (each on its own
    `training_threads`: side by side, on small data, one).

    Args:
        at_once: collections trained at the same time (1: one after another, each in a fresh process).
    """

    at_once: int

    @property
    def side_by_side(self) -> bool:
        return self.at_once > 1


def training_processes(
    model: str, paths: Paths, collections: list[str], cuda: Callable[[], bool] | None = None
) -> Processes | None:
    """How `model`'s collections train, or None for the stage's own process (LightGBM, a single
    collection, torchrun's ranks, a GPU on small data, a single usable core on small data).

    Side by side, the usable cores come from affinity and $OMP_NUM_THREADS (`affinity_cores`), not
    from the machine's load, so a run's models do not depend on what else ran.

    Args:
        model: the model to train.
        paths: its paths (the data's size is read).
        collections: the collections to train.
        cuda: whether a usable CUDA GPU trains it (default: asks torch, imported only here, where a
            GNN trains on small data; the budget's plan asks without torch: tpurank.run.shares).
    """
    ranks = int(os.environ.get("WORLD_SIZE", "1"))  # torchrun's ranks share the steps instead
    if model not in NEURAL or len(collections) < 2 or ranks > 1:
        return None
    if npz_bytes(paths.data, collections) >= SMALL_DATA_BYTES:
        return Processes(at_once=1)
    cores = affinity_cores()
    if cores < 2:
        return None
    return None if (cuda or _usable_cuda)() else Processes(at_once=min(cores, len(collections)))


def training_threads(model: str, paths: Paths, collection: str) -> int | None:
    """torch's threads for training `model` on `collection` (None: not a neural model, torch
    untouched): `neural_threads` of the collection's own npz, so its weights do not depend on which
    other collections train with it, nor on where it trains.

    Args:
        model: the model to train.
        paths: its paths (the collection's size is read).
        collection: the collection.
    """
    if model not in NEURAL:
        return None
    return neural_threads(small=npz_bytes(paths.data, [collection]) < SMALL_DATA_BYTES)


def _usable_cuda() -> bool:
    from tpurank.gnn.device import usable_cuda  # torch

    return usable_cuda(0)[0]


def training_order(paths: Paths, collections: list[str], processes: Processes) -> list[str]:
    """The order the collections start in: side by side the biggest first (the longest trainings
    do not start last), else as given."""
    if not processes.side_by_side:
        return list(collections)
    return sorted(collections, key=lambda c: npz_bytes(paths.data, [c]), reverse=True)


def _worker_start(parent_pid: int, side_by_side: bool) -> None:
    """Pool initializer: die with the stage; side by side, print progress as lines (the workers
    share the terminal). Each training sets its own threads (`training_threads`)."""
    die_with_parent(parent_pid)
    if side_by_side:
        lines_only()


def train_in_processes(
    train_one: Callable[[str, Paths, Config, str], float],
    model: str,
    paths: Paths,
    configs: dict[str, Config],
    processes: Processes,
) -> None:
    """`train_one(model, paths, config, collection)` for every collection of `configs` in spawned
    processes: side by side the biggest collection first, else in the given order, each in a fresh
    process.

    Args:
        train_one: trains one collection and returns its seconds (a module-level function).
        model: the model to train.
        paths: resolved paths.
        configs: collection -> its config (`Config.for_collection`).
        processes: how (`training_processes`).
    """
    order = training_order(paths, list(configs), processes)
    if processes.side_by_side:
        how = f"{processes.at_once} at a time ({neural_threads(small=True)} thread each)"
    else:
        how = "one after another, each in a process of its own"
    print(f"train {model}: {len(order)} collections, {how}", file=sys.stderr)
    sys.stderr.flush()
    # one after another: a pool of one worker per collection. A pool whose worker ends after each
    # task (`max_tasks_per_child=1`) starts the next worker from a thread that a failure's shutdown
    # can leave waiting forever (CPython 3.11), so the process would never exit.
    batches = [order] if processes.side_by_side else [[c] for c in order]
    for batch in batches:
        _run_pool(train_one, model, paths, {c: configs[c] for c in batch}, processes)


def _run_pool(
    train_one: Callable[[str, Paths, Config, str], float],
    model: str,
    paths: Paths,
    configs: dict[str, Config],
    processes: Processes,
) -> None:
    """Every collection of `configs` in one pool of `processes.at_once` spawned workers, in order;
    the first failure or Ctrl-C stops the others (finished collections are kept)."""
    pool = ProcessPoolExecutor(
        min(processes.at_once, len(configs)),
        get_context("spawn"),
        initializer=_worker_start,
        initargs=(os.getpid(), processes.side_by_side),
    )
    try:
        futures = [pool.submit(train_one, model, paths, cfg, c) for c, cfg in configs.items()]
        for done in as_completed(futures):
            done.result()  # a TpurankError comes through as itself: one line (stages.guarded)
    except BrokenProcessPool:
        stop(pool)
        _discard_unfinished(model, paths, configs)
        fix = (
            "; rerun with OMP_NUM_THREADS=1 to train one collection at a time"
            if processes.side_by_side
            else ""
        )
        raise TpurankError(f"train {model}: a training process died (out of memory?){fix}") from None
    except Exception:
        stop(pool)
        _discard_unfinished(model, paths, configs)
        raise
    except BaseException:  # Ctrl-C: each staging folder keeps its resume state
        stop(pool)
        raise
    pool.shutdown()


def _discard_unfinished(model: str, paths: Paths, configs: dict[str, Config]) -> None:
    """After a failure, the staging folders that no process removed: a worker that died, or one
    terminated because another failed, cleans up nothing (a finished collection has none left)."""
    for c in configs:
        discard(paths, model, c)


def stop(pool: ProcessPoolExecutor) -> None:
    """End the pool now: queued collections cancelled, running ones terminated (after Ctrl-C a
    training's staging folder keeps its resume state; train/staging.py)."""
    workers = list(getattr(pool, "_processes", {}).values())  # the executor offers no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for w in workers:
        if w.is_alive():
            w.terminate()
    for w in workers:
        w.join()
