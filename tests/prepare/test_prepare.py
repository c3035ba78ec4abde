"""The prepare stage: pruning, node features, deduplication, the cache format and the stage itself.

Most checks run on the real sample files (skipped where ../shared is absent); expected values are
recomputed independently in the test (plain BFS, np.unique, pandas groupby), except the distinct
config count of unet_3d.4x4.bf16 (1469 of 1965) which the issue states.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections import deque
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tpurank.cli import main as cli_main
from tpurank.core.config import Config
from tpurank.core.lock import LOCK_NAME
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.dataset import GraphFile, classify_path, discover
from tpurank.data.npz import load_graph, save_graph
from tpurank.prepare.build import BuildParams, build_graph
from tpurank.prepare.cache import (
    FIELD_NAMES,
    INDEX_FILE,
    SUMMARY_OPCODE,
    PreparedGraph,
    iter_prepared,
    load_prepared,
    read_index,
    save_prepared,
)
from tpurank.prepare.node_features import FeatureRule, column_range, fit_rule, transform
from tpurank.prepare.prune import prune
from tpurank.prepare.stage import prepare_dataset

UNET = "layout/xla/default/valid/unet_3d.4x4.bf16.npz"
NLP_TEST = "layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"  # a node of degree 1486
NLP_TEST = "layout/nlp/default/test/3a0c5517a87df8d82fd637b83298a3ba.npz"
TILE_VALID = "tile/xla/valid/inception_v3_batch_128_train_426e203f19335d17.npz"
ALL_COLUMNS = FeatureRule(keep=list(range(140)), fitted_on=0, train_key="")


def graph_file(sample_root: Path, rel: str) -> GraphFile:
    path = sample_root / NPZ_SUBDIR / rel
    collection, split = classify_path(path)
    return GraphFile(collection, split, path.stem, path)


def build(sample_root: Path, rel: str, hops: int = 1, collapse: bool = False) -> PreparedGraph:
    return build_graph(graph_file(sample_root, rel), BuildParams(hops, collapse, ALL_COLUMNS))[0]


def assert_same_graph(a: PreparedGraph, b: PreparedGraph) -> None:
    for name in FIELD_NAMES:
        x, y = getattr(a, name), getattr(b, name)
        if name == "configs":  # a loaded graph's configs are a ConfigStore
            x, y = np.asarray(x), np.asarray(y)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), name
        else:
            assert x == y, name


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


def assert_same_graph_field(a: PreparedGraph, b: PreparedGraph, name: str) -> None:
    x, y = getattr(a, name), getattr(b, name)
    if isinstance(x, np.ndarray):
        assert x.dtype == y.dtype and np.array_equal(x, y), name
    else:
        assert x == y, name


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


def bfs(num_nodes: int, edges: np.ndarray, seeds: np.ndarray, hops: int) -> set[int]:
    """Plain breadth-first search over edges in both directions (independent of the code under test)."""
    nbrs: list[list[int]] = [[] for _ in range(num_nodes)]
    for u, v in edges.tolist():
        nbrs[u].append(v)
        nbrs[v].append(u)
    dist = {int(s): 0 for s in seeds}
    queue = deque(dist)
    while queue:
        x = queue.popleft()
        if dist[x] == hops:
            continue
        for y in nbrs[x]:
            if y not in dist:
                dist[y] = dist[x] + 1
                queue.append(y)
    return set(dist)


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


# ----------------------------------------------------------------------------- the stage (tiny data: runs in CI)


def link_tree(src_root: Path, dest: Path, keep=lambda gf: True) -> Path:
    """A dataset tree of symlinks to some of src_root's files (cheap; the source is never touched)."""
    for gf in discover(src_root / NPZ_SUBDIR):
        if keep(gf):
            target = dest / NPZ_SUBDIR / gf.path.relative_to(src_root / NPZ_SUBDIR)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(gf.path)
    return dest


def few(gf: GraphFile) -> bool:
    """A quick subset: every split of tile:xla and layout:xla:random."""
    return gf.collection in ("tile:xla", "layout:xla:random")


