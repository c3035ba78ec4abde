"""The generator's physics drawn per dataset, the effects no feature restates, and the realism
statistics of `compare-synth` (how far synthetic runtimes and rankings sit from the real ones)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tpurank.core.paths import synthetic_scale
from tpurank.synth import generate
from tpurank.synth.cost_model import LayoutCostModel, measure, pad_table
from tpurank.synth.graph_families import layout_graph
from tpurank.synth.hlo_builder import Builder
from tpurank.synth.layout_space import LayoutSpace
from tpurank.synth.physics import REFERENCE, draw_physics
from tpurank.synth.realism import _dup_noise, distance, layout_runtime_stats, realism_table
from tpurank.synth.tile_cost import tile_cost


def _cfg(n: int, rows: int = 1) -> np.ndarray:
    return np.full((rows, n, 18), -1, dtype=np.int8)


def test_physics_is_a_pure_function_of_the_seed_and_varies_across_seeds() -> None:
    assert draw_physics(3) == draw_physics(3)
    drawn = [draw_physics(s) for s in range(40)]
    mxu = np.array([p.mxu_input_penalty for p in drawn])
    assert 1.0 <= mxu.min() < 1.1 and 1.3 < mxu.max() <= 1.4  # from no penalty to a strong one
    assert {p.pad_mode for p in drawn} == {"linear", "granule", "steps"}
    lanes = np.array([p.lane_weight for p in drawn])
    assert lanes.min() < 0.5 and lanes.max() > 1.0
    noise = np.array([p.noise_sigma for p in drawn])
    assert noise.min() >= 2e-6 and noise.max() <= 6e-5  # real duplicate configs: 2e-6 to 6e-5
    assert all(np.isfinite(p.cache_bytes) and p.cache_cliff >= 1.0 for p in drawn)


def test_synth_json_records_the_drawn_physics(tmp_path: Path) -> None:
    generate(tmp_path, "tiny", seed=5, collections=["tile:xla"], splits=["test"])
    record = json.loads((tmp_path / "synth.json").read_text())
    assert record["physics"] == json.loads(json.dumps(draw_physics(5).as_dict()))
    assert record["physics"]["seed"] == 5 and record["generator"] >= 3
    assert synthetic_scale(tmp_path) == "tiny"


def test_padding_weight_and_steps_change_the_charge() -> None:
    shape = (4096, 130)  # 130 on the lanes: 256 / 130 = 1.97x in linear mode
    linear = pad_table(shape, 4)[1, 0]
    assert linear == pytest.approx(256 / 130 * 4096 / 4096)
    light = pad_table(shape, 4, replace(REFERENCE, lane_weight=0.5))[1, 0]
    assert light == pytest.approx(np.sqrt(256 / 130))
    steps = pad_table(shape, 4, replace(REFERENCE, pad_mode="steps", step=1.5))[1, 0]
    assert steps == pytest.approx(2.25)  # 1.97 rounded up to a power of 1.5
    granule = pad_table((4096, 200), 4, replace(REFERENCE, pad_mode="granule", granule=4))[1, 0]
    assert granule == pytest.approx(512 / 200)  # lanes fetched 512 at a time
    assert pad_table((4096, 256), 4, replace(REFERENCE, pad_mode="steps"))[1, 0] == 1.0


def _one_dot():
    b = Builder(np.random.default_rng(0), etype="f32")
    return b.finish([b.dot(b.param((512, 384)), 256)])


def test_the_mxu_penalty_is_drawn_so_no_fixed_flag_weight_is_right() -> None:
    """The same input layout (contracted dimension not minor) costs more under one physics and
    nothing more under another: a feature's fixed MXU flag is not the cost."""
    g = _one_dot()
    cfg = _cfg(1, 2)
    cfg[1, 0, 6:8] = [0, 1]  # input read with the contracted dim (1) second-minor
    plain = {"result_transpose": 0.0, "copy_weight": 0.0}
    with_penalty = LayoutCostModel(g, replace(REFERENCE, mxu_input_penalty=1.4, **plain)).cost(cfg)
    without = LayoutCostModel(g, replace(REFERENCE, mxu_input_penalty=1.0, **plain)).cost(cfg)
    assert with_penalty[1] > with_penalty[0]
    assert without[1] == pytest.approx(without[0], rel=1e-12)  # 512 x 384 pads alike either way


