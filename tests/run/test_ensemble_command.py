"""`tpurank ensemble`: three steps of `all` (`train --model ensemble`, then `predict --model
ensemble` on valid and test), each recorded and skipped as `all` does; the same bytes as `all`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import FAST, TWO_COLLECTIONS, copy_tree, two_collection_all

from tpurank.cli import main
from tpurank.core.paths import Paths
from tpurank.run.ensemble_steps import steps
from tpurank.run.records import RECORDS


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    return two_collection_all(tmp_path_factory)


def _ensemble_outputs(paths: Paths) -> dict[str, bytes]:
    """The ensemble's weights, predictions and CSVs (provenance and timings left out)."""
    found = [*paths.models.glob("ensemble/*/weights.json"), *paths.predictions.glob("ensemble/*.npz")]
    found += paths.submissions.glob("*_ensemble.csv")
    return {str(f.relative_to(paths.out)): f.read_bytes() for f in found}


def _ensemble_records(paths: Paths) -> list[Path]:
    folder = paths.reports / RECORDS
    return [
        f for f in folder.glob("*.json") if json.loads(f.read_text())["options"].get("model") == "ensemble"
    ]


def test_it_is_the_steps_all_runs(full: Paths, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    paths = copy_tree(full, tmp_path)
    expected = _ensemble_outputs(full)
    assert len(expected) == 2 + 2 + 2, sorted(expected)  # two collections' weights, valid and test
    for f in [*_ensemble_records(paths), *map(paths.out.joinpath, expected)]:
        f.unlink()
    argv = ["ensemble", "--data-dir", str(paths.data), "--out-dir", str(paths.out), *FAST]
    assert main([*argv, "--collections", *TWO_COLLECTIONS]) == 0
    assert _ensemble_outputs(paths) == expected
    assert len(_ensemble_records(paths)) == 3  # one per step: train, predict valid, predict test
    capsys.readouterr()
    assert main([*argv, "--collections", *TWO_COLLECTIONS]) == 0
    said = capsys.readouterr().err
    assert said.count(": up to date (") == 3, said


def test_its_steps_are_the_stages_it_names() -> None:
    lines = [" ".join([o.COMMAND, o.model, getattr(o, "split", "")]).strip() for o in steps(["tile:xla"])]
    assert lines == ["train ensemble", "predict ensemble valid", "predict ensemble test"]
