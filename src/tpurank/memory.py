"""Give freed memory back to the system between training steps (Linux, glibc).

A training step allocates tensors of a different size for every graph (configs x nodes x width).
glibc serves most of them from its heap, and the holes they leave are rarely reused, so on the CPU
resident memory kept growing: 4.94 GB after 30 CPU-budget steps on the full-scale xla collection,
2.70 GB with `malloc_trim` after each step (`bench/bench_gnn_memory.py`, README "Scale"). Fixing
glibc's mmap threshold instead also kept memory down but, in a trial, slowed steps down more. Elsewhere (no
glibc, or CUDA, whose caching allocator reuses its blocks) nothing is done.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys
from pathlib import Path


@functools.cache
def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None)
        libc.malloc_trim  # noqa: B018  (glibc only: musl has none)
        return libc
    except (OSError, AttributeError):
        return None


def release_free_memory() -> bool:
    """Return the heap's free pages to the system (glibc `malloc_trim(0)`); True when it ran."""
    libc = _libc()
    if libc is None:
        return False
    libc.malloc_trim(0)
    return True


def reset_peak_rss() -> None:
    """Start the process's peak resident set (VmHWM) afresh (Linux), so `peak_rss_gb` measures
    from here: the benches read each training step's or graph's own peak this way."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_gb() -> float:
    """The process's peak resident set since start or the last `reset_peak_rss` (GB; Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
    return float("nan")
