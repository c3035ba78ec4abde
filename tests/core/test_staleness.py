"""The key over what a stage reads covers the listing of its inputs: an entry that is not a regular
file (a FIFO, a folder named like an input, a dangling link) changes it, since the stage reports it.
A finer cache keys its piece on its stage's declaration, and `current` alone decides a skip."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tpurank.core.config import Config
from tpurank.core.config_build import from_dict
from tpurank.core.staleness import SEED, Files, StageIO, current, files_identity


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


# ----------------------------------------------------------------------------- the one decider


@pytest.mark.parametrize(
    ("stored", "outputs", "whole", "expected"),
    [
        ("k", [], True, True),
        ("other", [], True, False),
        (None, [], True, False),
        ({"key": "k"}, [], True, False),  # a damaged record holds no key
        ("k", ["there"], True, True),
        ("k", ["there", "gone"], True, False),
        ("k", ["there"], False, False),
    ],
)
def test_current_needs_the_same_key_and_a_whole_result(
    tmp_path: Path, stored: object, outputs: list[str], whole: bool, expected: bool
) -> None:
    (tmp_path / "there").write_bytes(b"x")
    assert current(stored, "k", [tmp_path / o for o in outputs], whole=whole) is expected


def _io(root: Path) -> StageIO:
    return StageIO([Files(root / "in", "*.npz")], [Files(root / "out")], ("features",))


def test_a_piece_key_follows_its_files_and_declared_sections(tmp_path: Path) -> None:
    io, f = _io(tmp_path), tmp_path / "in" / "a.npz"
    f.parent.mkdir()
    f.write_bytes(b"1")
    key = io.piece_key({"v": 1}, [f], Config(), (SEED, "features"))
    assert key == io.piece_key({"v": 1}, [f], Config(), (SEED, "features"))
    assert key != io.piece_key({"v": 2}, [f], Config(), (SEED, "features"))
    capped = from_dict({"features": {"max_configs_per_graph": 7}})
    assert key != io.piece_key({"v": 1}, [f], capped, (SEED, "features"))
    assert key != io.piece_key({"v": 1}, [f], from_dict({"seed": 1}), (SEED, "features"))
    assert key == io.piece_key({"v": 1}, [f], from_dict({"lgbm": {"num_leaves": 7}}), (SEED, "features"))
    f.write_bytes(b"2")
    assert key != io.piece_key({"v": 1}, [f], Config(), (SEED, "features"))
    own = tmp_path / "out" / "summary.json"  # a piece may summarise the stage's own outputs
    assert io.piece_key({}, [own]) == io.piece_key({}, [own])


@pytest.mark.parametrize(
    ("files", "sections", "says"),
    [
        (["elsewhere/a.npz"], (), "is not below a file the stage declares"),
        (["in/a.npz"], ("lgbm",), "config section 'lgbm' is not one the stage declares"),
    ],
)
def test_a_piece_key_refuses_what_its_stage_does_not_declare(
    tmp_path: Path, files: list[str], sections: tuple[str, ...], says: str
) -> None:
    with pytest.raises(ValueError, match=says):
        _io(tmp_path).piece_key({}, [tmp_path / f for f in files], Config(), sections)
