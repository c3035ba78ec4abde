"""How many threads a multi-threaded step takes: LightGBM the cores usable now, never more than
asked; torch a count that never follows the load (its float sums would)."""

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


def test_torch_threads_follow_the_data_and_the_affinity_never_the_load(
    four_cores: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    import psutil

    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: 75.0)  # 3 of the 4 cores busy
    assert workers.usable_cores() == 1
    assert workers.neural_threads(small=True) == 1
    assert workers.neural_threads(small=False) == 4
    assert workers.model_threads(4) == 4  # as it trained
    assert workers.model_threads(1) == 1
    assert workers.model_threads(None) == 1  # a checkpoint from before the count was kept
    assert workers.model_threads(4, most=3) == 3  # beside LightGBM's one
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert workers.affinity_cores() == 2
    assert workers.neural_threads(small=False) == 2
    assert workers.model_threads(4) == 2  # at most the cores this process may use


def test_torch_threads_give_the_count_back() -> None:
    torch = pytest.importorskip("torch")
    before = torch.get_num_threads()
    want = 1 if before > 1 else 2
    with workers.torch_threads(want):
        assert torch.get_num_threads() == want
    assert torch.get_num_threads() == before
    with pytest.raises(KeyError), workers.torch_threads(want):
        raise KeyError("a failure inside")
    assert torch.get_num_threads() == before
