"""`all` on big data runs each step in a process of its own (tpurank.pipeline.isolate_steps): the
same files as in one process, the step's record saved by the child, and the choice made by size."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import TRAINED_COLLECTION, copy_tree

from tpurank import pipeline
from tpurank.core.config_files import load_config
from tpurank.core.paths import Paths
from tpurank.rankers import predict
from tpurank.run_budget import Step
from tpurank.stages import StageRun, stage_namespace


def _predict_gnn_valid(paths: Paths, isolated: bool) -> tuple[bytes, bool]:
    """`predict --model gnn --split valid` as a step of `all`: its CSV and whether its record is now up to date."""
    cfg = load_config(overrides=["gnn.seeds=1"])
    options = predict.Options(model="gnn", split="valid", collections=[TRAINED_COLLECTION])
    budget = SimpleNamespace(config=lambda: cfg, final=True, seconds=3600.0)
    (paths.out / "submissions" / "valid_gnn.csv").unlink()  # what the step writes, not what the tree held
    pipeline.run_steps([Step("predict gnn valid", options)], paths, budget, True, 0.0, isolated)
    recorded = StageRun(predict, stage_namespace("predict", options, paths, cfg)).up_to_date()
    return (paths.out / "submissions" / "valid_gnn.csv").read_bytes(), recorded


def test_a_step_in_its_own_process_writes_what_it_writes_in_one(trained_tree: Paths, tmp_path: Path) -> None:
    alone = _predict_gnn_valid(copy_tree(trained_tree, tmp_path / "isolated"), isolated=True)
    together = _predict_gnn_valid(copy_tree(trained_tree, tmp_path / "one"), isolated=False)
    assert alone[0] == together[0] and alone[0].count(b"\n") > 1
    assert alone[1] and together[1]


def test_only_big_data_isolates_its_steps(tiny_root: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    paths = Paths(data=tiny_root, out=tiny_root.parent)
    assert not pipeline.isolate_steps(paths, [TRAINED_COLLECTION])
    monkeypatch.setattr(pipeline, "SMALL_DATA_BYTES", 1)
    assert pipeline.isolate_steps(paths, [TRAINED_COLLECTION])
    assert "each step in a process of its own" in capsys.readouterr().err
