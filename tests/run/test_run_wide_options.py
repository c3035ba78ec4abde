"""The run-wide options (`--data-dir`, `--out-dir`, `--work-dir`, `--profile`, `--config`, `--set`):
each stage takes those it uses and refuses the others in one line, exit 2, before anything runs. An
option accepted and ignored (`rank --out-dir X` writing nothing to X, exit 0) leaves the user looking
for output that is not there."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import snapshot

from tpurank.cli import COMMANDS, OVERRIDES, RUN_WIDE_USED, command_module, command_parser, main
from tpurank.core.options import FLAGS, RUN_WIDE, Refused

REFUSED = [(stage, dest) for stage in COMMANDS for dest in RUN_WIDE if dest not in RUN_WIDE_USED[stage]]
VALUE = {"profile": "cpu", "set": "seed=1"}


def test_every_stage_names_the_run_wide_options_it_uses() -> None:
    assert set(RUN_WIDE_USED) == set(COMMANDS)
    for stage, uses in RUN_WIDE_USED.items():
        assert set(uses) <= set(RUN_WIDE), stage
        parser = command_parser(stage, command_module(stage))
        taken = {a.dest for a in parser._actions if a.dest in RUN_WIDE and not isinstance(a, Refused)}
        assert taken == set(uses), stage
        shown = parser.format_help()
        assert all(FLAGS[d] in shown for d in uses), stage
        assert not any(f"{FLAGS[d]} " in shown for d in RUN_WIDE if d not in uses), stage  # help hides them


@pytest.mark.parametrize(("stage", "dest"), REFUSED, ids=[f"{s} {FLAGS[d]}" for s, d in REFUSED])
def test_an_option_a_stage_does_not_use_is_refused_in_one_line(
    stage: str, dest: str, tmp_path: Path, capsys
) -> None:
    flag = FLAGS[dest]
    with pytest.raises(SystemExit) as e:
        main([stage, flag, VALUE.get(dest, str(tmp_path / "x"))])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "usage:" not in err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"tpurank {stage}: error: {flag}: {stage} does not use it")
    takes = ", ".join(FLAGS[d] for d in RUN_WIDE if d in RUN_WIDE_USED[stage]) or "none"
    assert lines[0].endswith(f"(the run-wide options {stage} takes: {takes})")
    assert not (tmp_path / "x").exists()


def test_rank_refuses_an_out_folder_it_would_not_write(tmp_path: Path, capsys) -> None:
    before = snapshot(tmp_path)
    with pytest.raises(SystemExit) as e:
        main(["rank", str(tmp_path / "g.npz"), "--models", str(tmp_path), "--out-dir", str(tmp_path / "X")])
    assert e.value.code == 2 and snapshot(tmp_path) == before and not (tmp_path / "X").exists()
    assert capsys.readouterr().err.startswith("tpurank rank: error: --out-dir: rank does not use it")


@pytest.mark.parametrize("stage", sorted(OVERRIDES))
def test_a_stage_option_and_the_run_wide_one_it_replaces_are_not_both_taken(
    stage: str, tmp_path: Path, capsys
) -> None:
    own, shown, dest = OVERRIDES[stage]
    value = ["--file", str(tmp_path / "s.csv")] if own == "file" else [str(tmp_path)]
    value = ["--out", str(tmp_path / "o")] if own == "out" else value
    with pytest.raises(SystemExit) as e:
        main([stage, *value, FLAGS[dest], str(tmp_path)])
    assert e.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tpurank {stage}: error: {FLAGS[dest]}: ignored when {shown} is given; give one of them"
    ]
