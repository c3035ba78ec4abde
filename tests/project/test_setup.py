"""run.sh's setup: uv installs from the sources pip is configured with, and a bad choice of installer
is one line before anything is created. (The install itself is timed by bench/runs/bench_setup.py.)"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# what `pip config list` prints on a machine with a mirror, local wheels and a constraints file
PIP_CONFIG = """\
:env:.find-links='/opt/wheels'
global.cert='/etc/ssl/certs/ca-certificates.crt'
global.constraint='/etc/pip/constraints.txt'
global.extra-index-url='file:///opt/a/simple file:///opt/b/simple'
global.index-url='https://mirror.example/simple?token=a=b'
global.timeout='60'
"""


def pip_sources(tmp_path: Path, config: str) -> list[str]:
    """run.sh's pip_sources() on a .venv whose python prints `config` for `-m pip config list`."""
    body = re.search(r"^pip_sources\(\) \{.*?^\}$", (ROOT / "run.sh").read_text(), re.S | re.M)
    assert body, "run.sh has no pip_sources()"
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    (tmp_path / "config.txt").write_text(config)
    python.write_text(f"#!/bin/sh\ncat {tmp_path / 'config.txt'}\n")
    python.chmod(0o755)
    script = f"set -euo pipefail\nVENV={tmp_path / 'venv'}\n{body.group(0)}\npip_sources\n"
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True)
    return r.stdout.splitlines()


def test_uv_is_given_every_source_pip_is_configured_with(tmp_path: Path) -> None:
    assert pip_sources(tmp_path, PIP_CONFIG) == [
        "--find-links",
        "/opt/wheels",
        "--constraint",
        "/etc/pip/constraints.txt",
        "--extra-index-url",
        "file:///opt/a/simple",
        "--extra-index-url",
        "file:///opt/b/simple",
        "--index-url",
        "https://mirror.example/simple?token=a=b",  # an `=` inside a value is kept
    ]


def test_no_pip_configuration_gives_uv_no_options(tmp_path: Path) -> None:
    assert pip_sources(tmp_path, "") == []


def test_values_of_several_lines_no_index_and_the_variables_precedence(tmp_path: Path) -> None:
    """pip.conf's usual list of several lines (printed with `\\n` between them), `no-index` (an
    offline mirror: uv must not reach the default index either), and an index-url set both by a
    variable and in pip.conf: the variable's, listed first, as pip uses it."""
    config = (
        ":env:.index-url='https://from-variable/simple'\n"
        "global.extra-index-url='\\nhttps://a/simple\\nhttps://b/simple'\n"
        "global.index-url='https://from-file/simple'\n"
        "global.no-index='true'\n"
        "install.no-index='false'\n"
    )
    assert pip_sources(tmp_path, config) == [
        "--index-url",
        "https://from-variable/simple",
        "--extra-index-url",
        "https://a/simple",
        "--extra-index-url",
        "https://b/simple",
        "--no-index",
    ]


@pytest.mark.parametrize("value", ["conda", "UV", "pip uv"])
def test_an_unknown_installer_is_one_line_before_anything_is_created(tmp_path: Path, value: str) -> None:
    for name in ("run.sh", "requirements.txt", "pyproject.toml"):
        shutil.copy(ROOT / name, tmp_path / name)
    env = {"PATH": "/usr/bin:/bin", "TPURANK_INSTALLER": value}
    r = subprocess.run(["bash", "run.sh", "setup"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == f"run.sh: error: $TPURANK_INSTALLER must be uv or pip, got '{value}'\n"
    assert not (tmp_path / ".venv").exists()
