"""Measuring a step of bench_scale.py as a user runs it: the wall time of a command, and the peak RSS
and bytes read and written of its whole process tree (sampled); decompressing every input array once
(the yardstick of `prepare`); the bytes of a folder."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import psutil

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
GB = 1e9


class TreeMonitor:
    """Peak RSS and I/O of a process and all its descendants, sampled in a thread."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.root = psutil.Process(pid)
        self.every = every
        self.peak_rss = 0
        self.io: dict[int, tuple[int, int]] = {}  # pid -> last (rchar, wchar) seen
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                procs = [self.root, *self.root.children(recursive=True)]
            except psutil.Error:
                break
            rss = 0
            for p in procs:
                try:
                    rss += p.memory_info().rss
                    io = p.io_counters()
                    self.io[p.pid] = (io.read_chars, io.write_chars)
                except psutil.Error:
                    pass
            self.peak_rss = max(self.peak_rss, rss)
            self.stop.wait(self.every)

    def finish(self) -> dict:
        self.stop.set()
        self.thread.join()
        read = sum(r for r, _ in self.io.values())
        written = sum(w for _, w in self.io.values())
        return {"peak_rss": self.peak_rss, "read_bytes": read, "written_bytes": written}


def run_measured(name: str, argv: list[str], log: Path, env: dict | None = None) -> dict:
    """Run `python -m tpurank <argv>` (or any argv starting with a path) and measure its tree."""
    cmd = argv if argv[0].endswith(("python", "python3")) else [PYTHON, "-m", "tpurank", *argv]
    t = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(
            cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT, env={**os.environ, **(env or {})}
        )
        mon = TreeMonitor(proc.pid)
        rc = proc.wait()
    rec = {"stage": name, "seconds": round(time.perf_counter() - t, 2), "rc": rc, **mon.finish()}
    print(
        f"  {name:<28} {rec['seconds']:>8.1f} s  peak {rec['peak_rss'] / GB:5.2f} GB  "
        f"read {rec['read_bytes'] / GB:6.2f} GB  written {rec['written_bytes'] / GB:6.2f} GB"
        + ("" if rc == 0 else f"  FAILED (exit {rc}, log {log})"),
        flush=True,
    )
    return rec


def _decompress_file(path: str) -> int:
    with np.load(path) as z:
        return sum(z[k].nbytes for k in z.files)


def decompress_all(files: list[Path], jobs: int) -> dict:
    """Decompress every array of every file once, in `jobs` processes (prepare's yardstick)."""
    t = time.perf_counter()
    with ProcessPoolExecutor(jobs) as pool:
        total = sum(pool.map(_decompress_file, [str(f) for f in files], chunksize=16))
    return {"seconds": round(time.perf_counter() - t, 2), "decoded_bytes": total, "jobs": jobs}


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) if folder.exists() else 0
