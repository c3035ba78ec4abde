"""`all` as a user runs it, measured from outside: wall time per step, peak RSS per step, disk.

Runs `python -m tpurank all ARGS...` as a child and samples the resident memory of its whole
process tree (every 0.5 s). Each sample is charged to the step the child last announced on stderr
(`[all] step k/N <name>:`; before the first step: `data and plan`), so the table gives each step's
wall time and peak memory twice: RSS summed over the tree, which counts a page shared by several
processes (prepare's workers share the interpreter's and libraries' pages) once in each, and PSS
summed over the tree (`Pss` of /proc/PID/smaps_rollup: a shared page split among its sharers), the
tree's real memory. With one process the two differ only by the pages it shares with others. At the end it reports the run against its budget (the `all` summary's last
line), the disk the run's folders hold (`du` of the out and work folders, and of the data root),
and whether the submission was written. `--busy-cores N` keeps N cores busy with spinning
processes for the whole run (a laptop running other things), `--fresh` empties the out and work
folders first. The log of the child goes to `--log`; the results to `--json` (atomically).

    .venv/bin/python bench/runs/bench_all.py --json bench/results/recipe1_full.json --log /tmp/all.log -- \\
        --data-dir /big/synthetic-full --budget 90m --out-dir /big/out --work-dir /big/work
    .venv/bin/python bench/runs/bench_all.py --busy-cores 1 --json bench/results/budget5m_busy.json -- --budget 5m
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402

PYTHON = sys.executable
STEP_LINE = re.compile(r"^\[all\] step (\d+)/(\d+) (.+?): ")
SKIP_LINE = re.compile(r"^\[all\] (.+?): up to date, skipped")
BEFORE = "data and plan"
AFTER = "submission and summary"
SAMPLE_S = 0.5


def pss_bytes(pid: int) -> int:
    """A process's proportional set size (Linux smaps_rollup; 0 where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_memory(proc: psutil.Process) -> tuple[int, int]:
    """(RSS, PSS) bytes summed over `proc` and every descendant (children that vanish mid-sample
    count 0)."""
    rss = pss = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            rss += p.memory_info().rss
        except psutil.Error:
            continue
        pss += pss_bytes(p.pid)
    return rss, pss


def start_busy(n: int) -> list[subprocess.Popen]:
    """N processes each spinning one core (a user's other work)."""
    return [subprocess.Popen([PYTHON, "-c", "while True: pass"]) for _ in range(n)]


def du_bytes(folder: str | None) -> int | None:
    """Bytes a folder holds on disk (`du -sb`), None when it is not given or absent."""
    if not folder or not Path(folder).exists():
        return None
    out = subprocess.run(["du", "-sb", folder], capture_output=True, text=True, check=False).stdout
    return int(out.split()[0]) if out else None


def option(argv: list[str], name: str) -> str | None:
    """The value of `--name VALUE` in the child's argv, None when absent."""
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else None


def new_step(start_s: float, skipped: bool = False) -> dict:
    return {"start_s": start_s, "peak_rss": 0, "peak_pss": 0, "skipped": skipped}


class Watch:
    """Reads the child's stderr (teeing it to the log) and charges RSS samples to its current step."""

    def __init__(self, proc: subprocess.Popen, log: Path) -> None:
        self.proc, self.log = proc, log
        self.step, self.t0 = BEFORE, time.perf_counter()
        self.steps: dict[str, dict] = {BEFORE: new_step(0.0)}
        self.lines: list[str] = []

    def read(self) -> None:
        with self.log.open("a") as log:
            for line in self.proc.stderr:
                log.write(line)
                log.flush()
                self.lines.append(line.rstrip("\n"))
                if m := STEP_LINE.match(line):
                    self.enter(m.group(3))
                elif m := SKIP_LINE.match(line):
                    self.steps[m.group(1)] = new_step(self.now(), skipped=True)
        self.enter(AFTER)

    def now(self) -> float:
        return round(time.perf_counter() - self.t0, 1)

    def enter(self, name: str) -> None:
        self.step = name
        self.steps.setdefault(name, new_step(self.now()))

    def sample(self, ps: psutil.Process) -> None:
        while self.proc.poll() is None:
            rss, pss = tree_memory(ps)
            rec = self.steps[self.step]
            rec["peak_rss"] = max(rec["peak_rss"], rss)
            rec["peak_pss"] = max(rec["peak_pss"], pss)
            time.sleep(SAMPLE_S)