def test_a_cache_threshold_makes_a_step_not_a_slope() -> None:
    """Padding pushes an op's working set over the dataset's cache size: its memory time jumps."""
    b = Builder(np.random.default_rng(0), etype="f32")
    g = b.finish([b.dot(b.param((4096, 3)), 3)])
    cfg = _cfg(1, 2)
    cfg[1, 0, 0:2] = cfg[1, 0, 6:8] = [0, 1]  # input and output column-major: 4096 on the lanes
    # row-major: 3 on the lanes, padded 42x: input + output ~4.2 MB; column-major ~0.26 MB
    base = replace(REFERENCE, result_transpose=0.0, copy_weight=0.0)
    free = LayoutCostModel(g, base).cost(cfg)
    model = LayoutCostModel(g, replace(base, cache_bytes=1.0e6, cache_cliff=3.0))
    cliff = model.cost(cfg)
    assert cliff[0] - model.base == pytest.approx(3.0 * (free[0] - model.base), rel=0.01)  # a step
    assert cliff[1] == pytest.approx(free[1])  # under the threshold: unchanged


def _pair():
    """param -> dot -> dot: the second reads the first's output."""
    b = Builder(np.random.default_rng(0), etype="f32")
    return b.finish([b.dot(b.dot(b.param((512, 384)), 384), 256)])


def test_neighbouring_output_layouts_interact() -> None:
    """The neighbour effect charges by both nodes' output layouts together: changing the
    consumer's output costs something else depending on what the producer wrote."""
    g = _pair()
    table = ((0.0, 0.5, 0.0), (0.0, 0.0, 0.0), (0.0, 0.0, 0.0))
    ph = replace(REFERENCE, neighbour_cost=table, result_transpose=0.0, copy_weight=0.0)
    cfg = _cfg(2, 4)
    cfg[1, 1, 0:2] = [0, 1]  # consumer's output column-major (role 1), producer row-major (role 0)
    cfg[2, 0, 0:2] = [0, 1]  # producer column-major alone
    cfg[3, :, 0:2] = [0, 1]  # both column-major
    hidden = LayoutCostModel(g, ph).cost(cfg)
    plain = LayoutCostModel(g, replace(ph, neighbour_cost=REFERENCE.neighbour_cost)).cost(cfg)
    extra = hidden - plain
    assert extra[1] > 0  # (producer role 0, consumer role 1) costs 0.5 passes over the input
    assert extra[0] == extra[2] == extra[3] == 0.0  # the other combinations are free here
    assert extra[1] == pytest.approx(0.5 * 512 * 384 * 4 / 800.0)


def test_per_graph_deviations_follow_the_graph_not_the_file() -> None:
    ph = draw_physics(1)
    cfg = _cfg(2, 3)
    cfg[1, 0, 0:2] = [0, 1]
    cfg[2, 1, 6:8] = [0, 1]
    a, b = LayoutCostModel(_pair(), ph).cost(cfg), LayoutCostModel(_pair(), ph).cost(cfg)
    np.testing.assert_array_equal(a, b)  # the same graph: the same hidden deviations
    other = LayoutCostModel(_pair(), replace(ph, seed=2)).cost(cfg)
    assert not np.allclose(a, other)  # another dataset: another deviation


def test_tile_physics_changes_which_tile_wins() -> None:
    from tpurank.synth.graph_families import tile_graph
    from tpurank.synth.layout_configs import sample_tiles

    g = tile_graph(np.random.default_rng(11), 12)
    tiles = sample_tiles(g.root_shape, np.random.default_rng(4), 40, g.root_etype_bytes)
    best = {int(np.argmin(tile_cost(g, tiles, draw_physics(seed)))) for seed in range(12)}
    assert len(best) > 1  # no single tile rule is right for every dataset


