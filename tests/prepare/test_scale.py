"""Real-scale behaviour: the packed cache, its version, work-dir placement, and a disk that fills up.

The disk-full tests mount a small tmpfs (root only; skipped with the reason elsewhere), fill it in
the middle of `prepare` and `features`, and check the one-line error, that nothing half-written is
left for a rerun to trust, and that a rerun with space ends byte-identical to a clean run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
import zipfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import sample_files

from tpurank.cli import main as cli_main
from tpurank.core.config import Config
from tpurank.core.lock import LOCK_NAME
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.dataset import GraphFile, classify_path
from tpurank.data.npz import load_graph
from tpurank.prepare.build import BuildParams, build_graph
from tpurank.prepare.cache import CACHE_FORMAT, INDEX_FILE, load_prepared, prepared_path, save_prepared
from tpurank.prepare.node_features import FeatureRule
from tpurank.prepare.stage import prepare_dataset
from tpurank.prepare.store import META_MEMBER

ALL_COLUMNS = FeatureRule(keep=list(range(140)), fitted_on=0, train_key="")


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: p.parent.parent.name + "/" + p.stem[:16])
def test_packed_cache_round_trips_every_original_config(path: Path, tmp_path: Path) -> None:
    """Every original config, runtime and index map of each real sample file survives the packed,
    shuffled cache exactly (configs compared on the varying configurable nodes, as int8)."""
    collection, split = classify_path(path)
    gf = GraphFile(collection, split, path.stem, path)
    built, _ = build_graph(gf, BuildParams(1, False, ALL_COLUMNS))
    save_prepared(tmp_path / "g.tpg", built, key="k", keep=ALL_COLUMNS.keep)
    g = load_prepared(tmp_path / "g.tpg")
    raw = load_graph(path)
    configs = np.asarray(g.configs)
    np.testing.assert_array_equal(g.node_map, built.node_map)
    np.testing.assert_array_equal(g.edge_index, built.edge_index)
    np.testing.assert_array_equal(g.node_feat_raw, raw.node_feat[g.node_map])
    if g.kind == "tile":
        np.testing.assert_array_equal(configs[g.inverse], raw.config_feat)
        expect = raw.config_runtime / raw.config_runtime_normalizers
        np.testing.assert_array_equal(g.config_runtime, expect)
    else:
        varying = np.isin(raw.node_config_ids, g.node_map[g.config_nodes])
        original = raw.node_config_feat[:, varying].astype(np.int8)
        np.testing.assert_array_equal(configs[g.inverse], original)
        np.testing.assert_array_equal(g.config_runtime, raw.config_runtime.astype(np.float64))
    # per unique row: count and mean over the original configs that map to it
    np.testing.assert_array_equal(np.bincount(g.inverse, minlength=g.num_unique), g.count)
    sums = np.bincount(g.inverse, weights=g.config_runtime, minlength=g.num_unique)
    np.testing.assert_allclose(g.runtime_mean, sums / np.maximum(g.count, 1))


def test_cache_is_smaller_than_the_real_npz(sample_root: Path, tmp_path: Path) -> None:
    """The whole prepared cache of the real sample is at most 1.5x its npz bytes (was 15x)."""
    paths = Paths(sample_root, tmp_path)
    result = prepare_dataset(paths, Config(), jobs=1, progress=False)
    assert not result.failed
    npz = sum(p.stat().st_size for p in (sample_root / NPZ_SUBDIR).rglob("*.npz"))
    cache = sum(p.stat().st_size for p in paths.prepared.rglob("*") if p.is_file())
    assert cache <= 1.5 * npz, (cache, npz)


def _set_format(path: Path, version: int) -> None:
    """Rewrite a cache file's meta.json with another format number (what an older tpurank wrote)."""
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    meta = json.loads(members[META_MEMBER])
    meta["format"] = version
    members[META_MEMBER] = json.dumps(meta).encode()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


def test_an_old_cache_version_is_rebuilt(tiny_root: Path, tmp_path: Path) -> None:
    paths = Paths(tiny_root, tmp_path)
    first = prepare_dataset(paths, Config(), collections=["layout:xla:random"], jobs=1, progress=False)
    row = first.index.iloc[0]
    target = prepared_path(paths.prepared, row["collection"], row["split"], row["stem"])
    _set_format(target, CACHE_FORMAT - 1)
    stale_npz = target.with_name("older.npz")  # a format-2 file (.npz) whose input is gone
    stale_npz.write_bytes(b"format 2")
    with pytest.raises(Exception, match="format"):
        load_prepared(target)
    again = prepare_dataset(paths, Config(), collections=["layout:xla:random"], jobs=1, progress=False)
    assert again.built == 1 and again.reused == len(first.index) - 1
    assert load_prepared(target).id == row["id"] and not stale_npz.exists()


def test_work_dir_holds_the_intermediates(tmp_path: Path) -> None:
    paths = Paths.resolve(tmp_path / "data", tmp_path / "out", tmp_path / "work")
    assert paths.prepared == tmp_path / "work/features/prepared"
    assert paths.tabular == tmp_path / "work/features/tabular"
    assert paths.models == tmp_path / "out/models" and paths.submissions == tmp_path / "out/submissions"
    assert Paths.resolve(tmp_path, tmp_path / "out").prepared == tmp_path / "out/features/prepared"


