"""Step records (tpurank.run.records) and the one content key (tpurank.core.staleness): what a stage
read and wrote, named by content, decides whether it runs again, alone or inside `all`."""

from __future__ import annotations

import argparse
import dataclasses
import os
from pathlib import Path

import numpy as np
import pytest

from tpurank.cli import COMMANDS, command_module, command_parser
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.core.staleness import Files, content_key, files_identity
from tpurank.run import records
from tpurank.run.stages import StageRun, step_namespace

RECORDED = ("prepare", "features", "train", "predict", "ensemble", "validate")


def _args(paths: Paths, stage: str, **opts) -> argparse.Namespace:
    options = command_module(stage).Options(**opts)
    return step_namespace(stage, options, paths, Config())


def _run(paths: Paths, stage: str, **opts) -> StageRun:
    return StageRun(command_module(stage), _args(paths, stage, **opts))


def test_identity_follows_content_not_timestamps(tmp_path: Path) -> None:
    np.savez(tmp_path / "a.npz", x=np.arange(5))
    (tmp_path / "b.txt").write_text("hello")
    (tmp_path / ".lock").write_text("held")  # locks and temporary files are not outputs
    files = [Files(tmp_path)]
    before = files_identity(files)
    for f in (tmp_path / "a.npz", tmp_path / "b.txt"):
        os.utime(f, (1, 1))
    (tmp_path / ".lock").write_text("other")
    assert files_identity(files) == before
    (tmp_path / "b.txt").write_text("hellp")
    assert files_identity(files) != before
    np.savez(tmp_path / "a.npz", x=np.arange(5)[::-1])  # same size, another order
    changed = files_identity(files)
    (tmp_path / "b.txt").write_text("hello")
    assert files_identity(files) not in (before, changed)


def test_content_key_names_parts_and_files(tmp_path: Path) -> None:
    f = tmp_path / "x.bin"
    key = content_key({"a": 1}, [f])  # missing counts as missing
    f.write_bytes(b"1")
    assert content_key({"a": 1}, [f]) != key
    assert content_key({"a": 1}, [f]) == content_key({"a": 1}, [Path(str(f))])
    assert content_key({"a": 2}, [f]) != content_key({"a": 1}, [f])
    assert content_key({"a": 1}, [Files(tmp_path)]) != content_key({"a": 1}, [Files(tmp_path / "none")])


def test_files_pattern_and_exclude(tmp_path: Path) -> None:
    for m in ("lgbm", "gnn", "ensemble"):
        (tmp_path / m).mkdir()
        for split in ("valid", "test"):
            (tmp_path / m / f"{split}.npz").write_bytes(b"x")
    found = Files(tmp_path, "*/valid.npz", exclude="ensemble").list()
    assert [f.relative_to(tmp_path).as_posix() for f in found] == ["gnn/valid.npz", "lgbm/valid.npz"]
    assert Files(tmp_path / "absent").list() == []


@pytest.mark.parametrize(
    ("stage", "opts", "locks"),
    [
        ("prepare", {}, ["prepared"]),
        ("features", {}, ["tabular"]),
        ("train", {"model": "gnn"}, ["gnn"]),
        ("train", {"model": "ensemble"}, ["ensemble"]),
        ("predict", {"model": "lgbm", "split": "test"}, ["lgbm"]),
        ("predict", {"model": "ensemble", "split": "test"}, ["ensemble"]),
        ("validate", {}, ["reports", "plots"]),
    ],
)
def test_every_stage_read_by_another_keeps_a_record(
    tmp_path: Path, stage: str, opts: dict, locks: list
) -> None:
    run = _run(Paths(tmp_path / "d", tmp_path / "o"), stage, **opts)
    assert run.record is not None and run.io is not None
    assert [f.name for f in run.io.lock_folders()] == locks
    assert run.io.reads and run.io.sections


def test_prepare_records_its_own_out_folder(tmp_path: Path) -> None:
    run = _run(Paths(tmp_path / "d", tmp_path / "o"), "prepare", out=tmp_path / "elsewhere")
    assert run.io is not None and run.io.lock_folders() == [tmp_path / "elsewhere"]


def test_a_record_matches_until_an_output_or_input_changes(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "data", tmp_path / "out")
    (paths.tabular).mkdir(parents=True)
    (paths.tabular / "t.parquet").write_bytes(b"table")
    run = _run(paths, "train", model="lgbm")
    assert not run.up_to_date()  # never ran
    (paths.models / "lgbm").mkdir(parents=True)
    (paths.models / "lgbm" / "model.txt").write_text("trained")
    assert run.record is not None
    run.record.save()
    assert _run(paths, "train", model="lgbm").up_to_date()
    (paths.models / "lgbm" / "model.txt").write_text("retrained by hand")
    assert not _run(paths, "train", model="lgbm").up_to_date()
    run.record.save()
    (paths.tabular / "t.parquet").write_bytes(b"tablf")
    assert not _run(paths, "train", model="lgbm").up_to_date()
    other = _args(paths, "train", model="lgbm")
    other.cfg.lgbm.num_boost_round += 1
    assert not StageRun(command_module("train"), other).up_to_date()
    run.record.path.write_text("{not json")
    assert not _run(paths, "train", model="lgbm").up_to_date()  # a damaged record: the step runs again


