"""Content identity instead of timestamps: what `prepare`, `predict` and `infer` reuse or refuse."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from tpurank.cli import main
from tpurank.core.config import Config
from tpurank.core.declared import prepare_io
from tpurank.core.errors import DataError
from tpurank.core.identity import file_identity, regular_file, zip_identity
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.core.provenance import data_fingerprint
from tpurank.data.dataset import discover
from tpurank.prepare.build import BuildParams, build_file, build_key
from tpurank.prepare.cache import prepared_path
from tpurank.prepare.node_features import RULE_FILE, FeatureRule
from tpurank.prepare.stage import prepare_dataset


def reorder_configs(path: Path) -> None:
    """Rewrite an npz under its own name with its configs in reverse order (same size)."""
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    order = np.arange(len(arrays["config_runtime"]))[::-1]
    for name in ("node_config_feat", "config_feat", "config_runtime", "config_runtime_normalizers"):
        if name in arrays:
            arrays[name] = arrays[name][order]
    np.savez(path, **arrays)


def test_zip_identity_ignores_timestamps_and_sees_a_changed_member(tmp_path: Path) -> None:
    f = tmp_path / "g.npz"
    np.savez(f, a=np.arange(6), b=np.ones(3))
    first = zip_identity(f)
    os.utime(f, (1, 1))
    assert zip_identity(f) == first
    copy = tmp_path / "copy.npz"
    shutil.copyfile(f, copy)
    assert zip_identity(copy) == first
    np.savez(f, a=np.arange(6)[::-1], b=np.ones(3))  # same sizes, other bytes
    assert zip_identity(f) != first
    (tmp_path / "x.txt").write_text("abc")
    assert file_identity(tmp_path / "x.txt").startswith("b2:")


@pytest.mark.parametrize("make", ["fifo", "folder", "not a zip"])
def test_identity_refuses_what_it_cannot_name(tmp_path: Path, make: str) -> None:
    f = tmp_path / "x.npz"
    if make == "fifo":
        os.mkfifo(f)
    elif make == "folder":
        f.mkdir()
    else:
        f.write_bytes(b"PK not really")
    with pytest.raises(DataError, match=str(f)):
        file_identity(f)
    if make != "not a zip":
        with pytest.raises(DataError):
            regular_file(f)


def test_touch_and_copies_rebuild_nothing_a_content_change_rebuilds_that_graph(
    run_copy: Paths, tmp_path: Path
) -> None:
    files = discover(run_copy.npz)
    before = data_fingerprint(run_copy.data)
    for gf in files:
        os.utime(gf.path, (12345, 12345))
    result = prepare_dataset(run_copy, Config(), jobs=1, progress=False)
    assert (result.built, result.reused) == (0, len(files))
    assert data_fingerprint(run_copy.data) == before
    # a copy of the whole tree without its timestamps (as /kaggle/input gives one)
    copy = tmp_path / "copy"
    for f in run_copy.data.rglob("*"):
        if f.is_file():
            (copy / f.relative_to(run_copy.data)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, copy / f.relative_to(run_copy.data))
    moved = Paths(data=copy, out=run_copy.out)
    assert data_fingerprint(copy) == before
    result = prepare_dataset(moved, Config(), jobs=1, progress=False)
    assert (result.built, result.reused) == (0, len(files))
    changed = next(gf for gf in discover(copy / NPZ_SUBDIR) if gf.collection == "layout:nlp:default")
    reorder_configs(changed.path)
    assert data_fingerprint(copy) != before
    result = prepare_dataset(moved, Config(), jobs=1, progress=False)
    assert (result.built, result.reused) == (1, len(files) - 1)


def test_predict_refuses_a_cache_built_from_other_data(run_copy: Paths, capsys) -> None:
    """A test file rewritten under its own name after `prepare`: predict names it, exit 1, and the
    CSV it wrote before stays."""
    common = ["--data-dir", str(run_copy.data), "--out-dir", str(run_copy.out)]
    assert main(["predict", "--model", "random", "--split", "test", *common]) == 0
    csv = run_copy.submissions / "test_random.csv"
    before = csv.read_bytes()
    gf = next(g for g in discover(run_copy.npz, splits=["test"]) if g.collection == "layout:xla:random")
    reorder_configs(gf.path)
    capsys.readouterr()
    assert main(["predict", "--model", "random", "--split", "test", "--force", *common]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        f"{gf.path}: not the file the prepared cache was built from" in err
        and "rerun `tpurank prepare`" in err
    )
    assert csv.read_bytes() == before
    assert main(["prepare", "--jobs", "1", "--no-progress", *common]) == 0
    assert main(["predict", "--model", "random", "--split", "test", *common]) == 0


def test_predict_refuses_a_cache_file_rebuilt_without_its_index(run_copy: Paths, capsys) -> None:
    """What a `prepare` with new settings killed before writing the index leaves: a cache file
    whose build key no longer matches the index row."""
    gf = next(g for g in discover(run_copy.npz, splits=["valid"]) if g.collection == "layout:xla:default")
    rule = FeatureRule.load(run_copy.prepared / RULE_FILE)
    params = BuildParams(hops=4, collapse=False, rule=rule)
    target = prepared_path(run_copy.prepared, gf.collection, "valid", gf.stem)
    build_file(gf, params, target, key=build_key(prepare_io(run_copy), gf, params))
    common = ["--data-dir", str(run_copy.data), "--out-dir", str(run_copy.out)]
    capsys.readouterr()
    assert main(["predict", "--model", "random", "--split", "valid", "--force", *common]) == 1
    err = capsys.readouterr().err
    assert f"{target}: does not match" in err and "Traceback" not in err