def test_stage_writes_index_and_resumes(tiny_root: Path, tmp_path: Path) -> None:
    paths = Paths(data=link_tree(tiny_root, tmp_path / "data", few), out=tmp_path / "out")
    files = discover(paths.npz)
    layout = sum(gf.kind == "layout" for gf in files)
    first = prepare_dataset(paths, Config(), jobs=1, progress=False)
    assert (first.built, first.reused, first.failed) == (len(files), 0, [])
    idx = read_index(paths.prepared)
    assert sorted(idx["id"]) == sorted(gf.id for gf in files)
    assert all((paths.prepared / p).is_file() for p in idx["path"])
    assert (idx["bytes"] == [(paths.prepared / p).stat().st_size for p in idx["path"]]).all()
    for gf in files:  # the index agrees with the files it describes
        row = idx.set_index("id").loc[gf.id]
        g = load_prepared(paths.prepared / row["path"])
        assert (row["configs"], row["configs_unique"], row["nodes_kept"]) == (
            g.num_configs,
            g.num_unique,
            g.num_nodes,
        )
        assert row["configs"] == load_graph(gf.path, config_dtype=np.int8).num_configs
    stems = [g.stem for g in iter_prepared(paths.prepared, "tile:xla", "test")]
    assert stems == sorted(gf.stem for gf in files if gf.collection == "tile:xla" and gf.split == "test")
    # the rule was fitted on the train files only and saved
    train = len(discover(paths.npz, splits=["train"]))
    assert first.rule.fitted_on == train and (paths.prepared / "node_feature_rule.json").is_file()
    assert (paths.prepared / "provenance.json").is_file()

    mtimes = {p: p.stat().st_mtime_ns for p in paths.prepared.rglob("*.tpg")}
    second = prepare_dataset(paths, Config(), jobs=1, progress=False)
    assert (second.built, second.reused) == (0, len(files))
    assert {p: p.stat().st_mtime_ns for p in paths.prepared.rglob("*.tpg")} == mtimes
    pd.testing.assert_frame_equal(second.index, first.index)

    # a changed parameter rebuilds the layout graphs only; a touched input rebuilds that one
    cfg = Config()
    cfg.prepare.hops = 2
    third = prepare_dataset(paths, cfg, jobs=1, progress=False)
    assert (third.built, third.reused) == (layout, len(files) - layout)
    touched = next(gf.path for gf in files if gf.split == "valid")
    content = touched.read_bytes()
    touched.unlink()
    touched.write_bytes(content)  # same bytes, new mtime (a copy replacing the symlink): reused
    fourth = prepare_dataset(paths, cfg, jobs=1, progress=False)
    assert (fourth.built, fourth.reused) == (0, len(files))
    with np.load(touched) as z:  # the same graph with its configs reordered: that graph rebuilds
        arrays = {k: z[k] for k in z.files}
    order = np.arange(len(arrays["config_runtime"]))[::-1]
    feat = "node_config_feat" if "node_config_feat" in arrays else "config_feat"  # layout or tile
    for name in (feat, "config_runtime", "config_runtime_normalizers"):
        if name in arrays:
            arrays[name] = arrays[name][order]
    np.savez(touched, **arrays)
    fifth = prepare_dataset(paths, cfg, jobs=1, progress=False)
    assert (fifth.built, fifth.reused) == (1, len(files) - 1)


def test_scoped_run_keeps_other_index_rows(tiny_root: Path, tmp_path: Path) -> None:
    paths = Paths(data=link_tree(tiny_root, tmp_path / "data", few), out=tmp_path / "out")
    prepare_dataset(paths, Config(), collections=["tile:xla"], jobs=1, progress=False)
    result = prepare_dataset(paths, Config(), collections=["layout:xla:random"], jobs=1, progress=False)
    assert sorted(set(result.index["collection"])) == ["layout:xla:random", "tile:xla"]
    assert len(result.index) == len(discover(paths.npz))


