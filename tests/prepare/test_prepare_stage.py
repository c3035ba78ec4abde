"""The prepare stage on tiny data (runs in CI): the index, resuming, a scoped run, bad files, a
killed run, the process pool, the feature rule fitted on train files only, and excluded graphs."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from graph_checks import assert_same_graph, bfs

from tpurank.cli import main as cli_main
from tpurank.core.config import Config
from tpurank.core.lock import LOCK_NAME
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.dataset import GraphFile, discover
from tpurank.data.npz import load_graph, save_graph
from tpurank.prepare.cache import (
    INDEX_FILE,
    iter_prepared,
    load_prepared,
    read_index,
)
from tpurank.prepare.node_features import FeatureRule, transform
from tpurank.prepare.prune import prune
from tpurank.prepare.stage import prepare_dataset

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
