"""A call in a fresh process (tpurank.core.isolated): its exit code, its one-line errors, a kill said."""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tpurank.core.errors import TpurankError
from tpurank.core.isolated import run_isolated, signal_name
from tpurank.core.lock import output_lock
from tpurank.run.stages import guarded


def exits_with(code: int) -> int:
    return code


def writes_then_fails(path: str) -> int:
    with open(path, "w") as f:
        f.write(str(os.getpid()))
    raise TpurankError(f"{path}: written, then failed")


def locks_and_writes(folder: str) -> int:
    """A step's body: lock its output folder (as `StageRun` does) and write a file in it."""
    with output_lock(folder, "validate"):
        Path(folder, "validation.md").write_text("written")
    return 0


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


def test_a_step_in_a_child_writes_under_the_lock_its_parent_holds(tmp_path: Path) -> None:
    """`all` holds the reports folder's lock for the whole run; its `validate` step, run in a child,
    writes there. Another process is still refused while the run holds it."""
    reports = tmp_path / "reports"
    with output_lock(reports, "all"):
        assert run_isolated(functools.partial(locks_and_writes, str(reports))) == 0
        code = f"from tpurank.core.lock import output_lock as o\nwith o({str(reports)!r}, 'x'): pass"
        # through a shell that stays its parent: a process of another run, not a child of this one
        other = subprocess.run(
            ["sh", "-c", f'"{sys.executable}" -c "$0"; exit $?', code], capture_output=True, text=True
        )
    assert (reports / "validation.md").read_text() == "written"
    assert (
        other.returncode != 0
        and f"{reports} is in use by another tpurank run (pid {os.getpid()}" in other.stderr
    )
