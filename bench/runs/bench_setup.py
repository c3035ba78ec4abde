"""The `.venv` setup a first run pays: `./run.sh setup` with uv against the same with pip, side by side.

A new user's first `./run.sh all` creates `.venv` and installs the pinned requirements before the
pipeline starts, so that time is part of the first run (bench/runs/bench_first_run.py). run.sh installs
them with uv, or with pip where uv fails or TPURANK_INSTALLER=pip. This script clones HEAD once,
then times `./run.sh setup` in that clone with each installer in turn (uv, pip, uv, pip, ...), each
from no `.venv` and with empty package caches (a new user's machine: nothing downloaded or unpacked
before), and saves every time, the medians and the pip/uv ratio of each pair, so a drift in the
machine's speed does not enter the ratio.

    .venv/bin/python bench/runs/bench_setup.py --pairs 3 --out bench/results/setup.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402

INSTALLERS = ("uv", "pip")


def timed_setup(clone: Path, installer: str) -> float:
    """Seconds of `./run.sh setup` in `clone` from no `.venv`, with fresh, empty package caches."""
    shutil.rmtree(clone / ".venv", ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="bench-setup-cache-") as cache:
        env = {
            **os.environ,
            "TPURANK_INSTALLER": installer,
            "UV_CACHE_DIR": f"{cache}/uv",
            "PIP_CACHE_DIR": f"{cache}/pip",
        }
        start = time.perf_counter()
        r = subprocess.run(["./run.sh", "setup"], cwd=clone, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - start
    if r.returncode != 0:
        raise SystemExit(f"bench_setup: ./run.sh setup with {installer} failed: {r.stderr.strip()[-500:]}")
    if installer == "uv" and "installing with pip" in r.stderr:
        raise SystemExit("bench_setup: uv failed and run.sh fell back to pip: no uv time to report")
    return seconds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=3, help="uv/pip pairs timed (default 3)")
    ap.add_argument("--out", type=Path, required=True, help="results JSON")
    args = ap.parse_args()
    times: dict[str, list[float]] = {name: [] for name in INSTALLERS}
    with tempfile.TemporaryDirectory(prefix="bench-setup-") as tmp:
        clone = Path(tmp) / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        for pair in range(args.pairs):
            for name in INSTALLERS:
                times[name].append(round(timed_setup(clone, name), 1))
                print(f"pair {pair + 1}: {name} {times[name][-1]} s", flush=True)
    ratios = [round(p / u, 2) for u, p in zip(times["uv"], times["pip"], strict=True)]
    results = {
        "provenance": provenance.stamp(),
        "what": "`./run.sh setup` from no .venv with empty package caches, uv then pip in turn",
        "seconds": times,
        "median_s": {name: statistics.median(t) for name, t in times.items()},
        "pip_over_uv": ratios,
        "median_pip_over_uv": statistics.median(ratios),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(f"median: uv {results['median_s']['uv']} s, pip {results['median_s']['pip']} s; pip/uv {ratios}")


if __name__ == "__main__":
    main()
