"""Peak memory of tpurank stages, each alone (a child process tree) or one after another in one
process, as `all` runs them.

Alone (default): each stage runs as `python -m tpurank STAGE ...` and its process tree is sampled
every 0.5 s (`bench_all.tree_memory`): the peak RSS summed over the tree, which counts a page shared
by several processes once in each, and the peak PSS summed over it (shared pages split among their
sharers: prepare's workers share the interpreter's pages).

`--one-process`: the stages run in this process through `tpurank.cli.main`, as `all`'s steps do;
before each the peak resident set is reset (VmHWM), after each come its peak, the RSS it left, and
the RSS after `all`'s release between steps (`--no-release`: none, as `all` did before 2026-11-26).

Stages are separated by `;`, and every stage gets the arguments after `--`:

    .venv/bin/python bench/runs/bench_steps_memory.py "prepare --no-progress" -- --profile cpu \\
        --data-dir /big/synthetic-full --out-dir /tmp/out --work-dir /tmp/work
    .venv/bin/python bench/runs/bench_steps_memory.py --one-process \\
        "features ; train --model lgbm ; predict --model lgbm --split valid" -- --profile cpu ...
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402
from bench_all import PYTHON, SAMPLE_S, tree_memory  # noqa: E402
from peak_rss import peak_rss_gb, reset_peak_rss  # noqa: E402

GB = 1e9


def alone(stage: list[str]) -> dict:
    """Run one stage as a child; its exit code, seconds and the tree's peak RSS and PSS."""
    t0 = time.perf_counter()
    proc = subprocess.Popen([PYTHON, "-m", "tpurank", *stage], cwd=ROOT)
    ps = psutil.Process(proc.pid)
    peak_rss = peak_pss = 0
    while proc.poll() is None:
        rss, pss = tree_memory(ps)
        peak_rss, peak_pss = max(peak_rss, rss), max(peak_pss, pss)
        time.sleep(SAMPLE_S)
    return {
        "exit": proc.returncode,
        "seconds": round(time.perf_counter() - t0, 1),
        "peak_rss_gb": round(peak_rss / GB, 3),
        "peak_pss_gb": round(peak_pss / GB, 3),
    }


def rss_gb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / GB
    return float("nan")


def in_process(stage: list[str], release: bool) -> dict:
    """Run one stage in this process; its exit code, seconds, peak, and the RSS it leaves."""
    from tpurank import cli
    from tpurank.core.memory import release_between_steps
    from tpurank.prepare.store import CHUNKS

    reset_peak_rss()
    start, t0 = rss_gb(), time.perf_counter()
    rc = cli.main(stage)
    peak, left = peak_rss_gb(), rss_gb()
    if release:
        CHUNKS.clear()
        release_between_steps()
    return {
        "exit": rc,
        "seconds": round(time.perf_counter() - t0, 1),
        "rss_at_start_gb": round(start, 3),
        "peak_rss_gb": round(peak, 3),
        "left_gb": round(left, 3),
        "after_release_gb": round(rss_gb(), 3),
    }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawTextHelpFormatter
    )
    ap.add_argument("stages", help="stages and their own options, separated by ';'")
    ap.add_argument(
        "--one-process", action="store_true", help="run the stages in this process, as `all` does"
    )
    ap.add_argument("--no-release", action="store_true", help="with --one-process: no release between stages")
    ap.add_argument("--json", type=Path, help="write the results here too")
    ap.add_argument(
        "common",
        nargs=argparse.REMAINDER,
        help="-- then the arguments every stage gets:\n--profile --data-dir --out-dir --work-dir --set ...",
    )
    args = ap.parse_args()
    common = args.common[1:] if args.common[:1] == ["--"] else args.common
    results = []
    for text in args.stages.split(";"):
        stage = [*text.split(), *common]
        row = in_process(stage, not args.no_release) if args.one_process else alone(stage)
        results.append({"stage": text.strip(), **row, "provenance": provenance.stamp()})
        print(json.dumps(results[-1]), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return max((r["exit"] for r in results), default=0)


if __name__ == "__main__":
    sys.exit(main())
