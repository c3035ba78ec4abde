"""The cheap pieces of bench/runs/calibration_ceiling.py and calibration_weights.py, the evidence of what
few measured configs can do; the benchmarks themselves read the real sample and saved fits."""

from __future__ import annotations

import numpy as np
import pytest
from helpers import bench_on_path

bench_on_path()
import calibration_ceiling as ceiling  # noqa: E402
import calibration_weights as weights  # noqa: E402


def test_configs_of_the_same_values_merge_at_their_mean_runtime() -> None:
    x = np.array([[1, 2], [3, 4], [1, 2], [0, 0]])
    unique, runtime = ceiling.merged(x, np.array([10, 5, 20, 7]))
    assert unique.tolist() == [[0, 0], [1, 2], [3, 4]]
    assert runtime.tolist() == [7.0, 15.0, 5.0]


@pytest.mark.parametrize("n", [50, 200])
def test_a_fit_on_its_own_configs_finds_the_order_they_hold(n: int) -> None:
    rng = np.random.default_rng(0)
    x = rng.integers(0, 5, size=(400, 6)).astype(np.float32)
    ordered = np.exp(x[:, 0] + 0.5 * x[:, 1])  # the runtime follows two config values
    assert ceiling.fitted_tau(x, ordered, n, draw=0) > 0.6
    noise = rng.random(400) + 1  # nothing to find
    assert abs(ceiling.fitted_tau(x, noise, n, draw=0)) < 0.2


def test_fixed_weights_follow_the_members_order() -> None:
    class Saved:
        members = ["gnn", "lgbm"]
        weights = np.array([0.5, 0.5])

    r = Saved()
    out = weights.fixed(r, 0.25)
    assert out.weights.tolist() == [0.75, 0.25]  # LightGBM's 0.25, the GNN the rest, in the saved order
    assert r.weights.tolist() == [0.5, 0.5]  # the saved record is left as it was
