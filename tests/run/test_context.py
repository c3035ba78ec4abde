"""Where a command's folders and config come from (tpurank.run.context): each decided once, in the
order its docstring writes, and the config left to the commands that take it from elsewhere."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from tpurank.cli import COMMANDS, command_module, command_parser
from tpurank.run.context import CONFIG_ELSEWHERE, OWN_DATA, resolve_command


def _args(stage: str, *argv: str) -> argparse.Namespace:
    required = {"train": ["--model", "gnn"], "predict": ["--model", "gnn", "--split", "valid"]}
    return command_parser(stage, command_module(stage)).parse_args([*required.get(stage, []), *argv])


@pytest.mark.parametrize("stage", ["prepare", "train", "predict", "validate", "all", "infer"])
def test_a_command_gets_its_paths_and_its_config_once(stage: str, tmp_path: Path) -> None:
    own = ["--models-dataset", str(tmp_path / "m")] if stage == "infer" else []
    argv = [*own, "--out-dir", str(tmp_path / "out")]
    args = _args(stage, *argv)
    resolve_command(stage, args)
    assert args.paths.out == tmp_path / "out"
    assert hasattr(args, "cfg") is (stage not in CONFIG_ELSEWHERE)


def test_the_lists_name_real_commands() -> None:
    assert set(OWN_DATA) <= set(COMMANDS) and set(CONFIG_ELSEWHERE) <= set(COMMANDS)
    assert "all" in OWN_DATA and "all" in CONFIG_ELSEWHERE  # it finds or makes its data, then its config


def test_all_generates_with_the_seed_the_user_set(tmp_path: Path) -> None:
    from tpurank.run.context import seed_before_data

    args = _args("all", "--set", "seed=7", "--out-dir", str(tmp_path))
    assert seed_before_data(args) == 7
