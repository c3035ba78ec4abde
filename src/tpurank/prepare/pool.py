"""prepare's worker pool: one task per graph file, in worker processes, results in task order.

A bad file is one line (`failure`), never the end of the stage; a worker that dies (out of memory)
stops the stage with one line, keeping every finished output.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import psutil

from tpurank.core.errors import TpurankError
from tpurank.core.progress import tqdm
from tpurank.core.workers import die_with_parent
from tpurank.data.dataset import GraphFile

# memory one worker may need: imports (~125 MiB), the biggest graph's unique configs held compressed
# as the cache stores them (tpurank.prepare.packed; full scale's largest cache file: 74 MB), the
# 128 MB of them gathered per write pass and the streaming buffers
WORKER_MEMORY = 2**30
# npz bytes below which one worker per core is not worth its start: a spawned worker imports numpy and
# tpurank (about 1.5 s of CPU each) while prepare handles some 50 MB a second on one core, so tiny and
# sample trees (under 4 MB) run in this process, ~1 s instead of ~4.5 s of CPU
POOL_MIN_BYTES = 32 * 2**20


def failure(gf: GraphFile, e: Exception) -> str:
    """One line for a file that failed; a bug or an exotic failure (MemoryError too) names its type."""
    if isinstance(e, TpurankError):
        return str(e)
    if isinstance(e, OSError):  # permission denied, a vanished file: the reason, not "[Errno N]"
        return f"{e.filename or gf.path}: {e.strerror or e}"
    return f"{gf.path}: {type(e).__name__}: {e}"


def run_tasks(fn: Any, tasks: list[tuple], jobs: int, progress: bool, desc: str) -> list[Any]:
    """fn(*task) for every task, in a process pool when jobs > 1, results in task order."""
    results: list[Any] = [None] * len(tasks)
    bar = tqdm(total=len(tasks), desc=desc, unit="graph", disable=not progress, file=sys.stderr)
    try:
        if jobs <= 1 or len(tasks) <= 1:
            for i, t in enumerate(tasks):
                results[i] = fn(*t)
                bar.update()
            return results
        ctx = multiprocessing.get_context("spawn")  # no fork of a parent that may hold threads
        pool = ProcessPoolExecutor(
            max_workers=min(jobs, len(tasks)),
            mp_context=ctx,
            initializer=die_with_parent,
            initargs=(os.getpid(),),
        )
        with pool:
            futures: dict[Future, int] = {pool.submit(fn, *t): i for i, t in enumerate(tasks)}
            try:
                for fut in as_completed(futures):
                    results[futures[fut]] = fut.result()
                    bar.update()
            except BrokenProcessPool:
                raise TpurankError(
                    f"{desc}: a worker process died (out of memory?); finished outputs are kept, "
                    "rerun with fewer --jobs"
                ) from None
            except BaseException:
                pool.shutdown(wait=False, cancel_futures=True)
                raise
        return results
    finally:
        bar.close()


def resolve_jobs(jobs: int, work_bytes: float | None = None) -> int:
    """0 means one worker per CPU core, but no more than the available memory holds at
    WORKER_MEMORY each (many cores and little RAM would otherwise run out on the biggest files),
    and none but this process for less than POOL_MIN_BYTES of `work_bytes` (when given)."""
    if jobs > 0:
        return jobs
    if work_bytes is not None and work_bytes < POOL_MIN_BYTES:
        return 1
    fit = int(psutil.virtual_memory().available // WORKER_MEMORY)
    return max(1, min(os.cpu_count() or 1, fit))