# ----------------------------------------------------------------------------- a disk that fills up


def _mount_tmpfs(where: Path, size: int) -> None:
    where.mkdir(parents=True, exist_ok=True)
    try:
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", f"tpurank-{uuid.uuid4().hex[:8]}", str(where)],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as e:
        pytest.skip(f"cannot mount a small tmpfs to fill up (needs root): {e}")


def _grow(where: Path, size: int) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(where)], check=True, capture_output=True)


@pytest.fixture
def small_disk(tmp_path: Path):
    mounts: list[Path] = []

    def make(where: Path, size: int) -> Path:
        _mount_tmpfs(where, size)
        mounts.append(where)
        return where

    yield make
    for m in mounts:
        subprocess.run(["umount", "-l", str(m)], capture_output=True)


def _tree(root: Path) -> dict[str, bytes]:
    """Every file under root but the output lock (an empty file a run keeps; tpurank.core.lock)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != LOCK_NAME
    }


def _temporary(root: Path) -> list[Path]:
    """Temporary files (hidden names) left under root; the output lock is not one."""
    return [p for p in root.rglob(".*") if p.is_file() and p.name != LOCK_NAME]


def _cache_files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*.tpg"))


def _meta_diff(a: bytes, b: bytes) -> dict:
    """The meta.json entries in which two cache files differ (says why a byte comparison failed)."""
    import io
    import json
    import zipfile

    ma, mb = (json.loads(zipfile.ZipFile(io.BytesIO(x)).read("meta.json")) for x in (a, b))
    out = {}
    for k in ma.keys() | mb.keys():
        va, vb = ma.get(k), mb.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):  # the index row: name the fields that differ
            out.update(
                {f"{k}.{f}": (va.get(f), vb.get(f)) for f in va.keys() | vb.keys() if va.get(f) != vb.get(f)}
            )
        elif va != vb:
            out[k] = (va, vb)
    return out


def _common(data: Path, out: Path) -> list[str]:
    return ["--data-dir", str(data), "--out-dir", str(out)]


def test_prepare_on_a_full_disk_fails_in_one_line_and_resumes_identically(
    tiny_root: Path, tmp_path: Path, small_disk, capsys
) -> None:
    clean = tmp_path / "clean"
    assert cli_main(["prepare", "--jobs", "1", "--no-progress", *_common(tiny_root, clean)]) == 0
    full_size = sum(len(b) for b in _tree(clean / "features/prepared").values())
    capsys.readouterr()

    out = tmp_path / "full"
    disk = small_disk(out / "features", full_size // 2)
    assert cli_main(["prepare", "--jobs", "1", "--no-progress", *_common(tiny_root, out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no space left" in err[0] and str(disk) in err[0], err
    assert not _temporary(disk)  # no temporary file left behind
    done = _cache_files(disk)
    assert 0 < len(done) < len(_cache_files(clean))
    for f in done:  # what is there is complete: it loads and matches the clean run's file
        assert f.read_bytes() == (clean / "features" / f.relative_to(disk)).read_bytes()

    _grow(disk, 4 * full_size + (1 << 20))
    assert cli_main(["prepare", "--jobs", "1", "--no-progress", *_common(tiny_root, out)]) == 0
    capsys.readouterr()
    assert _tree(disk / "prepared").keys() == _tree(clean / "features/prepared").keys()
    for rel, data in _tree(clean / "features/prepared").items():
        if rel.endswith(".tpg"):
            resumed = _tree(disk / "prepared")[rel]
            assert resumed == data, (rel, _meta_diff(resumed, data))
    pd.testing.assert_frame_equal(
        pd.read_parquet(disk / "prepared" / INDEX_FILE),
        pd.read_parquet(clean / "features" / "prepared" / INDEX_FILE),
    )


def test_features_on_a_full_disk_fails_in_one_line_and_resumes_identically(
    tiny_paths: Paths, tmp_path: Path, small_disk, capsys
) -> None:
    work = tmp_path / "work"
    shutil.copytree(tiny_paths.prepared, work / "features/prepared")
    clean = tmp_path / "clean"
    shutil.copytree(tiny_paths.prepared, clean / "features/prepared")
    args = ["features", "--collections", "tile:xla", "layout:xla:random"]
    assert cli_main([*args, *_common(tiny_paths.data, clean)]) == 0
    tables = clean / "features/tabular"
    size = sum(len(b) for b in _tree(tables).values())
    capsys.readouterr()

    disk = small_disk(work / "features/tabular", size // 2)
    assert cli_main([*args, *_common(tiny_paths.data, tmp_path / "out"), "--work-dir", str(work)]) == 1
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]  # not the progress bars
    assert len(err) == 1 and "no space left" in err[0] and str(disk) in err[0], err
    assert not _temporary(disk)
    _grow(disk, 4 * size + (1 << 20))
    assert cli_main([*args, *_common(tiny_paths.data, tmp_path / "out"), "--work-dir", str(work)]) == 0
    capsys.readouterr()
    for rel, data in _tree(tables).items():
        if not rel.endswith(".json"):  # the sidecars hold timings and timestamps
            assert _tree(disk)[rel] == data, rel
