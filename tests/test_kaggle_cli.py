"""download/submit without credentials say how to provide them; the code dataset builds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(tmp_path / "nokaggle")}
    return subprocess.run(
        [sys.executable, "-m", "tpurank", *args], capture_output=True, text=True, env=env, cwd=ROOT
    )


@pytest.mark.parametrize("stage", ["download", "submit"])
def test_no_credentials_gives_instructions(stage: str, tmp_path: Path) -> None:
    args = [stage, "--data-dir", str(tmp_path / "data"), "--out-dir", str(tmp_path / "out")]
    if stage == "submit":
        sub = tmp_path / "out" / "submissions"
        sub.mkdir(parents=True)
        (sub / "submission.csv").write_text("ID,TopConfigs\n")
        args += ["--file", str(sub / "submission.csv")]
    r = _run(args, tmp_path)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "kaggle.json" in err[0] and "KAGGLE_USERNAME" in err[0]


def test_build_code_dataset_offline(tmp_path: Path) -> None:
    dest = tmp_path / "code"
    r = subprocess.run(
        [sys.executable, "-m", "tpurank", "build-code-dataset", "--dest", str(dest), "--no-extra-wheels"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    # at the top level: `kaggle datasets create` skips subfolders unless --dir-mode is given
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    assert len(wheels) == 1 and wheels[0].startswith("tpurank-")
    assert [p for p in dest.iterdir() if p.is_dir()] == []
    meta = json.loads((dest / "dataset-metadata.json").read_text())
    assert meta["id"].endswith("/tpurank-code")
