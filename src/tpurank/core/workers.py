"""Worker processes that die with their parent: a killed run leaves no orphans behind.

`ProcessPoolExecutor(..., initializer=die_with_parent, initargs=(os.getpid(),))` makes each
worker ask Linux for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), so even a SIGKILL of
the stage (which runs no cleanup) takes its idle workers with it. Elsewhere it does nothing.

And how many threads a multi-threaded library takes: LightGBM the cores free when it starts
(`lgbm_threads`); torch a count that never follows the load (`neural_threads`, `model_threads`),
since its float sums split over another number of threads differ in their last bits.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import psutil

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Pool initializer: SIGKILL this process when `parent_pid` exits.

    Args:
        parent_pid: the pid of the process that created the pool (os.getpid() there).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl (an unusual libc): workers then end on their own
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)


BUSY_SAMPLE_S = 0.3  # how long the machine's load is looked at before a multi-threaded step starts


def affinity_cores() -> int:
    """The cores this process may run on (its affinity), at most $OMP_NUM_THREADS: what the machine
    grants it, whatever else runs there now."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        cores = min(cores, int(omp))
    return max(1, cores)


def usable_cores(sample_s: float = BUSY_SAMPLE_S) -> int:
    """The cores a multi-threaded library should take now: `affinity_cores`, less the cores other
    processes keep busy (measured over `sample_s` while this process waits). OpenMP threads wait for
    each other at every barrier, so one thread on a core another program holds slows every step
    many times over: fewer threads lose far less. For work whose result must not depend on the
    thread count only (torch's: `neural_threads`), never the load.

    Args:
        sample_s: seconds to measure the machine's load over (0: do not measure).
    """
    cores = affinity_cores()
    if sample_s > 0 and cores > 1:
        busy = psutil.cpu_percent(interval=sample_s) / 100 * (os.cpu_count() or 1)
        cores = min(cores, max(1, (os.cpu_count() or 1) - int(busy + 0.5)))
    return max(1, cores)


@functools.cache
def cores_now() -> int:
    """`usable_cores`, measured once per process (a stage's trainings and predictions agree)."""
    return usable_cores()


def lgbm_threads(configured: int) -> int:
    """LightGBM's threads: the config's `lgbm.threads`, or (0) the cores usable when the process first
    asks (`cores_now`). The count enters the model file's parameters, so a model says how it was
    trained; a fixed `lgbm.threads` (or $OMP_NUM_THREADS) gives the same model on a busy machine."""
    return configured if configured > 0 else cores_now()


def neural_threads(small: bool) -> int:
    """torch's intra-op threads for training a neural model on a collection: one on small data
    (SMALL_DATA_BYTES of npz, as `train` judges it: tpurank.train.collection_processes), else every
    core of `affinity_cores`.

    Never the machine's load: torch splits a float sum (sgemm over a few rows, LayerNorm's weight
    gradients, ...) differently over another number of threads, so its last bits, and after a few
    steps a model's weights, would follow how busy the machine was when the step started
    (bench/LOG.md, "Same bytes whatever the load (helper)"). One thread on small data also keeps what
    a load-sized count was for: tensors that small barely share two threads, and a thread on a core
    another program holds slows every step of theirs many times over (15x a training step, 74x a
    scoring pass of the tiny tree's GNN on two threads of a fully busy 2-core machine, against
    one). Big data takes every core, as its collections always trained: its tensors share them.

    Args:
        small: whether the collection's data is small.
    """
    return 1 if small else affinity_cores()


def model_threads(trained: int | None, most: int | None = None) -> int:
    """torch's threads for a trained neural model's predictions or fine-tuning: those it trained on
    (its checkpoint's `threads`: `neural_threads`), at most `most` or `affinity_cores`. So the same
    model scores the same bytes in `all`, in a step run alone, in `infer` and in `rank`, however
    busy the machine, and on any machine with at least its training's cores.

    Args:
        trained: the model's training threads (None: a checkpoint from before they were kept, one).
        most: at most this many (None: `affinity_cores`).
    """
    return max(1, min(trained or 1, affinity_cores() if most is None else most))


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """torch's intra-op threads set to `count` meanwhile; the caller's count is restored after (a
    process that runs several stages, or a user's own, keeps its setting).

    Args:
        count: the threads (>= 1).
    """
    import torch  # only where a neural model runs: the processes that wait stay light

    before = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(before)