def test_a_rerun_names_what_changed_and_keeps_the_last_duration(tmp_path: Path) -> None:
    """Every reason a step runs again is said in the user's words; a GNN time budget (the plan) is not
    one for LightGBM; the duration of the last success is the budget's estimate of the step."""
    paths = Paths(tmp_path / "data", tmp_path / "out")
    paths.tabular.mkdir(parents=True)
    (paths.tabular / "t.parquet").write_bytes(b"table")
    run = _run(paths, "train", model="lgbm")
    assert run.why() == "no earlier run with these options" and run.last_seconds() is None
    (paths.models / "lgbm").mkdir(parents=True)
    (paths.models / "lgbm" / "model.txt").write_text("trained")
    run.record.save(12.5)
    again = _run(paths, "train", model="lgbm")
    assert again.up_to_date() and again.last_seconds() == 12.5
    planned = _args(paths, "train", model="lgbm")
    planned.cfg = dataclasses.replace(
        planned.cfg, collections={**planned.cfg.collections, "tile:xla": {"gnn": {"time_budget_min": 3.0}}}
    )
    assert StageRun(command_module("train"), planned).up_to_date()  # the GNN's plan is not LightGBM's
    other = _args(paths, "train", model="lgbm")
    other.cfg.lgbm.num_boost_round += 1
    assert StageRun(command_module("train"), other).why() == "config changed: lgbm"
    (paths.tabular / "t.parquet").write_bytes(b"tablf")
    run = _run(paths, "train", model="lgbm")
    assert run.why() == "its inputs changed: tabular"
    run.record.save(3.0)
    assert _run(paths, "train", model="lgbm").up_to_date()
    (paths.models / "lgbm" / "model.txt").write_text("retrained by hand")
    assert _run(paths, "train", model="lgbm").why() == "its outputs changed since it ran"
    for bad in ('{"stage": 1}', "[]", '{"seconds": "5m"}'):
        run.record.path.write_text(bad)
        assert _run(paths, "train", model="lgbm").why() == "no earlier run with these options"
    rec = run.record.path
    run.record.save(3.0)
    rec.write_text(rec.read_text().replace('"seconds": 3.0', '"seconds": "3s"'))
    assert _run(paths, "train", model="lgbm").last_seconds() is None  # a hand edit: no estimate from it


@pytest.mark.parametrize(
    ("stage", "model", "sections"),
    [
        ("predict", "random", ("prepare",)),
        ("predict", "lgbm", ("prepare", "features", "lgbm")),
        ("train", "lgbm", ("prepare", "features", "lgbm")),
        ("predict", "gnn", ("prepare", "gnn", "ensemble")),
    ],
)
def test_a_model_s_steps_read_only_its_own_config(
    stage: str, model: str, sections: tuple, tmp_path: Path
) -> None:
    """A new GNN time budget (the budget's plan) reruns the GNN's steps, never the other models'."""
    opts = {"split": "valid"} if stage == "predict" else {}
    run = _run(Paths(tmp_path / "d", tmp_path / "o"), stage, model=model, **opts)
    assert run.io is not None and run.io.sections == sections


def test_options_that_do_not_change_the_result_keep_one_record(tmp_path: Path) -> None:
    paths = Paths(tmp_path / "d", tmp_path / "o")
    a = _run(paths, "predict", model="gnn", split="valid")
    b = _run(paths, "predict", model="gnn", split="valid", force=True)
    c = _run(paths, "predict", model="gnn", split="test")
    assert a.record and b.record and c.record
    assert a.record.path == b.record.path != c.record.path
    quiet = _run(paths, "prepare", no_progress=True, jobs=1)
    loud = _run(paths, "prepare")
    assert quiet.record and loud.record and quiet.record.path == loud.record.path


@pytest.mark.parametrize("stage", list(COMMANDS))
def test_typed_options_match_the_command_line(stage: str) -> None:
    """A stage's `Options` (what `all` builds) has exactly the fields its parser fills, and the
    defaults agree; a stage that declares a record takes `--force`."""
    module = command_module(stage)
    if not hasattr(module, "Options"):
        assert stage not in (*RECORDED, "check-submission"), f"{stage}: `all` runs it, so it needs Options"
        return

    parser = command_parser(stage, module, common=False)
    dests = {a.dest for a in parser._actions if a.dest != "help"}
    fields = {f.name: f for f in dataclasses.fields(module.Options)}
    assert set(fields) == dests, stage
    for name, f in fields.items():
        if f.default is not dataclasses.MISSING:
            assert parser.get_default(name) == f.default, (stage, name)
        elif f.default_factory is not dataclasses.MISSING:
            assert parser.get_default(name) == f.default_factory(), (stage, name)
    assert stage == module.Options.COMMAND


@pytest.mark.parametrize("subset", [None, ["tile:xla", "layout:nlp:random"]])
def test_a_step_shown_as_a_command_parses_back_to_its_options(subset: list[str] | None) -> None:
    """`all` prints each step as the command a user would type: typed, that command gives the
    step's own options."""
    from tpurank.run.pipeline import plan
    from tpurank.run.stages import command_argv
    from tpurank.submission import check

    steps = [s.options for s in plan(["lgbm", "gnn", "baseline"], 2, subset, partial=True)]
    for options in [*steps, check.Options("sub.csv", partial=True, collections=subset)]:
        argv = command_argv(options)
        assert argv[0] == options.COMMAND
        parsed = command_parser(argv[0], command_module(argv[0]), common=False).parse_args(argv[1:])
        assert (
            type(options)(**{f.name: getattr(parsed, f.name) for f in dataclasses.fields(options)}) == options
        )


def test_the_code_key_covers_the_whole_package() -> None:
    """A change to any module (the GNN, prepare, a model) makes every step's record stale, not
    only a change to the run's own room, wherever records.py sits."""
    rooms = {f.relative_to(records.PACKAGE).parts[0] for f in records.package_sources()}
    assert {"core", "prepare", "features", "gnn", "lgbm", "models", "run", "cli.py"} <= rooms
