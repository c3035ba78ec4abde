"""bench/runs/bench_gnn_pace.py: its candidates are the real graph's configs resampled per node, and its
report turns each run's counts into rates and per-pair speed-ups (the runs themselves, minutes on
two checkouts, are the bench's, not the suite's)."""

from __future__ import annotations

import argparse

import numpy as np
from helpers import bench_on_path, prepared_graph

from tpurank.gnn.data import from_prepared

bench_on_path()
import bench_gnn_pace  # noqa: E402
import pace_worker  # noqa: E402


def test_candidates_take_each_node_s_values_from_the_real_configs() -> None:
    g = from_prepared(prepared_graph("layout", seed=1))
    c = pace_worker.candidates(g, 50, seed=3)
    assert c.configs.shape == (50, *g.configs.shape[1:]) and c.num_unique == 50 and c.is_test
    real = np.asarray(g.configs)
    for node in range(real.shape[1]):  # every node's row is one of that node's real rows
        seen = {tuple(r) for r in real[:, node]}
        assert all(tuple(r) in seen for r in c.configs[:, node])
    again = pace_worker.candidates(g, 50, seed=3)
    assert np.array_equal(c.configs, again.configs)  # the same candidates in both checkouts


def run(seconds: float, configs: int = 1000, **kw: float) -> dict:
    return {"seconds": seconds, "configs": configs, "user_s": 2.0, "sys_s": 0.1, "peak_rss_gb": 0.5, **kw}


def test_the_report_gives_rates_and_per_pair_speedups() -> None:
    runs = {
        "score": {
            "head": [run(1.0, flops_per_config=9e6, costs=[1.0, 2.0, 3.0])] * 2,
            "against": [run(3.0, flops_per_config=5e6, costs=[1.0, 2.5, 3.0])] * 2,
        },
        "train": {
            "head": [run(2.0, steps=10, flops_per_config=1e7)],
            "against": [run(5.0, steps=10, flops_per_config=1e7)],
        },
    }
    runs["score"]["head"] = [dict(r) for r in runs["score"]["head"]]
    runs["score"]["against"] = [dict(r) for r in runs["score"]["against"]]
    peak = {"peak_1t": 50.0, "peak_2t": 100.0, "model_shape": 60.0}
    out = bench_gnn_pace.report(runs, peak, "a" * 40, argparse.Namespace(threads=2, lanes=1))
    score = out["summary"]["score"]
    assert score["speedups"] == [3.0, 3.0] and score["kendall_tau_head_vs_against"] == 1.0
    assert score["flops_per_config"] == 5e6  # counted at --against, for both sides
    assert score["median"]["head"]["gflops"] == 5.0 and score["median"]["head"]["share_of_peak"] == 0.05
    assert out["summary"]["train"]["speedups"] == [2.5]
    assert out["runs"]["train"]["head"][0]["steps_per_s"] == 5.0
    assert "costs" not in out["runs"]["score"]["head"][0] and out["provenance"]["command"]
