"""Calibration's fits side by side (tpurank.rank.fits): each lane's fits in order, every result by
its key, torch's threads one meanwhile and its generator and thread count left as they were."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from tpurank.core.errors import TpurankError
from tpurank.rank import fits


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_lanes_run_in_order_side_by_side_and_leave_torch_as_found(
    cores: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fits, "affinity_cores", lambda: cores)
    caller, order, threads = threading.get_ident(), [], {}

    def fit(key: str) -> tuple[str, int]:
        time.sleep(0.02)
        order.append(key)
        threads[key] = threading.get_ident()
        torch.manual_seed(7)  # a GNN fit seeds the generator; the caller's is kept
        return key, torch.get_num_threads()

    lanes = [
        [("a1", lambda: fit("a1")), ("a2", lambda: fit("a2"))],
        [("b", lambda: fit("b"))],
        [("c", lambda: fit("c"))],
    ]
    before_threads, before_rng = torch.get_num_threads(), torch.random.get_rng_state()
    done = fits.run_lanes(lanes)
    assert done == {k: (k, 1) for k in ("a1", "a2", "b", "c")}  # one torch thread each
    assert order.index("a1") < order.index("a2") and threads["a1"] == threads["a2"]
    assert len(set(threads.values())) == fits.width(len(lanes)) == min(cores, 3)
    assert (caller in threads.values()) is (cores == 1)
    assert torch.get_num_threads() == before_threads
    assert torch.equal(torch.random.get_rng_state(), before_rng)


def test_a_failing_fit_raises_in_the_caller_after_the_others_end(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fits, "affinity_cores", lambda: 2)
    ended = []

    def fails() -> None:
        raise TpurankError("LightGBM calibration failed (a reason)")

    def slow() -> None:
        time.sleep(0.05)
        ended.append(True)

    with pytest.raises(TpurankError, match="calibration failed"):
        fits.run_lanes([[("slow", slow)], [("fails", fails)]])
    assert ended == [True]
