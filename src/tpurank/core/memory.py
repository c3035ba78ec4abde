"""Give freed memory back to the system on the CPU (Linux, glibc).

A training step or a scoring pass allocates tensors of a different size for every graph (configs x
nodes x width). glibc serves a big block from its own pages (mmap) only until the first such block
is freed; then it raises that threshold (up to 32 MB) and serves blocks below it from its heap,
where the holes they leave are rarely reused, so resident memory grows from step to step. Three
measures (what each saves: docs/scale.md, "Memory on the CPU"; `bench/bench_gnn_memory.py`):
- `bound_cpu_heap` (GNN on the CPU) fixes the threshold at 4 MiB, so every bigger tensor gives its
  pages back when freed. Fresh pages cost page faults (far slower with 4 KB pages), so it is done
  only where torch gets transparent huge pages:
- `ask_torch_for_huge_pages` (the CLI, before torch's first allocation) sets torch's
  `THP_MEM_ALLOC_ENABLE`: tensors from 2 MB are madvised to huge pages.
- `release_free_memory` (`malloc_trim`, after each CPU step and validation) returns what is left
  in the heap's holes.
`all` runs every stage in one process, so a stage's leftovers (glibc's heap, pyarrow's pool) would
stay resident through the next ones: `release_between_steps` gives them back after each step.
Elsewhere (no glibc, or CUDA, whose caching allocator reuses its blocks) nothing is done.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path

M_MMAP_THRESHOLD = -3  # mallopt's parameter number (malloc.h)
MMAP_THRESHOLD = 4 << 20  # about the memory of 1 MiB in 4% less time; 16 MiB: more memory (docs/scale.md)
TORCH_HUGE_PAGES = "THP_MEM_ALLOC_ENABLE"  # torch reads it once, at its first CPU allocation
THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")


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


def release_between_steps() -> bool:
    """Give back what a finished stage left allocated but unused, before `all` runs the next one in
    the same process: collect unreachable objects, empty pyarrow's own pool (mimalloc, which keeps
    a parquet read's freed pages) and trim glibc's heap. True when glibc's trim ran.

    What survives the collection is the run's own (modules, torch's among them: about half a
    million objects) and is frozen, so the collections after later steps skip it: each full one
    would take ~0.15 s, 2 s an `all`. `thaw_after_steps` hands it back to the collector."""
    gc.collect()
    gc.freeze()
    arrow = sys.modules.get("pyarrow")
    if arrow is not None:
        arrow.default_memory_pool().release_unused()
    return release_free_memory()


@contextlib.contextmanager
def thaw_after_steps() -> Iterator[None]:
    """Around the steps of `all`: what release_between_steps froze is collectable again when they
    end (a notebook's kernel lives on), unless the caller had frozen objects itself (gc.freeze
    cannot be undone in part: theirs would thaw too)."""
    frozen_before = gc.get_freeze_count()
    try:
        yield
    finally:
        if frozen_before == 0:
            gc.unfreeze()


def huge_pages_available() -> bool:
    """The kernel gives transparent huge pages to regions that ask (`always` or `madvise`)."""
    try:
        return "[never]" not in THP_SETTING.read_text()
    except OSError:
        return False


def ask_torch_for_huge_pages() -> None:
    """Have torch madvise its CPU tensors from 2 MB to huge pages (a user's own setting is kept).
    Works only before torch's first CPU allocation: the CLI calls it first thing."""
    if huge_pages_available():
        os.environ.setdefault(TORCH_HUGE_PAGES, "1")


def fix_mmap_threshold(nbytes: int = MMAP_THRESHOLD) -> bool:
    """Serve every block of `nbytes` or more from its own pages, returned to the system when freed,
    and stop glibc from raising that threshold (`mallopt(M_MMAP_THRESHOLD)`, which also fixes the
    trim threshold). True when it was set."""
    libc = _libc()
    return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, nbytes))


def bound_cpu_heap() -> bool:
    """`fix_mmap_threshold` where its fresh pages are huge pages (see the module docstring) and the
    user set no `MALLOC_MMAP_THRESHOLD_` of their own; True when it was fixed."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or os.environ.get(TORCH_HUGE_PAGES) != "1":
        return False
    return huge_pages_available() and fix_mmap_threshold()


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
