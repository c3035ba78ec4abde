"""`all` on big data runs each step in a process of its own (tpurank.run.pipeline.isolate_steps): the
same files as in one process, the step's record saved by the child, and the choice made by size."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import TRAINED_COLLECTION, copy_tree

from tpurank.core.config_files import load_config
from tpurank.core.paths import Paths
from tpurank.predict import cli as predict
from tpurank.run import pipeline
from tpurank.run.stages import StageRun, step_namespace
from tpurank.run.steps import Step


def _predict_valid(paths: Paths, isolated: bool) -> tuple[bytes, bool]:
    """`predict --model heuristic --split valid` as a step of `all` (a step that needs no torch, so
    its child starts in a second): its CSV and whether its record is now up to date."""
    cfg = load_config()
    options = predict.Options(model="heuristic", split="valid", collections=[TRAINED_COLLECTION])
    budget = SimpleNamespace(config=lambda: cfg, final=True, seconds=3600.0)
    pipeline.run_steps([Step(options)], paths, budget, True, 0.0, isolated)
    recorded = StageRun(predict, step_namespace("predict", options, paths, cfg)).up_to_date()
    return (paths.out / "submissions" / "valid_heuristic.csv").read_bytes(), recorded


def test_a_step_in_its_own_process_writes_what_it_writes_in_one(tiny_paths: Paths, tmp_path: Path) -> None:
    """The child writes the step's files and its record, the same bytes as the step in this process."""
    alone = _predict_valid(copy_tree(tiny_paths, tmp_path / "isolated"), isolated=True)
    together = _predict_valid(copy_tree(tiny_paths, tmp_path / "one"), isolated=False)
    assert alone[0] == together[0] and alone[0].count(b"\n") > 1
    assert alone[1] and together[1]


def test_only_big_data_isolates_its_steps(tiny_root: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    paths = Paths(data=tiny_root, out=tiny_root.parent)
    assert not pipeline.isolate_steps(paths, [TRAINED_COLLECTION])
    monkeypatch.setattr(pipeline, "SMALL_DATA_BYTES", 1)
    assert pipeline.isolate_steps(paths, [TRAINED_COLLECTION])
    assert "each step in a process of its own" in capsys.readouterr().err
