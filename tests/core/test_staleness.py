"""The key over what a stage reads covers the listing of its inputs: an entry that is not a regular
file (a FIFO, a folder named like an input, a dangling link) changes it, since the stage reports it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tpurank.core.staleness import Files, files_identity


def _tree(root: Path) -> list[Files]:
    (root / "train").mkdir(parents=True)
    (root / "train" / "a.npz").write_bytes(b"a")
    return [Files(root, "**/*.npz")]


@pytest.mark.parametrize("kind", ["fifo", "folder", "dangling link", "link loop"])
def test_a_non_regular_entry_among_the_inputs_changes_the_key(tmp_path: Path, kind: str) -> None:
    groups = _tree(tmp_path)
    before = files_identity(groups)
    entry = tmp_path / "train" / "x.npz"
    if kind == "fifo":
        os.mkfifo(entry)  # never opened: hashing it must not block
    elif kind == "folder":
        entry.mkdir()
    elif kind == "dangling link":
        entry.symlink_to(tmp_path / "gone.npz")
    else:
        entry.symlink_to(entry)
    assert groups[0].list() == [tmp_path / "train" / "a.npz"]  # still not read as a file
    assert groups[0].strays() == [entry]
    keyed = files_identity(groups)
    assert keyed != before
    if kind == "folder":
        entry.rmdir()
    else:
        entry.unlink()
    assert files_identity(groups) == before  # the same listing: the same key


def test_a_whole_tree_keys_its_odd_entries_not_its_folders(tmp_path: Path) -> None:
    groups = [Files(tmp_path)]
    (tmp_path / "f.txt").write_text("x")
    before = files_identity(groups)
    (tmp_path / "sub").mkdir()  # a folder is the tree's shape, not an input
    os.mkfifo(tmp_path / ".hidden-fifo")  # hidden entries (locks) stay out
    assert files_identity(groups) == before
    os.mkfifo(tmp_path / "sub" / "pipe")
    assert files_identity(groups) != before
    assert Files(tmp_path / "sub" / "pipe").strays() == [tmp_path / "sub" / "pipe"]
