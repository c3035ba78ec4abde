"""`Tuning.propose(n, explore)`'s exploring share: one config from each equal slice of the predicted
order of those not measured, seeded."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.tune.tuner import spread


@pytest.mark.parametrize(("n", "k"), [(100, 3), (10, 10), (7, 3), (1000, 1)])
def test_one_place_from_each_slice_in_order(n: int, k: int) -> None:
    got = spread(n, k, np.random.default_rng(0))
    edges = np.linspace(0, n, k + 1).round()
    assert len(got) == k and got == sorted(got) and len(set(got)) == k
    assert all(lo <= g < hi for g, lo, hi in zip(got, edges[:-1], edges[1:], strict=True))


def test_the_draw_repeats_for_a_seed_and_differs_for_another() -> None:
    assert spread(500, 4, np.random.default_rng(1)) == spread(500, 4, np.random.default_rng(1))
    assert spread(500, 4, np.random.default_rng(1)) != spread(500, 4, np.random.default_rng(2))
