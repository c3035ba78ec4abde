"""Clean clones of this checkout at an earlier commit, for benchmarks that measure HEAD side by side
with it (`bench_gnn_pace.py`, `bench_tune_cost.py`): the same machine, the same minute, two commits.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def git(*args: str, cwd: Path = ROOT) -> str:
    """A git command's output; a failure is one line naming it."""
    r = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"git {' '.join(args)} failed: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def commit_of(rev: str) -> str:
    """The full commit `rev` names (any git revision); a revision that names none stops the bench."""
    return git("rev-parse", "--verify", f"{rev}^{{commit}}")


def checkout_at(rev: str, where: Path) -> Path:
    """A clean clone of this checkout at `rev`, with a `.venv` (this one's where the requirements match)."""
    git("clone", "-q", str(ROOT), str(where))
    git("checkout", "-q", rev, cwd=where)
    if (where / "requirements.txt").read_bytes() == (ROOT / "requirements.txt").read_bytes():
        (where / ".venv").symlink_to(ROOT / ".venv")
        return where
    r = subprocess.run(["./run.sh", "setup"], cwd=where, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"./run.sh setup failed at {rev}: {(r.stdout + r.stderr)[-500:]}")
    return where
