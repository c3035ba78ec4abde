"""Calibration's fits side by side: each on one thread, as many at once as this process has cores.

Calibrating a program fits each learning member (LightGBM, the GNN) once per held-out fold of the
measured configs and once on all of them. Each fit is small: LightGBM's few trees over the shipped
rows and one query, the GNN's few dozen steps on one graph. On one thread each, two fits on two cores
end sooner than the same fits one after another on two threads, and every fit computes the same
bytes on any machine, however many cores it has and however busy they are: a fit's thread count
never follows the machine.

Fits that would compute other bytes side by side go one after another in one lane: the GNN's when a
step draws from torch's one global generator (dropout), whose draws would interleave, or when it runs
on a GPU (`tpurank.rank.finetune.GnnInputs.side_by_side`).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import torch

from tpurank.core.workers import affinity_cores, torch_threads

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
Lane = Sequence[tuple[K, Callable[[], T]]]  # fits run one after another, in order: (key, fit)


def width(lanes: int) -> int:
    """How many fits run at once: one per core this process may use, at most one per lane."""
    return max(1, min(affinity_cores(), lanes))


def run_lanes(lanes: Sequence[Lane[K, T]]) -> dict[K, T]:
    """Every fit's result by its key: the lanes side by side on `width` threads, taken in the order
    given (the caller gives the longest first), each lane's fits in order.

    torch's intra-op threads are one meanwhile (the GNN's fits ask for one each; a thread of the pool
    starts at the count the process has), and torch's global generator is left as the caller had it
    (each GNN fit seeds it and restores what it found, which side by side is another fit's state).
    Ctrl-C stops the fits not yet started; those under way (a few seconds each) end first.

    Args:
        lanes: the lanes, each a sequence of (key, fit); keys unique over all lanes.
    """
    with torch_threads(1), torch.random.fork_rng(devices=[]):
        if width(len(lanes)) == 1:
            return {key: fit() for lane in lanes for key, fit in lane}
        pool = ThreadPoolExecutor(width(len(lanes)), thread_name_prefix="tpurank-calibration")
        try:
            futures = [pool.submit(_run_lane, lane) for lane in lanes]
            return {key: out for future in futures for key, out in future.result().items()}
        finally:
            pool.shutdown(wait=True, cancel_futures=True)


def _run_lane(lane: Lane[K, T]) -> dict[K, T]:
    return {key: fit() for key, fit in lane}
