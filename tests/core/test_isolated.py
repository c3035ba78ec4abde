"""A call in a fresh process (tpurank.core.isolated): its exit code, its one-line errors, a kill said."""

from __future__ import annotations

import functools
import os
import signal

import pytest

from tpurank.core.errors import TpurankError
from tpurank.core.isolated import run_isolated, signal_name
from tpurank.stages import guarded


def exits_with(code: int) -> int:
    return code


def writes_then_fails(path: str) -> int:
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    raise TpurankError(f"{path}: written, then failed")


def killed() -> int:
    os.kill(os.getpid(), signal.SIGKILL)
    return 0


@pytest.mark.parametrize("code", [0, 3])
def test_the_childs_exit_code_is_returned(code: int) -> None:
    assert run_isolated(functools.partial(exits_with, code)) == code


def test_an_expected_failure_in_the_child_is_one_line_and_its_files_stay(tmp_path, capfd) -> None:
    out = tmp_path / "pid.txt"
    assert (
        run_isolated(functools.partial(guarded, "predict", functools.partial(writes_then_fails, str(out))))
        == 1
    )
    err = capfd.readouterr().err
    assert f"tpurank predict: error: {out}: written, then failed" in err and "Traceback" not in err
    assert int(out.read_text()) != os.getpid()  # it ran in another process


def test_a_killed_child_is_said_with_its_signal(capfd) -> None:
    assert run_isolated(killed) == 128 + signal.SIGKILL
    assert "killed by SIGKILL (out of memory?)" in capfd.readouterr().err
    assert signal_name(200) == "signal 200"
