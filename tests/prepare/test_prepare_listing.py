"""`prepare` keys its step record over the listing of the data tree, not only its regular files: an
entry it reports (a FIFO or a folder named `x.npz`) added after a successful run is looked at and
reported again, never passed over as "up to date"."""

from __future__ import annotations

import os

from helpers import common, error_lines

from tpurank.cli import main
from tpurank.core.paths import Paths

PREPARE = ["prepare", "--jobs", "1", "--no-progress"]


def test_an_odd_entry_added_after_a_run_is_reported_not_up_to_date(run_copy: Paths, capsys) -> None:
    assert main([*PREPARE, *common(run_copy)]) == 0
    assert main([*PREPARE, *common(run_copy)]) == 0
    assert any("up to date" in ln for ln in error_lines(capsys))
    train = run_copy.npz / "tile/xla/train"
    fifo, folder = train / "pipe.npz", train / "folder.npz"
    os.mkfifo(fifo)
    folder.mkdir()
    assert main([*PREPARE, *common(run_copy)]) == 1  # looked at again, each named
    lines = error_lines(capsys)
    assert not any("up to date" in ln for ln in lines)
    assert f"tpurank prepare: error: {folder}: a folder: skipped" in lines
    assert f"tpurank prepare: error: {fifo}: not a regular file (a FIFO, socket or device): skipped" in lines
    assert main([*PREPARE, *common(run_copy)]) == 1  # and again while they are there
    assert sum(": skipped" in ln for ln in error_lines(capsys)) == 2
    fifo.unlink()
    folder.rmdir()
    assert main([*PREPARE, *common(run_copy)]) == 0
    assert not any(": error: " in ln for ln in error_lines(capsys))
