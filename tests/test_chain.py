"""Step records (tpurank.chain): what a stage read and wrote, named by content."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import numpy as np
import pytest

from tpurank.chain import Files, Step, identity, record_path, stage_io
from tpurank.core.config import Config
from tpurank.core.paths import Paths


def _args(paths: Paths, stage: str, **opts) -> argparse.Namespace:
    return argparse.Namespace(stage=stage, paths=paths, cfg=Config(), config_file=None, set=[], **opts)


def test_identity_follows_content_not_timestamps(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.arange(5))
    (tmp_path / "b.txt").write_text("hello")
    (tmp_path / ".lock").write_text("held")  # locks and temporary files are not outputs
    files = [Files(tmp_path)]
    before = identity(files)
    for f in (tmp_path / "a.npz", tmp_path / "b.txt"):
        os.utime(f, (1, 1))
    (tmp_path / ".lock").write_text("other")
    assert identity(files) == before
    (tmp_path / "b.txt").write_text("hellp")
    assert identity(files) != before
    np.savez(tmp_path / "a.npz", x=np.arange(5)[::-1])  # same size, another order
    changed = identity(files)
    (tmp_path / "b.txt").write_text("hello")
    assert identity(files) not in (before, changed)


def test_files_pattern_and_exclude(tmp_path: Path) -> None:
    for m in ("lgbm", "gnn", "ensemble"):
        (tmp_path / m).mkdir()
        for split in ("valid", "test"):
            (tmp_path / m / f"{split}.npz").write_bytes(b"x")
    found = Files(tmp_path, "*/valid.npz", exclude="ensemble").list()
    assert [f.relative_to(tmp_path).as_posix() for f in found] == ["gnn/valid.npz", "lgbm/valid.npz"]
    assert Files(tmp_path / "absent").list() == []


@pytest.mark.parametrize(
    ("stage", "opts", "writes"),
    [
        ("prepare", {}, ["prepared"]),
        ("features", {}, ["tabular"]),
        ("train", {"model": "gnn"}, ["gnn"]),
        ("train", {"model": "ensemble"}, ["ensemble"]),
        ("predict", {"model": "lgbm", "split": "test"}, ["test.npz", "submissions", "submissions"]),
        ("validate", {}, ["reports", "plots"]),
    ],
)
def test_every_stage_read_by_another_keeps_a_record(
    tmp_path: Path, stage: str, opts: dict, writes: list
) -> None:
    io = stage_io(_args(Paths(tmp_path / "d", tmp_path / "o"), stage, **opts))
    assert io is not None
    reads, wrote, sections = io
    assert [w.root.name for w in wrote] == writes and reads and sections


def test_a_record_matches_until_an_output_or_input_changes(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "data", tmp_path / "out")
    (paths.tabular).mkdir(parents=True)
    (paths.tabular / "t.parquet").write_bytes(b"table")
    args = _args(paths, "train", model="lgbm", collections=None)
    step = Step(args)
    assert not step.up_to_date()  # never ran
    (paths.models / "lgbm").mkdir(parents=True)
    (paths.models / "lgbm" / "model.txt").write_text("trained")
    step.save()
    assert Step(args).up_to_date()
    (paths.models / "lgbm" / "model.txt").write_text("retrained by hand")
    assert not Step(args).up_to_date()
    step.save()
    (paths.tabular / "t.parquet").write_bytes(b"tablf")
    assert not Step(args).up_to_date()
    other = _args(paths, "train", model="lgbm", collections=None)
    other.cfg.lgbm.num_boost_round += 1
    assert not Step(other).up_to_date()
    record_path(args).write_text("{not json")
    assert not Step(args).up_to_date()  # a damaged record: the step runs again


def test_where_files_live_and_force_do_not_change_the_record(tmp_path: Path) -> None:
    a = _args(Paths(tmp_path / "d", tmp_path / "o"), "predict", model="gnn", split="valid", force=False)
    b = _args(Paths(tmp_path / "d", tmp_path / "o"), "predict", model="gnn", split="valid", force=True)
    b.data_dir = "/elsewhere"
    assert record_path(a) == record_path(b)
    c = _args(Paths(tmp_path / "d", tmp_path / "o"), "predict", model="gnn", split="test", force=False)
    assert record_path(c) != record_path(a)
