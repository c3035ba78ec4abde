"""Worker processes that die with their parent: a killed run leaves no orphans behind.

`ProcessPoolExecutor(..., initializer=die_with_parent, initargs=(os.getpid(),))` makes each
worker ask Linux for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), so even a SIGKILL of
the stage (which runs no cleanup) takes its idle workers with it. Elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys

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


def usable_cores(sample_s: float = BUSY_SAMPLE_S) -> int:
    """The cores a multi-threaded library should take now: those this process may run on, at most
    $OMP_NUM_THREADS, less the cores other processes keep busy (measured over `sample_s` while this
    process waits). OpenMP threads wait for each other at every barrier, so one thread on a core
    another program holds slows every step many times over: fewer threads lose far less.

    Args:
        sample_s: seconds to measure the machine's load over (0: do not measure).
    """
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    omp = os.environ.get("OMP_NUM_THREADS", "").strip()
    if omp.isdigit() and int(omp) > 0:
        cores = min(cores, int(omp))
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
