"""LightGBM on a shared machine: `train --model lgbm` quiet, and with cores kept busy by another program.

On a run `./run.sh all` left (its features built), it times `tpurank train --model lgbm --force`
three ways, one after the other: on a quiet machine; with `--busy-cores` cores spinning in other
processes (lgbm.threads = 0: the cores free when it starts); and busy again with one thread per
core forced (`--set lgbm.threads=<cores>`, how it ran before it looked at the machine). It prints
each time and its ratio to the quiet one; the target is the busy run within 2x of the quiet one.

    .venv/bin/python bench/runs/bench_lgbm_shared.py --out-dir . --repeats 2
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
PYTHON = sys.executable
TARGET = 2.0


def train(out: str, data: str | None, sets: list[str]) -> float:
    """Seconds of one `train --model lgbm --force` (its process start included)."""
    cmd = [PYTHON, "-m", "tpurank", "train", "--model", "lgbm", "--force", "--out-dir", out]
    cmd += ["--data-dir", data] if data else []
    cmd += [x for s in sets for x in ("--set", s)]
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    t = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"train lgbm failed: {r.stderr.strip().splitlines()[-1:]}")
    return time.perf_counter() - t


def busy(n: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(n)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", default=str(ROOT), help="the out folder of a finished `all` (default: here)")
    ap.add_argument("--data-dir", help="its data root (default: what the out folder's run used)")
    ap.add_argument("--busy-cores", type=int, default=1, help="cores other programs keep busy (default 1)")
    ap.add_argument("--repeats", type=int, default=1, help="runs of each way; the median is kept")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    ways = {"quiet": ([], 0), "busy": ([], args.busy_cores)}
    ways[f"busy, {cores} threads forced"] = ([f"lgbm.threads={cores}"], args.busy_cores)
    times: dict[str, float] = {}
    for name, (sets, n) in ways.items():
        runs = []
        for _ in range(args.repeats):
            spinners = busy(n)
            try:
                runs.append(train(args.out_dir, args.data_dir, sets))
            finally:
                for s in spinners:
                    s.kill()
        times[name] = sorted(runs)[len(runs) // 2]
        print(f"{name:<28} {times[name]:7.1f} s  ({times[name] / times['quiet']:.2f}x quiet)", flush=True)
    ratio = times["busy"] / times["quiet"]
    print(f"busy / quiet = {ratio:.2f} (target <= {TARGET:g}): {'PASS' if ratio <= TARGET else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
