"""The process's own peak resident set, reset at will (Linux VmHWM): the memory benches read each
training step's, call's or graph's own peak this way, not the largest the process reached so far.

Only the benches measure this (bench_gnn_memory.py, bench_scoring_memory.py, bench_steps_memory.py
and bench_gnn_pace.py's workers), so it lives here and not in the package.
"""

from __future__ import annotations

from pathlib import Path


def reset_peak_rss() -> None:
    """Start the process's peak resident set (VmHWM) afresh (Linux), so `peak_rss_gb` measures
    from here."""
    Path("/proc/self/clear_refs").write_text("5")


def peak_rss_gb() -> float:
    """The process's peak resident set since start or the last `reset_peak_rss` (GB; Linux)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1e6
    return float("nan")
