"""`TPURANK_*` variables: read only through core/env.py, and never as a module is imported (a read at
import runs before the CLI's check, so a bad value would be a traceback, not its one line: every module
imported with every variable refused is in tests/project/test_imports.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from helpers import ROOT, tpurank

from tpurank.core import env, profiles
from tpurank.core.errors import TpurankError

SRC = ROOT / "src" / "tpurank"


def test_a_bad_chunk_cache_size_is_one_line_before_config_show(tmp_path: Path) -> None:
    r = tpurank(
        "config",
        "show",
        env={"PATH": "/usr/bin:/bin", "TPURANK_CHUNK_CACHE_MB": "1.5", "TPURANK_HOME": str(tmp_path)},
        cwd=tmp_path,
    )
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert r.stderr.splitlines() == [
        "tpurank config: error: $TPURANK_CHUNK_CACHE_MB must be a whole number >= 0, got '1.5'"
    ]


def test_every_variable_is_read_through_core_env() -> None:
    """Outside core/env.py a module reads the environment only for another tool's variables, each named
    as a literal (torchrun's, Kaggle's, OpenMP's, glibc's and torch's): a TPURANK_* variable always
    goes through its checked entry, even when its name sits in a constant."""
    others = {
        "WORLD_SIZE",
        "LOCAL_RANK",
        "KAGGLE_API_ENVIRONMENT",
        "KAGGLE_USERNAME",
        "OMP_NUM_THREADS",
        "MALLOC_MMAP_THRESHOLD_",
        "TORCH_HUGE_PAGES",
    }
    reads = []
    for f in sorted(SRC.rglob("*.py")):
        if f.name == "env.py" and f.parent.name == "core":
            continue
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if re.search(r"os\.environ|getenv", line):
                named = set(re.findall(r"\b([A-Z][A-Z_]+)\b", line)) - {"TPURANK"}
                if not named or not named <= others or "TPURANK_" in line:
                    reads.append(f"{f.relative_to(SRC)}:{n}: {line.strip()}")
    assert reads == []


def test_the_profile_variable_is_a_checked_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    assert env.PROFILE in env.VARIABLES and env.PROFILE.choices == profiles.CHOICES
    monkeypatch.setenv("TPURANK_PROFILE", "h100")
    with pytest.raises(
        TpurankError, match=r"^\$TPURANK_PROFILE must be one of auto, cpu, kaggle-t4, gpu, got 'h100'$"
    ):
        env.check_environment()
    monkeypatch.setenv("TPURANK_PROFILE", " cpu ")
    assert env.PROFILE.read() == "cpu" and profiles.resolve_profile(None).name == "cpu"
