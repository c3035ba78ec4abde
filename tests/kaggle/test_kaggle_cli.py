"""download/submit without credentials say how to provide them; the code dataset builds."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from runners import forked

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], tmp_path: Path) -> subprocess.CompletedProcess:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KAGGLE_CONFIG_DIR": str(tmp_path / "nokaggle")}
    env["TPURANK_HOME"] = str(tmp_path)  # the child never resolves the checkout as its project root
    return forked(*args, env=env, cwd=ROOT)  # a process of its own with only `env`, its imports inherited


@pytest.mark.parametrize("stage", ["download", "submit"])
def test_no_credentials_gives_instructions(stage: str, tmp_path: Path) -> None:
    args = [stage, "--data-dir", str(tmp_path / "data")]
    if stage == "submit":  # download takes no --out-dir (it writes only the data root)
        sub = tmp_path / "out" / "submissions"
        sub.mkdir(parents=True)
        (sub / "submission.csv").write_text("ID,TopConfigs\n")
        args += ["--file", str(sub / "submission.csv")]
    r = _run(args, tmp_path)
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "kaggle.json" in err[0] and "KAGGLE_USERNAME" in err[0]


def _tracked_notebooks() -> dict[Path, bytes]:
    return {f: f.read_bytes() for f in sorted((ROOT / "notebooks").rglob("*")) if f.is_file()}


def _build_code(dest: Path, tmp_path: Path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    return forked(
        *["build-code-dataset", "--dest", str(dest), "--no-extra-wheels", *extra],
        cwd=ROOT,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "TPURANK_HOME": str(tmp_path), **env},
    )


def test_build_code_dataset_offline(tmp_path: Path) -> None:
    """No username anywhere: one warning line, the placeholder, and the tracked notebooks untouched."""
    before = _tracked_notebooks()
    dest = tmp_path / "code"
    r = _build_code(dest, tmp_path)
    assert r.returncode == 0, r.stderr[-2000:]
    # at the top level: `kaggle datasets create` skips subfolders unless --dir-mode is given
    wheels = sorted(p.name for p in dest.glob("*.whl"))
    assert len(wheels) == 1 and wheels[0].startswith("tpurank-")
    assert [p.name for p in dest.iterdir() if p.is_dir()] == ["kernels"]  # not uploaded with the dataset
    meta = json.loads((dest / "dataset-metadata.json").read_text())
    assert meta["id"] == "YOUR_KAGGLE_USERNAME/tpurank-code"
    warning = r.stderr.strip().splitlines()
    assert (
        len(warning) == 1
        and "warning: no Kaggle credentials found" in warning[0]
        and "KAGGLE_USERNAME" in warning[0]
    )
    assert f"kaggle kernels push -p {dest / 'kernels' / 'tpurank-inference'}" in r.stdout
    assert _tracked_notebooks() == before


def test_build_code_dataset_owner_from_flag_or_env_never_in_tracked_files(tmp_path: Path) -> None:
    before = _tracked_notebooks()
    dest = tmp_path / "code"
    r = _build_code(dest, tmp_path, KAGGLE_USERNAME="env-user")
    assert r.returncode == 0 and r.stderr == "", r.stderr[-2000:]
    inference = json.loads((dest / "kernels/tpurank-inference/kernel-metadata.json").read_text())
    assert inference["id"] == "env-user/tpurank-inference"
    assert inference["dataset_sources"] == ["env-user/tpurank-code", "env-user/tpurank-models"]
    assert (dest / "kernels/tpurank-inference/kaggle_inference.ipynb").read_bytes() == (
        before[ROOT / "notebooks/inference/kaggle_inference.ipynb"]
    )
    r = _build_code(dest, tmp_path, "--kaggle-user", "flag-user", KAGGLE_USERNAME="env-user")
    assert r.returncode == 0, r.stderr[-2000:]
    training = json.loads((dest / "kernels/tpurank-submission/kernel-metadata.json").read_text())
    assert training["id"] == "flag-user/tpurank-submission"
    assert training["dataset_sources"] == ["flag-user/tpurank-code"]
    assert training["code_file"] == "kaggle_submission.ipynb"
    assert (dest / "kernels/tpurank-submission/kaggle_submission.ipynb").is_file()
    assert json.loads((dest / "dataset-metadata.json").read_text())["id"] == "flag-user/tpurank-code"
    assert _tracked_notebooks() == before


@pytest.mark.parametrize("user", ["YOUR_KAGGLE_USERNAME", "<user>"])
def test_build_code_dataset_refuses_a_placeholder_owner(tmp_path: Path, user: str) -> None:
    dest = tmp_path / "code"
    r = _build_code(dest, tmp_path, "--kaggle-user", user)
    err = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(err) == 1, r.stderr[-2000:]
    assert (
        f"--kaggle-user {user!r} is a placeholder: pass your Kaggle user name or set KAGGLE_USERNAME"
        in err[0]
    )
    assert not dest.exists()  # refused before anything is built
