"""Give freed memory back to the system on the CPU (Linux, glibc).

A training step or a scoring pass allocates tensors of a different size for every graph (configs x
nodes x width). glibc serves a big block from its own pages (mmap) only until the first such block
is freed; then it raises that threshold (up to 32 MB) and serves blocks below it from its heap,
where the holes they leave are rarely reused, so resident memory grows from step to step. Three
measures (what each saves: docs/scale.md, "Memory on the CPU"; `bench/runs/bench_gnn_memory.py`):
- `bound_cpu_heap` (GNN on the CPU) fixes the threshold at 4 MiB, so every bigger tensor gives its
  pages back when freed. Fresh pages cost page faults (far slower with 4 KB pages), so it is done
  only where torch gets transparent huge pages:
- `ask_torch_for_huge_pages` (the CLI, before torch's first allocation) sets torch's
  `THP_MEM_ALLOC_ENABLE`: tensors from 2 MB are madvised to huge pages.
- `release_free_memory` (`malloc_trim`, after each CPU validation) returns what is left in the
  heap's holes.
Fresh pages are what the kernel's share of a step's time pays for (sys time, a third of the CPU
time when every pass's state tensors got their own pages and every step's trim gave the heap back),
so the bound is kept without handing memory back that the next pass takes again:
- `fit_mmap_threshold` (each scoring pass and training step) raises the fixed threshold above the
  pass's own state tensors where they fit under glibc's 32 MiB cap, so a pass reuses the previous
  one's freed blocks. A bigger pass (a full-scale graph's) keeps the 4 MiB threshold: its tensors
  get their own pages, given back when freed; served from the heap, the blocks below the cap left
  holes that steps of other graphs' sizes did not fill (bench/LOG.md).
- `release_if_grown` (after each CPU step) trims only when the heap's free memory grew by more than
  `HEAP_SLACK`, or is above `HEAP_KEPT_MAX` (a full-scale graph's step): a steady run reuses its
  holes, a run whose steps grew the heap gives it back.
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

M_TRIM_THRESHOLD = -1  # mallopt's parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 4 << 20  # about the memory of 1 MiB in 4% less time; 16 MiB: more memory (docs/scale.md)
MMAP_THRESHOLD_MAX = 32 << 20  # glibc's cap on 64-bit systems (mallopt refuses more)
PASS_HEADROOM = 2  # the threshold is this many times a pass's state tensor: its biggest temporaries fit
HEAP_SLACK = 64 << 20  # free heap memory kept for the next step; more is given back (`release_if_grown`)
# the most free heap memory a step leaves kept, whatever it grew from: steps on the real sample leave
# 110-220 MiB (kept: each step reuses it), a full-scale xla:random step 460-710 MiB, which the next
# steps, of other graphs' sizes, mostly did not reuse (its training peaked at 1.96 GB with it kept,
# 1.76 GB with it trimmed: bench/LOG.md)
HEAP_KEPT_MAX = 256 << 20
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


class _Heap:
    """What `bound_cpu_heap` set in this process: the threshold now (0: not bounded here)."""

    threshold = 0
    free_after_step = -1  # the heap's free bytes after the first step since the last trim (-1: none yet)


def bound_cpu_heap() -> bool:
    """`fix_mmap_threshold` where its fresh pages are huge pages (see the module docstring) and the
    user set no `MALLOC_MMAP_THRESHOLD_` of their own; True when it was fixed. The top of the heap
    is then kept up to `HEAP_SLACK` (glibc would give back all but 128 KiB of it at every free)."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or os.environ.get(TORCH_HUGE_PAGES) != "1":
        return False
    if not (huge_pages_available() and fix_mmap_threshold()):
        return False
    _Heap.threshold = MMAP_THRESHOLD
    libc = _libc()
    if libc is not None:
        libc.mallopt(M_TRIM_THRESHOLD, HEAP_SLACK)
    return True


def fit_mmap_threshold(pass_bytes: int) -> bool:
    """Where `bound_cpu_heap` fixed the threshold: set it to `PASS_HEADROOM` times the bytes of one
    pass's (configs, nodes, hidden) states, at least `MMAP_THRESHOLD`, so the pass's tensors come
    from the heap and the next pass reuses them; where that is above glibc's cap, `MMAP_THRESHOLD`:
    such a pass's states get their own pages (see the module docstring). True when the threshold is
    that now.

    Args:
        pass_bytes: the bytes of one (configs, nodes, hidden) state tensor of the pass.
    """
    if not _Heap.threshold:
        return False
    want = PASS_HEADROOM * pass_bytes
    want = max(MMAP_THRESHOLD, want) if want <= MMAP_THRESHOLD_MAX else MMAP_THRESHOLD
    if want != _Heap.threshold:
        if not fix_mmap_threshold(want):
            return False
        _Heap.threshold = want
    return True


class _MallInfo2(ctypes.Structure):
    _fields_ = [  # noqa: RUF012  (glibc's struct mallinfo2, malloc.h)
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def heap_free_bytes() -> int | None:
    """The bytes glibc's heaps hold free (mallinfo2's fordblks, glibc 2.33+; None elsewhere)."""
    libc = _libc()
    fn = getattr(libc, "mallinfo2", None) if libc is not None else None
    if fn is None:
        return None
    fn.restype = _MallInfo2
    return int(fn().fordblks)


def release_if_grown(slack: int = HEAP_SLACK, kept_max: int = HEAP_KEPT_MAX) -> bool:
    """After a step: `release_free_memory` when the heap's free memory grew by more than `slack`
    since the first step after the last trim, or is above `kept_max` (always where it cannot be
    read); True when it trimmed.

    A step frees all it allocated, so the heap then holds that step's working memory free: the
    next step of the same size takes it again, and a trim would only hand the kernel pages to
    fault in again (the sys time of a step). What grows beyond that (a bigger graph's step, holes
    the next steps cannot reuse) is given back once it exceeds `slack`, and the next step sets
    the new reference. Above `kept_max` nothing is kept: a full-scale graph's step leaves that
    much, and the next steps, of other graphs' sizes, leave most of it unused while they take more."""
    free = heap_free_bytes()
    if free is None:
        return release_free_memory()
    if free > kept_max:
        _Heap.free_after_step = -1
        return release_free_memory()
    if _Heap.free_after_step < 0:
        _Heap.free_after_step = free
        return False
    if free <= _Heap.free_after_step + slack:
        return False
    _Heap.free_after_step = -1
    return release_free_memory()
