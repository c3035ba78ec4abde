"""A new user's first `./run.sh all`: a fresh clone of HEAD, `.venv` created, the demo pipeline, timed.

The README and docs/validation.md quote what a fresh clone's first run takes and scores; those
figures must come from a run of exactly what a new user types, not from a developer's checkout
(whose `.venv`, features and models are already there). This script clones the repository at HEAD
into a new folder, runs `./run.sh all` there (the `.venv` setup included: a package cache, where
the machine has one, makes it faster, as it does for a user who has one; the results say whether
pip's and uv's were there before it) and saves, from what `all` printed: the validation table
(every model's row and the cross-fitted ensemble line), the time per step, the budget line and how
each GNN stopped; beside them the wall time with the setup, the pipeline's own seconds, the load
averages at the start and the end and the provenance stamp (bench/lib/provenance.py). The clone is
removed afterwards unless `--keep` (its `data/` then holds the demo data for bench_lgbm.py). `all`
prints its log to `--log` as it runs, so a long run can be watched.

The scores do not depend on the machine's load while the GNN's steps are bounded by step counts;
the times do, and the demo's budget shortens training on a slow or busy machine (each GNN's
`stopped` says whether it did).

    .venv/bin/python bench/runs/bench_first_run.py --out bench/results/first_run.json
    .venv/bin/python bench/runs/bench_first_run.py --keep --dir /tmp/first-run --log /tmp/first-run.log
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402

NUMBER = r"-?\d+(?:\.\d+)?"
GNN_LINE = re.compile(
    r"^\[gnn (?P<c>\S+)\] (?P<steps>\d+) steps in (?P<min>[\d.]+) min, stopped: (?P<why>[^;]+)"
)


def validation(lines: list[str]) -> dict[str, Any]:
    """The validation table `all` prints at its end: `columns`, each model's `rows` (column ->
    score) and the ensemble's `cross_fitted` scores (its in-sample row's honest counterpart), from
    the header line `model  tile:xla ... overall` to the line after the last model."""
    start = next((i for i, line in enumerate(lines) if line.split()[:1] == ["model"]), None)
    if start is None:
        return {}
    columns = lines[start].split()[1:]
    rows: dict[str, dict[str, float]] = {}
    cross: dict[str, float] = {}
    for line in lines[start + 1 :]:
        words = line.split()
        if len(words) == len(columns) + 1 and all(re.fullmatch(NUMBER, w) for w in words[1:]):
            rows[words[0]] = {c: float(w) for c, w in zip(columns, words[1:], strict=True)}
        elif "cross-fitted" in line:
            cross = {c: float(v) for c, v in re.findall(rf"(\S+) ({NUMBER})(?:,|$)", line.split("):", 1)[1])}
            break
        else:
            break
    return {"columns": columns, "rows": rows, "cross_fitted": cross}


def steps(lines: list[str]) -> dict[str, float]:
    """The `time per step:` block: each step's seconds, `total` last."""
    out: dict[str, float] = {}
    start = next((i for i, line in enumerate(lines) if line.strip() == "time per step:"), None)
    for line in lines[start + 1 :] if start is not None else []:
        m = re.fullmatch(rf"\s+(.+?)\s+({NUMBER}) s", line)
        if not m:
            break
        out[m[1]] = float(m[2])
    return out


def parse(log: str) -> dict[str, Any]:
    """What `./run.sh all` printed, as saved in the results (see the module docstring)."""
    lines = [line.rstrip() for line in log.splitlines()]
    budget = [line for line in lines if re.match(r"total \S+: .*budget", line)]
    gnn = [
        {"collection": m["c"], "steps": int(m["steps"]), "minutes": float(m["min"]), "stopped": m["why"]}
        for m in map(GNN_LINE.match, lines)
        if m
    ]
    return {
        "synthetic": any("SYNTHETIC" in line for line in lines),
        "validation": validation(lines),
        "steps_s": steps(lines),
        "budget_line": budget[-1] if budget else None,
        "plan": [line for line in lines if line.startswith("[all] budget ")],
        "gnn": gnn,
    }


def user_env() -> dict[str, str]:
    """This process's environment as a new user's shell has it: no virtualenv of this checkout active
    and no PYTHONPATH pointing into it."""
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    venv = str(ROOT / ".venv")
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if not p.startswith(venv))
    return env


def run(clone: Path, log_path: Path) -> tuple[int, float, str]:
    """`./run.sh all` in the clone, its output to the log as it comes: (exit code, wall s, output)."""
    start = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.run(
            ["./run.sh", "all"], cwd=clone, stdout=log, stderr=subprocess.STDOUT, env=user_env()
        )
    return proc.returncode, time.monotonic() - start, log_path.read_text(errors="replace")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="the results file (JSON); printed only without it")
    p.add_argument("--repo", default=str(ROOT), help="what to clone (default: this checkout; its HEAD)")
    p.add_argument("--dir", type=Path, help="where to clone (default: a new folder in the temp dir)")
    p.add_argument("--log", type=Path, help="all's output (default: first_run.log beside the clone)")
    p.add_argument("--keep", action="store_true", help="keep the clone (its data/ holds the demo data)")
    a = p.parse_args()
    clone = a.dir or Path(tempfile.mkdtemp(prefix="first-run-"))
    if clone.exists() and any(clone.iterdir()):
        sys.exit(f"bench: {clone} is not empty")
    log_path = a.log or clone.with_name(clone.name + ".log")
    subprocess.run(["git", "clone", "-q", a.repo, str(clone)], check=True)
    commit = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True
    ).stdout.strip()
    # whether the package caches were there before the setup (the setup creates them)
    pip_cache = Path(os.environ.get("PIP_CACHE_DIR", Path.home() / ".cache" / "pip")).is_dir()
    uv_cache = Path(os.environ.get("UV_CACHE_DIR", Path.home() / ".cache" / "uv")).is_dir()
    load_start = list(os.getloadavg())
    print(f"bench: {a.repo} at {commit[:7]} in {clone}; ./run.sh all, log {log_path}", flush=True)
    code, wall, log = run(clone, log_path)
    found = parse(log)
    prov = provenance.stamp()
    prov["commit"] = commit  # the clone's HEAD: what ran (the checkout's HEAD may have moved meanwhile)
    results = {
        "provenance": prov,
        "what": "a fresh clone's `./run.sh all` (the .venv setup included), the demo data",
        "command": f"git clone {a.repo} {clone} && cd {clone} && ./run.sh all",
        "exit": code,
        "pip_cache": pip_cache,
        "uv_cache": uv_cache,
        "wall_s_with_venv_setup": round(wall, 1),
        "pipeline_s": found["steps_s"].get("total"),
        "load_start": load_start,
        "load_end": list(os.getloadavg()),
        **found,
    }
    text = json.dumps(results, indent=1)
    if a.out:
        a.out.write_text(text + "\n")
        print(f"bench: wrote {a.out}")
    else:
        print(text)
    if not a.keep:
        shutil.rmtree(clone, ignore_errors=True)
    return 0 if code == 0 and found["validation"] else 1


if __name__ == "__main__":
    sys.exit(main())
