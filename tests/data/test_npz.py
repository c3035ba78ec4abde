"""The data layer: every real sample file loads; every kind of bad file gives one DataError line."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest
from helpers import sample_files
from runners import forked

from tpurank.core.errors import DataError
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.dataset import classify_path
from tpurank.data.npz import LayoutGraph, TileGraph, iter_rows, load_graph, save_graph, validate_file


def make_layout(rng: np.random.Generator | None = None, n: int = 12, nc: int = 3, c: int = 7) -> LayoutGraph:
    rng = rng or np.random.default_rng(0)
    edges = np.array([[i + 1, i] for i in range(n - 1)], dtype=np.int64)  # a chain: i+1 uses i
    return LayoutGraph(
        node_feat=rng.random((n, 140), dtype=np.float32),
        node_opcode=rng.integers(0, 121, n).astype(np.uint8),
        edge_index=edges,
        node_config_feat=rng.integers(-1, 6, (c, nc, 18)).astype(np.float32),
        node_config_ids=np.array([1, 4, 9], dtype=np.int64),
        config_runtime=rng.integers(1000, 2000, c).astype(np.int64),
        node_splits=np.array([[0, 5, n]], dtype=np.int64),
    )


def make_tile(n: int = 4, c: int = 6) -> TileGraph:
    rng = np.random.default_rng(1)
    return TileGraph(
        node_feat=rng.random((n, 140), dtype=np.float32),
        node_opcode=rng.integers(0, 121, n).astype(np.uint8),
        edge_index=np.array([[1, 0], [2, 1], [3, 2]], dtype=np.int64),
        config_feat=rng.integers(1, 64, (c, 24)).astype(np.float32),
        config_runtime=rng.integers(100, 200, c).astype(np.int64),
        config_runtime_normalizers=np.full(c, 150, dtype=np.int64),
    )


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> Path:
    np.savez_compressed(path, **arrays)
    return path


def as_arrays(g) -> dict[str, np.ndarray]:
    return {k: getattr(g, k) for k in g.__dataclass_fields__}


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: str(p.relative_to(p.parents[4])))
def test_every_real_sample_file_is_accepted(path: Path) -> None:
    where = classify_path(path)
    assert where is not None
    g = load_graph(path, kind=where[0].split(":")[0])
    assert g.is_test == (where[1] == "test")
    g8 = validate_file(path)
    if isinstance(g, LayoutGraph):
        assert g8.node_config_feat.dtype == np.int8
        np.testing.assert_array_equal(g8.node_config_feat.astype(np.float32), g.node_config_feat)


def test_real_sample_shapes(sample_root: Path) -> None:
    g = load_graph(sample_root / NPZ_SUBDIR / "layout/xla/default/valid/unet_3d.4x4.bf16.npz")
    assert isinstance(g, LayoutGraph)
    assert g.node_feat.shape == (3163, 140) and g.node_config_feat.shape == (1965, 62, 18)
    assert not g.is_test


def test_roundtrip_is_byte_compatible(tmp_path: Path) -> None:
    g = make_layout()
    save_graph(tmp_path / "g.npz", g)
    with zipfile.ZipFile(tmp_path / "g.npz") as zf:
        assert [i.filename for i in zf.infolist()] == [
            "node_feat.npy",
            "node_opcode.npy",
            "edge_index.npy",
            "node_config_feat.npy",
            "node_config_ids.npy",
            "config_runtime.npy",
            "node_splits.npy",
        ]
        assert all(i.compress_type == zipfile.ZIP_DEFLATED for i in zf.infolist())
    back = load_graph(tmp_path / "g.npz")
    for k, v in as_arrays(g).items():
        np.testing.assert_array_equal(getattr(back, k), v)
        assert getattr(back, k).dtype == v.dtype


def test_iter_rows_streams_in_blocks(tmp_path: Path) -> None:
    g = make_layout(c=50)
    save_graph(tmp_path / "g.npz", g)
    blocks = list(iter_rows(tmp_path / "g.npz", "node_config_feat", chunk_rows=16))
    assert [len(b) for b in blocks] == [16, 16, 16, 2]
    np.testing.assert_array_equal(np.concatenate(blocks), g.node_config_feat)


def _mutations():
    def drop(key):
        return lambda a: {k: v for k, v in a.items() if k != key}

    def setv(key, fn):
        return lambda a: {**a, key: fn(a[key])}

    def nan_at(x):
        x = x.copy()
        x[0, 0] = np.nan
        return x

    def inf_at(x):
        x = x.copy()
        x[-1, -1] = np.inf
        return x

    def edge_oob(x):
        x = x.copy()
        x[0, 0] = 12
        return x

    return {
        "missing key": (drop("node_splits"), "missing key(s): node_splits"),
        "wrong dtype": (
            setv("node_opcode", lambda x: x.astype(np.int32)),
            "node_opcode: dtype int32, expected uint8",
        ),
        "wrong shape": (setv("edge_index", lambda x: x.T.copy()), "edge_index: shape"),
        "edge id out of range": (setv("edge_index", edge_oob), "edge_index: node id out of range"),
        "nan in features": (setv("node_feat", nan_at), "node_feat: 1 NaN or infinite values"),
        "inf in features": (setv("node_feat", inf_at), "node_feat: 1 NaN or infinite values"),
        "70-column node_feat": (setv("node_feat", lambda x: x[:, :70].copy()), "node_feat: shape (12, 70)"),
        "config value out of range": (
            setv("node_config_feat", lambda x: np.where(x == 5, 6, x)),
            "node_config_feat: values must lie in -1..5",
        ),
        "non-integer config": (setv("node_config_feat", lambda x: x + 0.5), "node_config_feat: values"),
        "config ids not ascending": (
            setv("node_config_ids", lambda x: x[::-1].copy()),
            "node_config_ids: not strictly ascending",
        ),
        "config ids out of range": (
            setv("node_config_ids", lambda x: np.array([1, 4, 99])),
            "node_config_ids: id out of range",
        ),
        "splits do not end at n": (
            setv("node_splits", lambda x: np.array([[0, 5, 11]])),
            "node_splits: must start at 0 and end at 12",
        ),
        "negative runtime": (setv("config_runtime", lambda x: -x), "config_runtime: 7 negative runtimes"),
        "config shape mismatch": (
            setv("node_config_feat", lambda x: x[:, :2].copy()),
            "node_config_feat: shape (7, 2, 18)",
        ),
        "unexpected key": (lambda a: {**a, "extra": np.zeros(3)}, "unexpected key(s): extra"),
    }


@pytest.mark.parametrize("name", list(_mutations()))
def test_bad_layout_file_gives_one_clear_error(tmp_path: Path, name: str) -> None:
    mutate, expected = _mutations()[name]
    path = write_arrays(tmp_path / "bad.npz", mutate(as_arrays(make_layout())))
    for loader in (load_graph, validate_file):
        with pytest.raises(DataError) as err:
            loader(path)
        msg = str(err.value)
        assert msg.startswith(f"{path}: ") and "\n" not in msg
        assert expected in msg, msg


def test_bad_tile_files(tmp_path: Path) -> None:
    a = as_arrays(make_tile())
    a["config_runtime"] = np.zeros(6, dtype=np.int64)  # a test file must have normalizers 1
    path = write_arrays(tmp_path / "t.npz", a)
    with pytest.raises(DataError, match="a test file must hold all 1"):
        load_graph(path)
    a = as_arrays(make_tile())
    a["config_feat"] = a["config_feat"][:, :20].copy()
    with pytest.raises(DataError, match=r"config_feat: shape \(6, 20\), expected \(6, 24\)"):
        load_graph(write_arrays(tmp_path / "t2.npz", a))
    with pytest.raises(DataError, match="a tile file where a layout file belongs"):
        load_graph(write_arrays(tmp_path / "t3.npz", as_arrays(make_tile())), kind="layout")


def test_truncated_and_non_zip_files(tmp_path: Path) -> None:
    good = tmp_path / "good.npz"
    save_graph(good, make_layout(c=400))
    data = good.read_bytes()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(data[: len(data) // 2])
    not_zip = tmp_path / "text.npz"
    not_zip.write_text("hello, I am not an npz file\n")
    empty = tmp_path / "empty.npz"
    empty.write_bytes(b"")
    for path in (truncated, not_zip, empty):
        with pytest.raises(DataError) as err:
            validate_file(path)
        assert str(err.value).startswith(f"{path}: ")


def test_corrupt_member_data(tmp_path: Path) -> None:
    """A member whose compressed bytes are damaged (zip directory intact) is still one line."""
    good = tmp_path / "good.npz"
    save_graph(good, make_layout(c=400))
    data = bytearray(good.read_bytes())
    with zipfile.ZipFile(good) as zf:
        info = zf.getinfo("node_config_feat.npy")
    start = info.header_offset + 30 + len(info.filename) + 200
    data[start : start + 64] = bytes(64)
    bad = tmp_path / "corrupt.npz"
    bad.write_bytes(bytes(data))
    with pytest.raises(DataError, match="corrupt.npz: "):
        validate_file(bad)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return forked(*args)  # a process of its own, its imports inherited


def test_check_cli_accepts_the_real_sample(sample_root: Path) -> None:
    r = _cli("check", str(sample_root))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stdout == ""
    assert "checked 15 files: 15 ok, 0 bad" in r.stderr
    r = _cli("check", "--data-dir", str(sample_root))  # no PATH: the data root's npz tree
    assert r.returncode == 0 and "checked 15 files: 15 ok, 0 bad" in r.stderr


def test_check_cli_lists_each_bad_file_once(tmp_path: Path) -> None:
    save_graph(tmp_path / "ok.npz", make_layout())
    a = as_arrays(make_layout())
    a["node_feat"] = a["node_feat"][:, :70].copy()
    write_arrays(tmp_path / "bad70.npz", a)
    (tmp_path / "junk.npz").write_text("junk")
    r = _cli("check", str(tmp_path))
    assert r.returncode == 1
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 2
    assert any(line.startswith(str(tmp_path / "bad70.npz")) and "(12, 70)" in line for line in lines)
    assert any(line.startswith(str(tmp_path / "junk.npz")) for line in lines)
    assert "Traceback" not in r.stderr
    r = _cli("check", str(tmp_path / "missing.npz"))
    assert r.returncode == 1 and "no such file" in r.stderr and "Traceback" not in r.stderr


def _worker_killed(path: Path) -> str | None:
    os._exit(1)  # as the OS's out-of-memory killer would end a worker


def test_check_with_a_dead_worker_is_a_one_line_error(tmp_path: Path, monkeypatch, capsys) -> None:
    from tpurank.cli import main
    from tpurank.data import check_npz as check

    for name in ("a.npz", "b.npz"):
        save_graph(tmp_path / name, make_layout())
    monkeypatch.setattr(check, "check_one", _worker_killed)  # the forked workers see the patch
    assert main(["check", str(tmp_path), "--jobs", "2"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "worker died" in err[0]
