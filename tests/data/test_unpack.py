"""The downloaded archive is unpacked whole or not at all: the npz folder, whose presence skips the
next download, appears only once every file of the archive is out."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.download import unpack

MEMBERS = {
    "sample_submission.csv": "ID,TopConfigs\n",
    f"{NPZ_SUBDIR}/tile/xla/train/a.npz": "first",
    f"{NPZ_SUBDIR}/tile/xla/train/b.npz": "second",
}


def archive(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "predict-ai-model-runtime.zip"
    path.parent.mkdir()
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in MEMBERS.items():
            zf.writestr(name, text)
    return path


def leftovers(root: Path) -> list[str]:
    return [p.name for p in root.iterdir() if p.name.startswith(".unpacking-")]


def test_every_member_lands_in_place(tmp_path: Path) -> None:
    zipped = archive(tmp_path)
    root = zipped.parent
    (root / NPZ_SUBDIR / "stale").mkdir(parents=True)  # a previous tree (--force): replaced whole
    unpack(zipped, root)
    for name, text in MEMBERS.items():
        assert (root / name).read_text() == text
    assert not (root / NPZ_SUBDIR / "stale").exists() and leftovers(root) == []


def test_an_unpack_that_fails_halfway_leaves_no_npz_folder(tmp_path: Path, monkeypatch) -> None:
    zipped = archive(tmp_path)
    root = zipped.parent

    def full_disk(self: zipfile.ZipFile, path: Path) -> None:
        self.extract(self.namelist()[1], path)  # one npz out, then the disk is full
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(zipfile.ZipFile, "extractall", full_disk)
    with pytest.raises(OSError, match="No space left"):
        unpack(zipped, root)
    assert not (root / NPZ_SUBDIR.parts[0]).exists() and leftovers(root) == []


def test_a_corrupt_archive_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.zip"
    bad.write_bytes(b"not a zip")
    with pytest.raises(TpurankError, match=r"bad\.zip: corrupt archive .*download again$"):
        unpack(bad, tmp_path)
    assert leftovers(tmp_path) == []
