"""tpurank.core.memory: the heap's free pages go back to the system between training steps.

Its effect on memory is measured at full scale (bench/runs/bench_scale.py,
bench/runs/bench_gnn_memory.py, docs/scale.md); a small heap here gives free pages back on its own,
so these check that the call runs where it can, and where the trainer makes it.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tpurank.core.config_build import from_dict
from tpurank.core.memory import release_free_memory
from tpurank.core.paths import Paths
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.training import loop
from tpurank.gnn.training.collection import train_collection


def test_malloc_trim_runs_on_linux() -> None:
    assert release_free_memory() is sys.platform.startswith("linux")


def test_cpu_training_checks_the_heap_after_every_step_and_frees_it_after_validation(
    tiny_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation's freed tensors are given back before the next step: without it, a step stacked
    its own tensors on that heap (a 3.6 GB peak where steps alone reached 2.6 GB, docs/scale.md).
    After a step the heap is given back only where it grew (`release_if_grown`)."""
    events: list[str] = []
    evaluate, step = loop.evaluate, loop.train_step

    def logged(name: str, fn):
        def run(*args, **kwargs):
            events.append(name)
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(loop, "evaluate", logged("validation", evaluate))
    monkeypatch.setattr(loop, "train_step", logged("step", step))
    monkeypatch.setattr(loop, "release_free_memory", lambda: events.append("free") or True)
    monkeypatch.setattr(loop, "release_if_grown", lambda: events.append("grown?") or False)
    paths = Paths(data=tiny_paths.data, out=tmp_path)
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "prepared").symlink_to(tiny_paths.prepared, target_is_directory=True)
    gnn = {"hidden": 8, "layers": 1, "max_steps": 4, "eval_every": 2, "seeds": 1, "configs_per_graph": 4}
    cfg = from_dict({"gnn": gnn})
    train_collection(gnn_model.SPEC, paths, cfg, "layout:xla:random", progress=False)
    assert events.count("validation") == 2 and events.count("step") == 4
    for i, e in enumerate(events[:-1]):
        if e in ("step", "validation"):
            # every step is followed by the check, every validation by a trim
            assert events[i + 1] == ("grown?" if e == "step" else "free"), events


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_a_step_trims_only_when_the_heap_grew(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first step after a trim sets the reference; steps that leave as much free memory as it
    (they reuse it) trim nothing; one that leaves more than the slack beyond it trims, and the next
    step sets a new reference."""
    from tpurank.core import memory

    free = iter([100, 100 + memory.HEAP_SLACK, 101 + memory.HEAP_SLACK, 50, 60])
    monkeypatch.setattr(memory, "heap_free_bytes", lambda: next(free))
    trims: list[int] = []
    monkeypatch.setattr(memory, "release_free_memory", lambda: trims.append(1) or True)
    monkeypatch.setattr(memory._Heap, "free_after_step", -1)
    assert [memory.release_if_grown() for _ in range(5)] == [False, False, True, False, False]
    assert trims == [1]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_a_step_that_leaves_more_than_the_most_kept_always_trims(monkeypatch: pytest.MonkeyPatch) -> None:
    """Above `HEAP_KEPT_MAX` free, every step trims, the first after a trim too (a full-scale graph's
    steps); below it the growth rule decides again, from a new reference."""
    from tpurank.core import memory

    big = memory.HEAP_KEPT_MAX + 1
    free = iter([big, big, 100, 100 + memory.HEAP_SLACK + 1])
    monkeypatch.setattr(memory, "heap_free_bytes", lambda: next(free))
    monkeypatch.setattr(memory, "release_free_memory", lambda: True)
    monkeypatch.setattr(memory._Heap, "free_after_step", -1)
    assert [memory.release_if_grown() for _ in range(4)] == [True, True, False, True]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallinfo2")
def test_the_heap_free_memory_is_read_from_glibc() -> None:
    from tpurank.core import memory

    free = memory.heap_free_bytes()
    assert free is None or free >= 0  # None on a glibc older than 2.33


@pytest.mark.parametrize(
    ("bounded", "pass_bytes", "threshold"),
    [
        (True, 1 << 20, 4 << 20),  # small passes keep the 4 MiB floor
        (True, 7_300_000, 14_600_000),  # a 256-config pass's states: twice them
        (True, 16 << 20, 32 << 20),  # up to glibc's cap
        (True, (16 << 20) + 1, 4 << 20),  # above it: the floor, the states get their own pages
        (True, 100 << 20, 4 << 20),  # a full-scale graph's pass: the same
        (False, 7_300_000, 0),  # not bounded here (a user's own threshold, no huge pages): left alone
    ],
)
def test_the_threshold_follows_the_pass(
    bounded: bool, pass_bytes: int, threshold: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpurank.core import memory

    set_to: list[int] = []
    monkeypatch.setattr(memory, "fix_mmap_threshold", lambda n: set_to.append(n) or True)
    monkeypatch.setattr(memory._Heap, "threshold", memory.MMAP_THRESHOLD if bounded else 0)
    assert memory.fit_mmap_threshold(pass_bytes) is bounded
    assert memory._Heap.threshold == threshold
    assert set_to == ([threshold] if bounded and threshold != memory.MMAP_THRESHOLD else [])


# A freed 16 MB block raises glibc's dynamic mmap threshold; the 8 MB block after it then comes
# from the heap, and a small block allocated above it keeps its pages there once it is freed.
_HEAP_HOLE = """
import ctypes, sys
from pathlib import Path
from tpurank.core.memory import fix_mmap_threshold
if sys.argv[1] == "fixed":
    assert fix_mmap_threshold()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
def rss_mb():
    return int(Path("/proc/self/statm").read_text().split()[1]) * 4096 / 2**20
def block(mb):
    p = libc.malloc(mb << 20)
    ctypes.memset(p, 1, mb << 20)  # touched: resident
    return p
libc.free(block(16))
hole = block(8)
keep = libc.malloc(64)
before = rss_mb()
libc.free(hole)
print(before - rss_mb())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
@pytest.mark.parametrize("threshold", ["dynamic", "fixed"])
def test_fixed_mmap_threshold_gives_a_freed_tensor_back(threshold: str) -> None:
    """With the threshold fixed, the freed 8 MB block leaves resident memory at once; with glibc's
    dynamic one it stays (what made CPU training's peak grow: docs/scale.md)."""
    import subprocess

    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    out = subprocess.run(
        [sys.executable, "-c", _HEAP_HOLE, threshold], capture_output=True, text=True, env=env, check=True
    )
    returned_mb = float(out.stdout)
    assert returned_mb >= 7.5 if threshold == "fixed" else returned_mb < 0.5


def test_cpu_runtime_bounds_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    from tpurank.gnn import device

    calls: list[int] = []
    monkeypatch.setattr(device, "bound_cpu_heap", lambda: calls.append(1) or True)
    monkeypatch.setattr(device, "pick_device", lambda local: __import__("torch").device("cpu"))
    assert device.setup_runtime().device.type == "cpu" and calls == [1]


@pytest.mark.parametrize(
    ("env", "huge_pages", "fixed"),
    [
        ({"THP_MEM_ALLOC_ENABLE": "1"}, True, True),
        ({"THP_MEM_ALLOC_ENABLE": "1"}, False, False),  # 4 KB page faults: 1.6x slower steps
        ({}, True, False),  # torch was not asked for huge pages
        ({"THP_MEM_ALLOC_ENABLE": "1", "MALLOC_MMAP_THRESHOLD_": "65536"}, True, False),  # the user's own
    ],
)
def test_the_threshold_is_fixed_only_with_huge_pages(
    env: dict[str, str], huge_pages: bool, fixed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpurank.core import memory

    for key in ("THP_MEM_ALLOC_ENABLE", "MALLOC_MMAP_THRESHOLD_"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(memory, "huge_pages_available", lambda: huge_pages)
    calls: list[int] = []
    monkeypatch.setattr(memory, "fix_mmap_threshold", lambda: calls.append(1) or True)
    assert memory.bound_cpu_heap() is fixed and len(calls) == fixed


@pytest.mark.parametrize(
    "setting", ["always [madvise] never", "[always] madvise never", "always madvise [never]"]
)
def test_torch_is_asked_for_huge_pages_where_the_kernel_gives_them(
    setting: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tpurank.core import memory

    monkeypatch.delenv("THP_MEM_ALLOC_ENABLE", raising=False)
    (tmp_path / "enabled").write_text(setting + "\n")
    monkeypatch.setattr(memory, "THP_SETTING", tmp_path / "enabled")
    memory.ask_torch_for_huge_pages()
    assert (os.environ.get("THP_MEM_ALLOC_ENABLE") == "1") is ("[never]" not in setting)


def test_memory_is_released_between_the_steps_of_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """`all` runs its steps in one process: after each (pipeline.run_steps), pyarrow's pool is
    emptied and glibc's heap trimmed."""
    import pyarrow as pa

    from tpurank.core import memory

    released: list[str] = []
    pool = pa.default_memory_pool()
    monkeypatch.setattr(pa, "default_memory_pool", lambda: released.append("arrow") or pool)
    monkeypatch.setattr(memory, "release_free_memory", lambda: released.append("trim") or True)
    assert memory.release_between_steps() is True
    assert released == ["arrow", "trim"]
