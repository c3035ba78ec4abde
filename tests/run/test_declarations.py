"""Every stage's declaration (`declare(args) -> StageIO`) against what the stage really reads and writes.

One small `all` is built once per session. Then each step of that `all` runs again in a sandbox
that holds only what the step declares it reads: a file it opens without declaring it is gone,
so the step fails or writes something else than it wrote in the full tree. Every file the step
creates or changes must be among the files it declares it writes (its step record aside).
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import pytest
from helpers import FAST, TWO_COLLECTIONS, two_collection_all

from tpurank.core.paths import Paths
from tpurank.core.staleness import StageIO
from tpurank.run.context import resolve_config
from tpurank.run.pipeline import plan
from tpurank.run.records import RECORDS
from tpurank.run.stages import StageRun, step_namespace

SUBSET = TWO_COLLECTIONS  # one tile and one layout collection: the same code paths
MODELS = ["lgbm", "gnn"]
STEPS = plan(MODELS, 1, SUBSET, partial=True)
# what the step's outputs must equal in the full tree, byte for byte (models may hold timings)
SAME_BYTES = (".npz", ".csv", ".parquet", ".tpg")


@pytest.fixture(scope="module")
def full(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """A tiny `all` over two collections, built once per session (shared with test_pipeline.py)."""
    return two_collection_all(tmp_path_factory)


def _args(options: object, paths: Paths, full: Paths) -> argparse.Namespace:
    """The step's arguments on `paths`, with the config `all` resolved for the full tiny tree."""
    args = step_namespace(options.COMMAND, options, paths, cfg=None)  # type: ignore[arg-type,attr-defined]
    args.profile, args.config_file, args.set = None, None, FAST[1::2]
    resolve_config(args, full.data)
    return args


def _files(io_groups: list) -> set[Path]:
    return {f for g in io_groups for f in g.list()}


def _every_file(paths: Paths) -> dict[Path, bytes]:
    found = {}
    for root in (paths.data, paths.out):
        for f in root.rglob("*"):
            if f.is_file() and not any(p.startswith(".") for p in f.relative_to(root).parts):
                found[f] = f.read_bytes()
    return found


def _sandbox(full: Paths, io: StageIO, tmp: Path) -> Paths:
    """A copy of the full tree keeping only the files `io` reads (and none it writes)."""
    keep = {f.relative_to(full.data.parent) for f in _files(io.reads) - _files(io.writes)}
    for f in keep:
        (tmp / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(full.data.parent / f, tmp / f)
    return Paths(data=tmp / "data", out=tmp / "out")


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.name)
def test_a_step_needs_only_what_it_declares_and_writes_only_that(full: Paths, step, tmp_path: Path) -> None:
    options = step.options
    module = sys.modules[type(options).__module__]
    declared = module.declare(_args(options, full, full))
    assert declared.record, f"{options.COMMAND}: `all` runs it, so it keeps a step record"
    paths = _sandbox(full, declared, tmp_path)
    args = _args(options, paths, full)
    before = _every_file(paths)
    assert StageRun(module, args)() == 0, f"{options.COMMAND} failed on the files it declares it reads"
    after = _every_file(paths)
    changed = {f for f, b in after.items() if before.get(f) != b}
    records = paths.reports / RECORDS
    undeclared = {f for f in changed if records not in f.parents} - _files(module.declare(args).writes)
    assert not undeclared, (
        f"{options.COMMAND} wrote files it does not declare: {sorted(map(str, undeclared))}"
    )
    wrote = _files(module.declare(args).writes)
    assert wrote, f"{options.COMMAND} wrote nothing it declares"
    for f in wrote:
        twin = full.data.parent / f.relative_to(paths.data.parent)
        assert twin.is_file(), f"{f}: not written by the full run"
        if f.suffix in SAME_BYTES and paths.models not in f.parents:  # a model's curves hold timings
            assert f.read_bytes() == twin.read_bytes(), f"{f}: differs from the full run's"


# stages that only read: run on the full tree, they leave every file of it as it was
READ_ONLY = {
    "check": [],
    "check-submission": ["{out}/submissions/test_ensemble.csv", "--partial", "--collections", *SUBSET],
    "score": ["--submission", "{out}/submissions/valid_lgbm.csv", "--split", "valid"],
    "config": ["show"],
    "runs": [],
}
# stages that write outside the pipeline's trees (a data root, a dataset folder, Kaggle); their
# declaration, where they lock a folder, keeps no record, and the named tests check their files
ELSEWHERE = {
    "download": "test_kaggle_server.py",
    "synth": "test_synth.py",
    "compare-synth": "test_synth.py",
    "featurize-pb": "test_featurize_pb.py",
    "submit": "test_kaggle_server.py",
    "all": "test_pipeline.py",
    "ensemble": "test_ensemble_command.py",  # three steps of `all`, each walked above
    "build-code-dataset": "test_kaggle_notebooks.py",
    "build-models-dataset": "test_models_dataset.py",
    "infer": "test_models_dataset.py",
    "rank": "test_rank.py",
    "tune": "test_tune.py",
}


def test_every_stage_is_walked_here_or_named() -> None:
    from tpurank.cli import COMMANDS

    walked = {s.options.COMMAND for s in STEPS}
    assert set(COMMANDS) == walked | set(READ_ONLY) | set(ELSEWHERE)
    assert not (walked & set(READ_ONLY)) and not (walked & set(ELSEWHERE))
    tests = Path(__file__).resolve().parents[1]  # the test files live in folders per package room
    for test_file in ELSEWHERE.values():
        assert len(list(tests.rglob(test_file))) == 1, test_file


@pytest.mark.parametrize("stage", sorted(READ_ONLY))
def test_a_reading_stage_writes_nothing(full: Paths, stage: str, tmp_path: Path, capsys) -> None:
    from helpers import copy_tree

    from tpurank.cli import RUN_WIDE_USED, main

    paths = copy_tree(full, tmp_path)
    before = _every_file(paths)
    argv = [a.format(out=paths.out) for a in READ_ONLY[stage]]
    uses = RUN_WIDE_USED[stage]  # the folders it takes (one it does not use is refused)
    argv += ["--data-dir", str(paths.data)] if "data_dir" in uses else []
    argv += ["--out-dir", str(paths.out)] if "out_dir" in uses else []
    rc = main([stage, *argv])
    assert rc == 0, capsys.readouterr().err[-2000:]
    after = _every_file(paths)
    assert {str(f) for f in after if before.get(f) != after[f]} == set()
    assert set(after) == set(before)