def test_bad_file_gets_one_line_and_nonzero_exit(tiny_root: Path, tmp_path: Path, capsys) -> None:
    root = link_tree(tiny_root, tmp_path / "data", few)
    good = discover(root / NPZ_SUBDIR)
    layout_file = next(gf.path for gf in good if gf.kind == "layout")
    bad = root / NPZ_SUBDIR / "tile/xla/test/broken.npz"
    bad.write_bytes(b"not a zip at all")
    truncated = root / NPZ_SUBDIR / "layout/xla/random/test/cut.npz"
    truncated.write_bytes(layout_file.read_bytes()[:2000])
    out_of_range = root / NPZ_SUBDIR / "layout/xla/random/valid/range.npz"
    g = load_graph(layout_file)
    g.node_config_feat[-1, 0, 7] = 9  # a valid zip whose streamed configs break the -1..5 rule
    save_graph(out_of_range, g)
    out = tmp_path / "out"
    rc = cli_main(["prepare", "--data-dir", str(root), "--out", str(out), "--jobs", "1", "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 1
    assert len(err) == 3 and "Traceback" not in "\n".join(err)
    for path, problem in [
        (bad, "not a readable npz"),
        (truncated, "not a readable npz"),
        (out_of_range, "-1..5"),
    ]:
        assert any(
            line.startswith(f"tpurank prepare: error: {path}: ") and problem in line for line in err
        ), path
    assert sorted(read_index(out)["id"]) == sorted(gf.id for gf in good)
    assert not (out / "tile/xla/test/broken.tpg").exists()


_SLOW_RUN = """
import sys, time
import tpurank.prepare.stage as stage
real = stage.build_file
def slow(*a, **k):
    row = real(*a, **k)
    time.sleep(0.5)  # give the test time to kill us between two outputs
    return row
stage.build_file = slow
from tpurank.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_killed_run_completes_on_rerun_identically(tiny_root: Path, tmp_path: Path) -> None:
    root = link_tree(tiny_root, tmp_path / "data", few)
    files = discover(root / NPZ_SUBDIR)
    killed, clean = tmp_path / "killed", tmp_path / "clean"
    args = ["prepare", "--data-dir", str(root), "--out", str(killed), "--jobs", "1", "--no-progress"]
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_RUN, *args], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while not any(not p.name.startswith(".") for p in killed.rglob("*.tpg")):
        assert proc.poll() is None and time.monotonic() < deadline, "prepare ended before it could be killed"
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    done = [p for p in killed.rglob("*.tpg") if not p.name.startswith(".")]
    assert 1 <= len(done) < len(files) and not (killed / INDEX_FILE).exists()
    stale = killed / "tile/xla/test/.x.tpg.x1y2.tmp.tpg"  # what a kill in mid-write leaves
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.write_bytes(b"partial")

    rerun = prepare_dataset(Paths(root, tmp_path), Config(), jobs=1, progress=False, out=killed)
    assert rerun.reused == len(done) and rerun.built == len(files) - len(done)
    reference = prepare_dataset(Paths(root, tmp_path), Config(), jobs=1, progress=False, out=clean)
    pd.testing.assert_frame_equal(rerun.index, reference.index)
    leftovers = [p for p in killed.rglob(".*") if p.name != LOCK_NAME]  # the lock file stays, unlocked
    assert not stale.exists() and not leftovers
    for gf in files:
        rel = Path(*gf.collection.split(":")) / gf.split / f"{gf.stem}.tpg"
        assert_same_graph(load_prepared(killed / rel), load_prepared(clean / rel))


@pytest.mark.slow
def test_process_pool_matches_single_process(tiny_root: Path, tmp_path: Path) -> None:
    root = link_tree(tiny_root, tmp_path / "data", lambda gf: gf.collection == "layout:xla:random")
    one = prepare_dataset(Paths(root, tmp_path), Config(), jobs=1, progress=False, out=tmp_path / "one")
    two = prepare_dataset(Paths(root, tmp_path), Config(), jobs=2, progress=False, out=tmp_path / "two")
    pd.testing.assert_frame_equal(one.index, two.index)
    pairs = zip(
        sorted((tmp_path / "one").rglob("*.tpg")), sorted((tmp_path / "two").rglob("*.tpg")), strict=True
    )
    for a, b in pairs:
        assert_same_graph(load_prepared(a), load_prepared(b))


def test_tiny_cache_covers_every_file(tiny_paths: Paths) -> None:
    files = discover(tiny_paths.npz)
    idx = read_index(tiny_paths.prepared)
    assert sorted(idx["id"]) == sorted(gf.id for gf in files)
    assert (idx["configs_unique"] <= idx["configs"]).all() and (idx["nodes_kept"] <= idx["nodes"]).all()
    assert (idx["configs_unique"] < idx["configs"]).any()  # the tiny data has duplicates to find


@pytest.mark.parametrize("hops", [0, 1, 2])
def test_prune_khop_on_every_tiny_layout_graph(tiny_root: Path, hops: int) -> None:
    for gf in discover(tiny_root / NPZ_SUBDIR, splits=["valid"]):
        if gf.kind == "layout":
            raw = load_graph(gf.path, config_dtype=np.int8)
            p = prune(raw.num_nodes, raw.edge_index, raw.node_config_ids, hops)
            assert set(p.node_map.tolist()) == bfs(raw.num_nodes, raw.edge_index, raw.node_config_ids, hops)


def test_feature_rule_is_fitted_on_train_files_only(tiny_paths: Paths) -> None:
    rule = FeatureRule.load(tiny_paths.prepared / "node_feature_rule.json")
    train = [
        transform(load_graph(gf.path, config_dtype=np.int8).node_feat)
        for gf in discover(tiny_paths.npz, splits=["train"])
    ]
    stacked = np.concatenate(train)
    expected = np.flatnonzero(stacked.max(axis=0) > stacked.min(axis=0)).tolist()
    assert rule.keep == expected and rule.fitted_on == len(train)
    for g in iter_prepared(tiny_paths.prepared, "layout:nlp:random", "test"):
        np.testing.assert_array_equal(g.node_feat, transform(g.node_feat_raw)[:, rule.keep])
        assert g.node_feat.shape[1] == len(expected) < 140


def test_default_jobs_are_capped_by_available_memory(monkeypatch) -> None:
    from types import SimpleNamespace

    from tpurank.prepare import pool as stage

    monkeypatch.setattr(stage.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(stage.psutil, "virtual_memory", lambda: SimpleNamespace(available=int(2.5 * 2**30)))
    assert stage.resolve_jobs(0) == 2  # 16 cores, but memory for two workers
    assert stage.resolve_jobs(5) == 5  # an explicit --jobs is taken as given
    # a small tree runs in this process (spawning workers would cost more than it saves), unless asked
    assert stage.resolve_jobs(0, stage.POOL_MIN_BYTES - 1) == 1 and stage.resolve_jobs(2, 1000) == 2
    assert stage.resolve_jobs(0, stage.POOL_MIN_BYTES) == 2
    monkeypatch.setattr(stage.psutil, "virtual_memory", lambda: SimpleNamespace(available=10))
    assert stage.resolve_jobs(0) == 1


def test_vectorised_unique_rows_match_the_streaming_ones() -> None:
    from tpurank.prepare.dedup import unique_rows, unique_rows_in_memory

    rng = np.random.default_rng(3)
    x = rng.integers(0, 3, size=(500, 24)).astype(np.float32)
    x[:, 3:] = 1.0  # 27 distinct rows among 500
    x[7] = -0.0 * x[7]  # -0.0 and 0.0 differ byte for byte, in both
    kept: list[np.ndarray] = []
    u, inverse = unique_rows([x[:200], x[200:]], kept.append)
    rows, inv = unique_rows_in_memory(x)
    assert len(rows) == u < 500
    np.testing.assert_array_equal(rows.view(np.uint32), np.concatenate(kept).view(np.uint32))
    np.testing.assert_array_equal(inv, inverse)


def test_varying_nodes_are_those_of_the_file(tiny_root: Path, tmp_path: Path) -> None:
    """dedup_layout marks a node varying when any unique row differs from the first one there
    (duplicated rows change nothing), and keeps exactly those nodes of each unique row."""
    from tpurank.prepare import dedup

    src = next(gf for gf in discover(tiny_root / NPZ_SUBDIR) if gf.kind == "layout")
    g = load_graph(src.path)
    twice = replace(
        g,
        node_config_feat=np.concatenate([g.node_config_feat, g.node_config_feat]),
        config_runtime=np.concatenate([g.config_runtime, g.config_runtime]),
    )
    path = tmp_path / "twice.npz"
    save_graph(path, twice)
    x = twice.node_config_feat
    truth = (x != x[0]).any(axis=(0, 2))
    d = dedup.dedup_layout(path, x.shape, twice.config_runtime.astype(np.float64))
    assert len(d.count) <= len(g.config_runtime) < len(x)
    np.testing.assert_array_equal(d.varying, truth)
    np.testing.assert_array_equal(np.asarray(d.configs)[d.inverse], x[:, truth].astype(np.int8))


def test_prepare_exclude_leaves_matching_train_graphs_out(tiny_root: Path, tmp_path: Path, capsys) -> None:
    """`prepare.exclude` (the 2nd place's unet rule): matching train graphs get no cache file and
    no say in the feature rule; valid and test graphs are never left out."""
    paths = Paths(data=link_tree(tiny_root, tmp_path / "data"), out=tmp_path / "out")
    train = [gf for gf in discover(paths.npz, ["layout:xla:default"]) if gf.split == "train"]
    valid = next(gf for gf in discover(paths.npz, ["layout:xla:default"]) if gf.split == "valid")
    cfg = Config()
    cfg.prepare.exclude = [f"layout:xla:default:{train[0].stem}", valid.stem]
    result = prepare_dataset(paths, cfg, jobs=1, progress=False)
    stems = set(result.index["stem"][result.index["collection"] == "layout:xla:default"])
    assert train[0].stem not in stems and valid.stem in stems
    assert result.rule.fitted_on == len(discover(paths.npz, splits=["train"])) - 1
    assert any("prepare.exclude left 1 train graph(s) out of training" in s for s in result.skipped)
