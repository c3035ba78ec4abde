"""The suite's time against an earlier commit's, side by side: `./run.sh test` in two clean clones in turn.

The time of `./run.sh test` depends as much on the machine as on the tests: the same commit's suite
takes much longer on some days than on others. A time measured on another day says little; a ratio
measured in one run does. This script clones HEAD and `--against REV` side by side (with `../shared`
beside them where the checkout has it, so both run the same real-sample tests), sets up each clone's
own `.venv`, then runs `./run.sh test --durations=20` in each in turn, `--pairs` times (HEAD first
in odd pairs, second in even ones, so a drift evens out), with bytecode cached in both (`PYTHONDONTWRITEBYTECODE` unset), and saves each run's pytest seconds, its
counts and its 20 slowest tests, the medians and the ratio of each pair (HEAD over REV).

    .venv/bin/python bench/runs/bench_suite.py --against REV --pairs 2 --out bench/results/suite.json
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402

# pytest's last line: `1 failed, 1773 passed, 6 warnings in 154.50s (0:02:34)`
SUMMARY = re.compile(
    r"^=* ?(?P<counts>\d+ (?:failed|passed|errors?|skipped)\b.*?) in (?P<seconds>[\d.]+)s", re.M
)
SLOW = re.compile(r"^(?P<seconds>[\d.]+)s (?P<phase>call|setup|teardown) +(?P<test>.+?)\s*$", re.M)


def git(*args: str) -> str:
    """A git command's output; a failure is one line naming it."""
    r = subprocess.run(["git", *args], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"bench_suite: git {' '.join(args)} failed: {r.stderr.strip()[-300:]}")
    return r.stdout.strip()


def clone(rev: str, where: Path) -> Path:
    """A clean clone of the checkout at `rev`, its `.venv` set up (the setup is not timed)."""
    git("clone", "-q", str(ROOT), str(where))
    git("-C", str(where), "checkout", "-q", rev)
    r = subprocess.run(["./run.sh", "setup"], cwd=where, capture_output=True, text=True)
    if r.returncode != 0:
        said = (r.stdout + r.stderr).strip()[-500:]
        raise SystemExit(f"bench_suite: ./run.sh setup failed at {rev}: {said}")
    return where


def run_suite(checkout: Path) -> dict:
    """One `./run.sh test --durations=20` in `checkout`: pytest's seconds, counts and slowest 20."""
    # bytecode cached in both (an earlier run.sh did not unset it), so both suites pay the same
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    r = subprocess.run(
        ["./run.sh", "test", "--durations=20"], cwd=checkout, env=env, capture_output=True, text=True
    )
    found = SUMMARY.search(r.stdout)
    if found is None:
        raise SystemExit(f"bench_suite: no pytest summary in {checkout}: {r.stdout.strip()[-500:]}")
    slow = [
        {"seconds": float(m["seconds"]), "phase": m["phase"], "test": m["test"]}
        for m in SLOW.finditer(r.stdout)
    ]
    return {
        "exit": r.returncode,
        "counts": found["counts"],
        "pytest_s": float(found["seconds"]),
        "slowest": slow,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--against", required=True, help="the earlier commit (any git revision)")
    ap.add_argument("--pairs", type=int, default=2, help="HEAD/REV pairs timed (default 2)")
    ap.add_argument("--out", type=Path, required=True, help="results JSON")
    args = ap.parse_args()
    against = git("-C", str(ROOT), "rev-parse", "--verify", f"{args.against}^{{commit}}")
    with tempfile.TemporaryDirectory(prefix="bench-suite-") as tmp:
        shared = ROOT.parent / "shared"
        if shared.is_dir():
            (Path(tmp) / "shared").symlink_to(shared)
        checkouts = {
            "head": clone(provenance.COMMIT_AT_START or "HEAD", Path(tmp) / "head"),
            "against": clone(against, Path(tmp) / "ref"),
        }
        runs: dict[str, list[dict]] = {name: [] for name in checkouts}
        for pair in range(args.pairs):
            order = list(checkouts) if pair % 2 == 0 else list(reversed(checkouts))
            for name in order:
                runs[name].append(run_suite(checkouts[name]))
                last = runs[name][-1]
                print(f"pair {pair + 1}: {name} {last['pytest_s']} s ({last['counts']})", flush=True)
    ratios = [
        round(h["pytest_s"] / a["pytest_s"], 3) for h, a in zip(runs["head"], runs["against"], strict=True)
    ]
    results = {
        "provenance": provenance.stamp(),
        "what": "`./run.sh test --durations=20` in clean clones of HEAD and of an earlier commit, in turn",
        "against": against,
        "runs": runs,
        "median_s": {
            name: round(statistics.median(r["pytest_s"] for r in rs), 2) for name, rs in runs.items()
        },
        "head_over_against": ratios,
        "median_head_over_against": statistics.median(ratios),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=1) + "\n")
    print(
        f"median: HEAD {results['median_s']['head']} s, {args.against} {results['median_s']['against']} s; ratios {ratios}"
    )


if __name__ == "__main__":
    main()
