"""The suite gives the same result whatever the checkout holds and whatever the user exported.

A slice of the suite runs in a copy of the checkout that holds what a demo run leaves behind (the
demo data and the record naming it, the models, an interrupted run's half-written folder) with a
user's `TPURANK_*` variables set, as they would be after `./run.sh all` and a few commands by hand.
The slice is the tests that once read that state: `config show` without `--data-dir` and a models
dataset built from the checkout's own folders.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

SLICE = [
    "tests/report/test_config_show.py::test_config_show_prints_every_key_and_round_trips",
    "tests/report/test_config_show.py::test_config_show_names_the_profile_and_the_set_layers",
    "tests/report/test_config_show.py::test_source_is_the_last_layer_that_sets_a_key",
    "tests/kaggle/test_models_dataset.py::test_models_trained_on_synthetic_data_are_refused_in_one_line",
    "tests/core/test_config_paths.py",
]


def checkout_copy(dest: Path) -> Path:
    """The checkout's files as a fresh clone of it holds them (tracked, and new ones not ignored) in `dest`."""
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for rel in filter(None, files.decode().split("\0")):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def leave_a_demo_run(copy: Path, tiny_root: Path) -> None:
    """What `./run.sh all` on the demo data, then an interrupted rerun, leave in the checkout."""
    data = copy / "data"
    shutil.copytree(tiny_root, data / "synthetic-demo")
    (data / ".last-data-root").write_text("synthetic-demo\n")
    model = copy / "models" / "lgbm" / "layout-xla-random"
    model.mkdir(parents=True)
    (model / "model.txt").write_text("not a model\n")
    (copy / "features" / "prepared" / ".next-layout-xla-random").mkdir(parents=True)
    (copy / "reports").mkdir()
    (copy / "reports" / "budget-plan.json").write_text('{"plans": {"x": {"shares": [{"minutes": "5m"}]}}}')


def run_state(copy: Path) -> dict[str, str]:
    """Every file a run keeps in the checkout (data, models, features, reports), by content."""
    return {
        str(f.relative_to(copy)): hashlib.sha256(f.read_bytes()).hexdigest()
        for folder in ("data", "models", "features", "reports")
        for f in sorted((copy / folder).rglob("*"))
        if f.is_file()
    }


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the git checkout to copy its tracked files")
def test_a_slice_of_the_suite_passes_in_a_checkout_holding_a_demo_run(
    tiny_root: Path, tmp_path: Path
) -> None:
    copy = checkout_copy(tmp_path / "checkout")
    leave_a_demo_run(copy, tiny_root)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TPURANK_", "PYTEST_", "COV_"))}
    env |= {
        "PYTHONPATH": str(copy / "src"),  # the copy's package, not the installed checkout's
        "TPURANK_PROFILE": "gpu",
        "TPURANK_DATA": str(copy / "data" / "synthetic-demo"),
        "TPURANK_HOME": str(copy),
        "TPURANK_CHUNK_CACHE_MB": "1",
        "TPURANK_PROGRESS_SECONDS": "0",
    }
    before = run_state(copy)
    cmd = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0"]
    r = subprocess.run([*cmd, *SLICE], cwd=copy, env=env, capture_output=True, text=True, timeout=600)
    tail = (r.stdout + r.stderr)[-3000:]
    assert r.returncode == 0, tail
    assert " passed" in r.stdout and "failed" not in r.stdout, tail
    assert run_state(copy) == before  # and the demo run's files were never touched by the slice
