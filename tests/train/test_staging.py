"""A (re)training's staging folder (tpurank.train.staging): published when training completes,
removed when it fails, kept for the resume when it is interrupted; the finished model untouched
in every case."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from tpurank.core.errors import DiskFullError
from tpurank.core.paths import Paths
from tpurank.train import staging as st

COLLECTION = "tile:xla"


def _finished(tmp_path: Path) -> tuple[Paths, Path]:
    """An out folder holding a finished lgbm model of COLLECTION."""
    paths = Paths(tmp_path / "data", tmp_path / "out")
    final = paths.model_dir("lgbm", COLLECTION)
    final.mkdir(parents=True)
    (final / "model.txt").write_text("finished")
    (final / "features.json").write_text("[1]")
    return paths, final


def _write(folder: Path, name: str, text: str) -> None:
    """A write as tpurank.core.atomic makes it: a new file renamed over the link."""
    (folder / f".{name}.tmp").write_text(text)
    (folder / f".{name}.tmp").rename(folder / name)


def _hidden(paths: Paths) -> list[str]:
    """The model's hidden folders (.next-, .new-, .old-) left beside the finished one."""
    return sorted(f.name for f in (paths.models / "lgbm").iterdir() if f.name.startswith("."))


@pytest.mark.parametrize(
    "error",
    [OSError(errno.ENOSPC, "No space left on device"), DiskFullError("x"), RuntimeError("a bug")],
)
def test_a_failed_training_removes_its_staging_folder(tmp_path: Path, error: Exception) -> None:
    paths, final = _finished(tmp_path)
    with pytest.raises(type(error)), st.staged(paths, "lgbm", COLLECTION) as p:
        staging = p.model_dir("lgbm", COLLECTION)
        _write(staging, "model.txt", "half of a retrain")  # new; features.json still the old link
        raise error
    assert _hidden(paths) == []
    assert {f.name: f.read_text() for f in final.iterdir()} == {
        "model.txt": "finished",
        "features.json": "[1]",
    }


def test_an_error_names_the_finished_folder_not_the_staging_one(tmp_path: Path) -> None:
    paths, final = _finished(tmp_path)
    staging = st.staging_folder(paths, "lgbm", COLLECTION)
    with pytest.raises(DiskFullError) as raised, st.staged(paths, "lgbm", COLLECTION):
        raise DiskFullError(staging / "model.txt")
    assert str(raised.value).startswith(f"{final / 'model.txt'}: no space left")


def test_an_interrupted_training_keeps_its_staging_folder_for_the_resume(tmp_path: Path) -> None:
    paths, final = _finished(tmp_path)
    with pytest.raises(KeyboardInterrupt), st.staged(paths, "lgbm", COLLECTION) as p:
        _write(p.model_dir("lgbm", COLLECTION), "last.pt", "resume state")
        raise KeyboardInterrupt
    staging = st.staging_folder(paths, "lgbm", COLLECTION)
    assert _hidden(paths) == [staging.name] and (staging / "last.pt").read_text() == "resume state"
    assert (final / "model.txt").read_text() == "finished"
    with st.staged(paths, "lgbm", COLLECTION) as p:  # the rerun trains on in the same folder
        assert (p.model_dir("lgbm", COLLECTION) / "last.pt").read_text() == "resume state"
        _write(p.model_dir("lgbm", COLLECTION), "model.txt", "retrained")
    assert (final / "model.txt").read_text() == "retrained" and _hidden(paths) == []


def test_a_failed_swap_puts_the_finished_folder_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    paths, final = _finished(tmp_path)
    real = Path.rename

    def rename(self: Path, target: Path) -> Path:
        if self.name.startswith(".next-"):
            raise OSError(errno.EIO, "Input/output error")
        return real(self, target)

    monkeypatch.setattr(Path, "rename", rename)
    with pytest.raises(OSError), st.staged(paths, "lgbm", COLLECTION) as p:
        _write(p.model_dir("lgbm", COLLECTION), "model.txt", "retrained")
    assert _hidden(paths) == [] and (final / "model.txt").read_text() == "finished"


def test_a_staging_folder_that_cannot_be_made_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths, final = _finished(tmp_path)
    linked = []

    def link(src: str, dst: str) -> None:
        if linked:
            raise OSError(errno.ENOSPC, "No space left on device")
        linked.append(dst)
        Path(dst).hardlink_to(src)

    monkeypatch.setattr(st.os, "link", link)
    with pytest.raises(OSError), st.staged(paths, "lgbm", COLLECTION):
        pytest.fail("the block must not run")
    assert linked and _hidden(paths) == [] and (final / "model.txt").read_text() == "finished"