def test_measurement_noise_follows_the_datasets_sigma() -> None:
    cost = np.full(20000, 1e9)
    for sigma in (3e-6, 5e-5):
        ph = replace(REFERENCE, noise_sigma=sigma, noise_df=5.0, program_sigma=0.0)
        rt = measure(cost, np.random.default_rng(0), physics=ph).astype(float)
        assert np.std(np.log(rt / 1e9)) == pytest.approx(sigma, rel=0.15)


def test_realism_statistics_of_duplicates_and_rules() -> None:
    rt = np.array([100.0, 101.0, 200.0, 200.0, 300.0])
    inverse = np.array([0, 0, 1, 1, 2])
    sd01 = np.std(np.log([100.0, 101.0]), ddof=1)
    assert _dup_noise(rt, inverse) == pytest.approx(np.median([sd01, 0.0]))
    assert np.isnan(_dup_noise(rt, np.arange(5)))
    assert distance(0.3, 0.1, "ratio") == ("x3", pytest.approx(1.0))
    shown, size = distance(0.25, 0.1, "tau")
    assert shown == "+0.150" and size == pytest.approx(1.5)
    assert distance(np.nan, 0.1, "tau") == ("-", None)
    # a heuristic that orders nothing (every config sets every node) scores 0, not NaN
    feat = np.zeros((5, 2, 18), dtype=np.int8)
    node_feat = np.zeros((2, 140), dtype=np.float32)
    stats = layout_runtime_stats(feat, rt, node_feat, np.array([34, 75]), np.arange(5))
    assert stats["tau_heuristic"] == 0.0 and stats["spread"] == pytest.approx(2.0)


def test_realism_table_has_a_distance_column_and_a_summary(tiny_root: Path, sample_root: Path) -> None:
    from tpurank.synth.compare import TILE_PB, runtime_records, tree_stats

    real = runtime_records(tree_stats(sample_root, progress=False), sample_root / TILE_PB)
    synth = runtime_records(tree_stats(tiny_root, progress=False))
    # the real sample's duplicate configs: log-sd 2e-6 (unet3d) and 1.1e-5 (unet_3d.4x4.bf16)
    noise = sorted(r["dup_noise"] for r in real if r["collection"] == "layout:xla:default")
    assert noise[0] == pytest.approx(2.06e-6, rel=0.05) and noise[1] == pytest.approx(1.14e-5, rel=0.05)
    assert sum(r["split"] == "pb" for r in real) == 15  # the tile protobuf's kernels
    lines = realism_table(synth, real).splitlines()
    assert lines[0] == "| group | statistic | synthetic | real | distance | real in synthetic range |"
    rows = {
        tuple(c.strip() for c in line.split("|")[1:3]): line.split("|")[5].strip() for line in lines[2:-2]
    }
    assert rows[("tile", "runtime CV")].startswith("x")
    assert rows[("layout random", "runtime CV")] == "-"  # the real random file: 20 identical configs
    assert lines[-1].startswith("runtime and ranking: ") and " statistics with real data within " in lines[-1]


def test_compare_synth_prints_one_summary_line(tiny_root: Path, sample_root: Path, capsys) -> None:
    from tpurank.cli import main

    args = ["compare-synth", "--real", str(sample_root), "--synthetic", str(tiny_root)]
    assert main([*args, "--difficulty-seeds", "0"]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("summary: runtime and ranking: ")


@pytest.mark.parametrize("seed", [0, 1, 2, 7])
def test_a_childs_cost_from_its_parents_terms_equals_a_full_evaluation_bit_for_bit(seed: int) -> None:
    rng = np.random.default_rng(seed)
    graph = layout_graph(rng, ("xla", "nlp")[seed % 2], 1500, 80)
    space = LayoutSpace(graph.configurable, rng)
    model = LayoutCostModel(graph, draw_physics(seed) if seed else None)
    parents = space.random(rng, 200)
    kids = space.mutate(rng, parents)
    child = model.child_state(model.state(parents), parents, kids)
    full = model.state(kids)
    for a, b in zip(child.arrays(), full.arrays(), strict=True):
        assert np.array_equal(a, b)
    assert model.totals(child).tobytes() == model.cost(kids).tobytes()
