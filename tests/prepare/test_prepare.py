"""The prepare stage's parts: pruning, node features, deduplication and the cache format (the
stage itself: test_prepare_stage.py).

Most checks run on the real sample files (skipped where ../shared is absent); expected values are
recomputed independently in the test (plain BFS, np.unique, pandas groupby), except the distinct
config count of unet_3d.4x4.bf16 (1469 of 1965) which the issue states.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from graph_checks import assert_same_graph, assert_same_graph_field, bfs

from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.dataset import GraphFile, classify_path
from tpurank.data.npz import load_graph
from tpurank.prepare.build import BuildParams, build_graph
from tpurank.prepare.cache import (
    FIELD_NAMES,
    SUMMARY_OPCODE,
    PreparedGraph,
    load_prepared,
    save_prepared,
)
from tpurank.prepare.node_features import FeatureRule, column_range, fit_rule, transform
from tpurank.prepare.prune import prune

UNET = "layout/xla/default/valid/unet_3d.4x4.bf16.npz"
NLP_TEST = "layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"  # a node of degree 1486
TILE_VALID = "tile/xla/valid/inception_v3_batch_128_train_426e203f19335d17.npz"
ALL_COLUMNS = FeatureRule(keep=list(range(140)), fitted_on=0, train_key="")


def graph_file(sample_root: Path, rel: str) -> GraphFile:
    path = sample_root / NPZ_SUBDIR / rel
    collection, split = classify_path(path)
    return GraphFile(collection, split, path.stem, path)


def build(sample_root: Path, rel: str, hops: int = 1, collapse: bool = False) -> PreparedGraph:
    return build_graph(graph_file(sample_root, rel), BuildParams(hops, collapse, ALL_COLUMNS))[0]


PER_UNIQUE = ("configs", "runtime_min", "runtime_mean", "count")


def assert_equivalent(a: PreparedGraph, b: PreparedGraph) -> None:
    """Same graph up to the order of its unique configs: equal for every ORIGINAL config."""
    for name in FIELD_NAMES:
        if name in (*PER_UNIQUE, "inverse"):
            x, y = np.asarray(getattr(a, name)), np.asarray(getattr(b, name))
            if name != "inverse":
                assert x.dtype == y.dtype and np.array_equal(x[a.inverse], y[b.inverse]), name
        else:
            assert_same_graph_field(a, b, name)


# ----------------------------------------------------------------------------- dedup


def test_dedup_unet_finds_1469_of_1965_and_keeps_runtimes(sample_root: Path) -> None:
    g = build(sample_root, UNET)
    raw = load_graph(sample_root / NPZ_SUBDIR / UNET)
    assert (g.num_configs, g.num_unique) == (1965, 1469)
    assert g.count.sum() == 1965 and g.count.min() >= 1
    # every original config maps to a row equal to it on the varying nodes, which are exact int8
    varying = np.isin(raw.node_config_ids, g.node_map[g.config_nodes])
    assert g.configs.dtype == np.int8
    np.testing.assert_array_equal(g.configs[g.inverse].astype(np.float32), raw.node_config_feat[:, varying])
    # dropped nodes never vary; kept ones do
    fixed = raw.node_config_feat[:, ~varying]
    assert (fixed == fixed[:1]).all()
    assert all(len(np.unique(raw.node_config_feat[:, j], axis=0)) > 1 for j in np.flatnonzero(varying))
    # min / mean / count per unique row, recomputed with pandas
    stats = (
        pd.DataFrame({"u": g.inverse, "y": raw.config_runtime})
        .groupby("u")["y"]
        .agg(["min", "mean", "count"])
    )
    np.testing.assert_array_equal(g.runtime_min, stats["min"].to_numpy())
    np.testing.assert_allclose(g.runtime_mean, stats["mean"].to_numpy(), rtol=1e-12)
    np.testing.assert_array_equal(g.count, stats["count"].to_numpy())
    np.testing.assert_array_equal(g.config_runtime, raw.config_runtime)  # every measurement, as scored


def test_test_file_inverse_reproduces_every_original_config(sample_root: Path) -> None:
    g = build(sample_root, NLP_TEST)
    raw = load_graph(sample_root / NPZ_SUBDIR / NLP_TEST, config_dtype=np.int8)
    flat = raw.node_config_feat.reshape(raw.num_configs, -1)
    _, first, ref_inverse = np.unique(flat, axis=0, return_index=True, return_inverse=True)
    assert g.is_test and len(g.inverse) == raw.num_configs == 1001
    assert g.num_unique == len(first) == 988
    # duplicates (and only duplicates) share a row, so they get identical scores
    pairs = pd.crosstab(g.inverse, ref_inverse.ravel())
    assert ((pairs > 0).sum(axis=1) == 1).all() and ((pairs > 0).sum(axis=0) == 1).all()
    assert not g.runtime_min.any() and not g.runtime_mean.any()


def test_tile_runtimes_are_normalized(sample_root: Path) -> None:
    g = build(sample_root, TILE_VALID)
    raw = load_graph(sample_root / NPZ_SUBDIR / TILE_VALID)
    np.testing.assert_array_equal(g.configs[g.inverse], raw.config_feat)
    y = raw.config_runtime / raw.config_runtime_normalizers
    np.testing.assert_array_equal(g.runtime_min, pd.Series(y).groupby(g.inverse).min().to_numpy())
    np.testing.assert_array_equal(g.config_runtime, y)
    assert g.config_nodes.size == 0 and g.configs.dtype == np.float32


# ----------------------------------------------------------------------------- prune


@pytest.mark.parametrize("hops", [0, 1, 2, 3])
@pytest.mark.parametrize("graph", [UNET, NLP_TEST])
def test_prune_keeps_exactly_the_khop_neighbourhood(sample_root: Path, graph: str, hops: int) -> None:
    raw = load_graph(sample_root / NPZ_SUBDIR / graph, config_dtype=np.int8)
    p = prune(raw.num_nodes, raw.edge_index, raw.node_config_ids, hops)
    expected = bfs(raw.num_nodes, raw.edge_index, raw.node_config_ids, hops)
    assert set(p.node_map.tolist()) == expected and p.num_summary == 0
    assert set(raw.node_config_ids.tolist()) <= expected
    # the kept edges are exactly the original edges between kept nodes, directions intact
    inside = np.isin(raw.edge_index, p.node_map).all(axis=1)
    original = {tuple(e) for e in raw.edge_index[inside].tolist()}
    assert {tuple(e) for e in p.node_map[p.edge_index].tolist()} == original
    assert len(p.edge_index) == len(original)


@pytest.mark.parametrize("leaves", [127, 128, 256, 300])
def test_prune_reaches_a_hub_with_many_configurable_neighbours(leaves: int) -> None:
    # a hub whose many neighbours are all seeds: a count of reached neighbours must not wrap around
    edges = np.array([[i, leaves] for i in range(leaves)])
    p = prune(leaves + 1, edges, np.arange(leaves), hops=1)
    assert p.num_nodes == leaves + 1


def test_prune_negative_hops_keeps_everything(sample_root: Path) -> None:
    raw = load_graph(sample_root / NPZ_SUBDIR / UNET, config_dtype=np.int8)
    p = prune(raw.num_nodes, raw.edge_index, raw.node_config_ids, -1)
    np.testing.assert_array_equal(p.node_map, np.arange(raw.num_nodes))
    np.testing.assert_array_equal(p.edge_index, raw.edge_index)


def test_collapse_turns_each_removed_run_into_one_summary_node() -> None:
    # 0 <- 1 <- 2 <- 3 <- 4 (row [user, operand]) and a separate 5 <- 6; configurable: 0 and 4, 5
    edges = np.array([[1, 0], [2, 1], [3, 2], [4, 3], [6, 5]])
    p = prune(7, edges, np.array([0, 4, 5]), hops=0, collapse=True)
    assert p.node_map.tolist() == [0, 4, 5, -1, -1]  # kept, then summaries by smallest member (1, 6)
    assert p.num_summary == 2
    assert sorted(map(tuple, p.edge_index.tolist())) == [(1, 3), (3, 0), (4, 2)]


def test_collapse_preserves_connectivity_of_kept_nodes(sample_root: Path) -> None:
    raw = load_graph(sample_root / NPZ_SUBDIR / UNET, config_dtype=np.int8)
    p = prune(raw.num_nodes, raw.edge_index, raw.node_config_ids, hops=1, collapse=True)
    real = p.node_map >= 0
    # two kept nodes are connected after collapsing exactly when they were connected originally
    seeds = raw.node_config_ids[:5]
    for s in seeds:
        before = bfs(raw.num_nodes, raw.edge_index, [s], hops=raw.num_nodes) & set(p.node_map[real].tolist())
        pos = int(np.flatnonzero(p.node_map == s)[0])
        after = bfs(p.num_nodes, p.edge_index.astype(np.int64), [pos], hops=p.num_nodes)
        assert set(p.node_map[sorted(after)][real[sorted(after)]].tolist()) == before
    g = build(sample_root, UNET, hops=1, collapse=True)
    assert (g.node_opcode == SUMMARY_OPCODE).sum() == p.num_summary > 0
    assert not g.node_feat_raw[g.node_map < 0].any()


# ----------------------------------------------------------------------------- node features


def test_transform_repads_layout_and_log_scales() -> None:
    raw = np.zeros((3, 140), dtype=np.float32)
    raw[0, 21:23] = [8, 4]  # rank 2, layout {1, 0}
    raw[0, 134:136] = [1, 0]
    raw[0, 28] = 1e9  # a shape product
    raw[1, 21:26] = [2, 0, 0, 0, 3]  # rank 5 (a zero-sized dim inside still counts)
    raw[2, 29] = 3  # rank 0 (a tuple)
    t = transform(raw)
    np.testing.assert_array_equal(t[0, 134:140], [1, 0, -1, -1, -1, -1])
    np.testing.assert_array_equal(t[1, 134:140], [0, 0, 0, 0, 0, -1])
    np.testing.assert_array_equal(t[2, 134:140], [-1] * 6)
    assert t[0, 28] == pytest.approx(np.log1p(1e9), rel=1e-6)
    assert t[0, 21] == pytest.approx(np.log(9.0), rel=1e-6)


def test_rule_drops_columns_constant_over_train_only() -> None:
    a = np.zeros((4, 140), dtype=np.float32)
    b = np.zeros((2, 140), dtype=np.float32)
    a[:, 0] = [0, 1, 0, 1]  # varies inside one file
    b[:, 5] = 7  # constant inside each file but differs between files
    a[:, 133] = 2
    b[:, 133] = 2  # constant everywhere
    rule = fit_rule([column_range(a), column_range(b)], train_key="k")
    assert 0 in rule.keep and 5 in rule.keep and 133 not in rule.keep
    assert rule.apply(a).shape == (4, len(rule.keep))


# ----------------------------------------------------------------------------- cache format


def test_cache_round_trip_is_exact(sample_root: Path, tmp_path: Path) -> None:
    g = build(sample_root, UNET)
    save_prepared(tmp_path / "g.tpg", g, key="k", shuffle=False)
    h = load_prepared(tmp_path / "g.tpg")
    assert_same_graph(g, h)
    # stored shuffled (what prepare writes): a permutation of the unique rows, the same for every
    # original config, and the features recomputed from the raw ones with the kept columns
    keep = [0, 5, 21, 134]
    save_prepared(tmp_path / "s.tpg", g, key="k", keep=keep)
    s = load_prepared(tmp_path / "s.tpg")
    assert not np.array_equal(np.asarray(s.configs), np.asarray(g.configs))
    assert sorted(s.count.tolist()) == sorted(g.count.tolist())
    assert_equivalent(replace(g, node_feat=transform(g.node_feat_raw)[:, keep]), s)
    dtypes = {
        "node_feat": np.float32,
        "node_feat_raw": np.float32,
        "node_opcode": np.uint8,
        "edge_index": np.int32,
        "node_map": np.int64,
        "config_nodes": np.int32,
        "configs": np.int8,
        "runtime_min": np.float64,
        "runtime_mean": np.float64,
        "count": np.int32,
        "inverse": np.int32,
        "config_runtime": np.float64,
    }
    assert {k: getattr(h, k).dtype for k in dtypes} == {k: np.dtype(v) for k, v in dtypes.items()}
    assert isinstance(h.is_test, bool) and h.id == "layout:xla:default:unet_3d.4x4.bf16"
    assert h.configs.shape == (1469, len(h.config_nodes), 18)
