"""The synthetic cost model's effects that no tabular feature computes directly, each on a tiny
hand-built graph, and the ranking-difficulty comparison with the real sample."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tpurank.core.paths import NPZ_SUBDIR
from tpurank.synth import generate
from tpurank.synth.cost_model import LayoutCostModel, measure, program_noise
from tpurank.synth.hlo_builder import Builder
from tpurank.synth.physics import REFERENCE


def _cfg(n: int, rows: int = 1) -> np.ndarray:
    return np.full((rows, n, 18), -1, dtype=np.int8)


def _chain(budget: int):
    """param -> dot -> `budget` elementwise ops -> dot."""
    b = Builder(np.random.default_rng(0), etype="f32")
    y = b.chain(b.dot(b.param((512, 384)), 384), budget)
    return b.finish([b.dot(y, 256)])


def test_a_forced_copy_also_breaks_fusion_of_the_producers_chain() -> None:
    """Mismatched producer/consumer layouts cost a copy, and more when a long elementwise chain
    then runs unfused: the penalty grows with the chain, which no feature sees."""

    def penalty(budget: int, fused_share: float) -> float:
        g = _chain(budget)
        cfg = _cfg(2, 2)
        cfg[1, 1, 6:8] = [0, 1]  # the consumer asks for its input column-major: a copy
        cost = LayoutCostModel(g, replace(REFERENCE, fused_share=fused_share)).cost(cfg)
        return float(cost[1] - cost[0])

    copy = 512 * 384 * 4 * 2 / 800.0
    assert penalty(2, 1.0) == pytest.approx(penalty(12, 1.0))  # without fusion: the copy only
    assert penalty(2, 1.0) >= copy
    assert penalty(2, 0.3) > penalty(2, 1.0)  # the copy breaks fusion: the chain's traffic comes back
    assert penalty(12, 0.3) > penalty(2, 0.3)  # the longer the chain, the dearer the mismatch


def _attention():
    """k = dot(x) -> transpose -> the kernel operand of an attention dot."""
    b = Builder(np.random.default_rng(0), etype="f32")
    x = b.param((4, 256, 384))
    q, k = b.dot(x, 384), b.dot(x, 384)
    kt = b.transpose(k, (0, 2, 1))
    s = b.batched_dot(q, kt, (4, 256, 256), 2, 1)
    return b.finish([s])


def test_layouts_propagate_through_transposes() -> None:
    g = _attention()
    att = g.configurable[2]
    assert (att.k_src, att.k_perm) == (1, (0, 2, 1))  # the kernel is k's output, dims renamed
    model = LayoutCostModel(g)
    cfg = _cfg(3, 4)
    cfg[:, 1, 0:3] = [1, 2, 0]  # k written with minor dim 1 (seq), then 2, then 0
    cfg[1, 2, 12:15] = [2, 1, 0]  # kernel asks for the same layout with dims renamed: a bitcast
    cfg[2, 2, 12:15] = [1, 2, 0]  # the literal producer layout: a real transpose (copy)
    cfg[3, 2, 12:15] = [1, 0, 2]  # something else: a copy too
    cost = model.cost(cfg)
    assert cost[1] == pytest.approx(cost[0])  # default kernel = propagated layout, no copy
    # the literal producer layout (what a feature comparing layouts digit by digit calls "no
    # copy") pays the transpose; it saves the kernel-orientation penalty of cost[0], not the copy
    assert cost[2] > cost[1] and cost[3] > cost[1]


def test_an_output_against_the_mxu_order_costs_a_transpose() -> None:
    b = Builder(np.random.default_rng(0), etype="f32")
    g = b.finish([b.dot(b.param((512, 384)), 256)])
    cfg = _cfg(1, 2)
    cfg[1, 0, 0:2] = [0, 1]  # output column-major while the input streams contraction-minor
    cost = LayoutCostModel(g).cost(cfg)
    assert cost[1] > cost[0]  # 512x256 f32 pads the same in both layouts: only the transpose differs


def test_program_noise_is_repeatable_and_jitter_is_small() -> None:
    cost = np.array([1e6, 1e6, 2e6, 1e6 + 1.0] * 500)
    z = program_noise(cost)
    assert z[0] == z[1] == z[4] and z[0] != z[3]  # the same program, the same deviation
    assert abs(np.std(program_noise(np.arange(1, 20001) * 1e3)) - 1.0) < 0.05
    rt = measure(cost, np.random.default_rng(0)).astype(float)
    same = rt[cost == 1e6]
    assert same.max() / same.min() - 1 < 2e-4  # re-measurement jitter only (~2e-5)
    dev = np.log(measure(np.arange(1, 20001) * 1e5, np.random.default_rng(1)) / (np.arange(1, 20001) * 1e5))
    assert abs(dev.std() - REFERENCE.program_sigma) < 0.2 * REFERENCE.program_sigma


def test_a_tree_of_another_generator_version_is_regenerated(tmp_path: Path, capsys) -> None:
    stale = tmp_path / NPZ_SUBDIR / "tile/xla/test/stale.npz"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"old")
    (tmp_path / "synth.json").write_text(json.dumps({"scale": "tiny", "synth_seed": 0}))  # version 1
    generate(tmp_path, "tiny", 0, collections=["tile:xla"], splits=["test"])
    assert not stale.exists()
    assert "regenerating" in capsys.readouterr().err
    assert len(list(tmp_path.rglob("*.npz"))) == 4
    assert json.loads((tmp_path / "synth.json").read_text())["generator"] >= 3


def test_difficulty_table_on_the_real_sample(sample_root: Path) -> None:
    from tpurank.models.difficulty import COLUMNS, difficulty_rows, difficulty_table

    rows = difficulty_rows(sample_root, seeds=1)
    assert [(r["task"], r["side"].split()[0]) for r in rows] == [
        ("layout xla default", "real"),
        ("layout xla default", "synthetic"),
        ("tile (pb kernels)", "real"),
        ("tile (pb kernels)", "synthetic"),
    ]
    real_layout, real_tile = rows[0], rows[2]
    assert real_layout["spread"] == pytest.approx(1.0163, abs=1e-3)  # unet_3d.4x4.bf16: 1.6% spread
    assert 0.95 < real_layout["distinct"] < 1.0  # a few exact ties among 1965 runtimes
    assert abs(real_layout["tau_random"]) < 0.1
    assert real_tile["graphs"] == 5 and real_tile["tau_lgbm"] > real_tile["tau_random"]
    for r in rows:
        assert all(np.isfinite(r[c]) for c in COLUMNS), r
    table = difficulty_table(rows).splitlines()
    assert table[0].startswith("| task | data |") and len(table) == 2 + 6 + 2
    distance = [line.split(" | ") for line in table if "| distance |" in line]
    assert len(distance) == 2  # one per task: a ratio for spread and CV, differences for the taus
    assert distance[0][3].startswith("x") and distance[0][-1].strip(" |")[0] in "+-"
    assert table[-1].startswith("difficulty: ") and " of 6 synthetic taus within 0.1" in table[-1]


def test_difficulty_needs_the_real_pair(tmp_path: Path, capsys) -> None:
    from tpurank.cli import main

    (tmp_path / NPZ_SUBDIR / "tile/xla/train").mkdir(parents=True)
    assert main(["compare-synth", "--real", str(tmp_path), "--difficulty-seeds", "-1"]) == 1
    assert "must be 0 or more" in capsys.readouterr().err
    # the statistics table needs only some npz files; the difficulty table needs the xla pair
    from tpurank.models.difficulty import difficulty_rows

    with pytest.raises(Exception, match="unet3d.npz: missing"):
        difficulty_rows(tmp_path, seeds=1)
