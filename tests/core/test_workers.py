"""How many threads a multi-threaded step takes: the cores usable now, never more than asked."""

from __future__ import annotations

import os

import pytest

from tpurank.core import workers


@pytest.fixture
def four_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    """A machine of 4 cores this process may all use, with no $OMP_NUM_THREADS (and no count kept)."""
    workers.cores_now.cache_clear()
    monkeypatch.setattr(os, "cpu_count", lambda: 4)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


@pytest.mark.parametrize(
    ("busy_percent", "omp", "want"),
    [
        (0.0, "", 4),
        (25.0, "", 3),
        (60.0, "", 2),
        (100.0, "", 1),
        (0.0, "1", 1),
        (0.0, "2", 2),
        (50.0, "3", 2),
        (0.0, "junk", 4),
    ],
)
def test_threads_follow_the_free_cores_and_omp_num_threads(
    four_cores: None, monkeypatch: pytest.MonkeyPatch, busy_percent: float, omp: str, want: int
) -> None:
    import psutil

    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: busy_percent)
    if omp:
        monkeypatch.setenv("OMP_NUM_THREADS", omp)
    assert workers.usable_cores() == want
    assert workers.lgbm_threads(0) == want
    workers.cores_now.cache_clear()
    assert workers.lgbm_threads(3) == 3  # a number the user set is kept


def test_a_real_sample_of_the_machine_gives_a_usable_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    got = workers.usable_cores(sample_s=0.05)
    assert 1 <= got <= len(os.sched_getaffinity(0))
    assert workers.usable_cores(sample_s=0) == len(os.sched_getaffinity(0))