def measure(argv: list[str], log: Path, busy: int) -> dict:
    """Run `all argv` and return what it measured."""
    spinners = start_busy(busy)
    try:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [PYTHON, "-m", "tpurank", "all", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        watch = Watch(proc, log)
        reader = threading.Thread(target=watch.read, daemon=True)
        reader.start()
        watch.sample(psutil.Process(proc.pid))
        stdout = proc.stdout.read()
        proc.wait()
        reader.join(timeout=30)
        seconds = time.perf_counter() - t0
    finally:
        for s in spinners:
            s.kill()
    with log.open("a") as f:
        f.write(stdout)
    return {
        "argv": argv,
        "busy_cores": busy,
        "seconds": round(seconds, 1),
        "exit": proc.returncode,
        "steps": step_table(watch),
        "summary": [x for x in stdout.splitlines() if "budget of" in x],
        "stdout_tail": stdout.splitlines()[-40:],
        "stderr_tail": watch.lines[-20:],
    }


def step_table(watch: Watch) -> list[dict]:
    """Each step with its wall time (to the next step's start) and peak RSS."""
    names = list(watch.steps)
    end = watch.now()
    rows = []
    for i, name in enumerate(names):
        rec = watch.steps[name]
        nxt = next((watch.steps[n]["start_s"] for n in names[i + 1 :]), end)
        rows.append(
            {
                "step": name,
                "seconds": round(nxt - rec["start_s"], 1),
                "skipped": rec["skipped"],
                "peak_rss_gb": round(rec["peak_rss"] / 1e9, 3),
                "peak_pss_gb": round(rec["peak_pss"] / 1e9, 3),
            }
        )
    return rows


def markdown(result: dict) -> str:
    rows = ["| step | wall | peak RSS (tree) | peak PSS (tree) |", "|---|---|---|---|"]
    for r in result["steps"]:
        wall = "skipped" if r["skipped"] else f"{r['seconds'] / 60:.1f} min"
        rows.append(f"| {r['step']} | {wall} | {r['peak_rss_gb']:.2f} GB | {r['peak_pss_gb']:.2f} GB |")
    return "\n".join(rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path, help="write the results here (atomically)")
    ap.add_argument(
        "--log", type=Path, default=Path("/tmp/bench_all.log"), help="the child's stderr and stdout"
    )
    ap.add_argument("--busy-cores", type=int, default=0, help="cores kept busy by other processes meanwhile")
    ap.add_argument("--fresh", action="store_true", help="empty the run's --out-dir and --work-dir first")
    ap.add_argument(
        "argv",
        nargs=argparse.REMAINDER,
        help="-- then the arguments of `tpurank all`: --data-dir, --budget, --out-dir, --work-dir, --profile, ...",
    )
    args = ap.parse_args()
    argv = args.argv[1:] if args.argv[:1] == ["--"] else args.argv
    if args.fresh:
        for folder in (option(argv, "--out-dir"), option(argv, "--work-dir")):
            if folder and Path(folder).exists():
                subprocess.run(["rm", "-rf", folder], check=True)
    args.log.parent.mkdir(parents=True, exist_ok=True)
    args.log.write_text("")
    result = measure(argv, args.log, args.busy_cores)
    out, work = option(argv, "--out-dir"), option(argv, "--work-dir")
    result["disk_bytes"] = {
        "out": du_bytes(out),
        "work": du_bytes(work),
        "data": du_bytes(option(argv, "--data-dir")),
    }
    sub = Path(out or ROOT) / "submissions" / "submission.csv"
    result["submission"] = sub.exists()
    result["peak_rss_gb"] = max((r["peak_rss_gb"] for r in result["steps"]), default=0.0)
    result["peak_pss_gb"] = max((r["peak_pss_gb"] for r in result["steps"]), default=0.0)
    result["provenance"] = provenance.stamp()
    print(markdown(result))
    print(
        f"exit {result['exit']}, {result['seconds'] / 60:.1f} min, peak RSS {result['peak_rss_gb']:.2f} GB "
        f"(PSS {result['peak_pss_gb']:.2f} GB), "
        f"disk {result['disk_bytes']}, submission {'written' if result['submission'] else 'MISSING'}"
    )
    for line in result["summary"]:
        print(line)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        tmp = args.json.with_suffix(".tmp")
        tmp.write_text(json.dumps(result, indent=1))
        os.replace(tmp, args.json)
    return 0 if result["exit"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
