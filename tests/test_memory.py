"""tpurank.memory: the heap's free pages go back to the system between training steps.

Its effect on memory is measured at full scale (bench/bench_scale.py, README "Scale"); a small
heap here gives free pages back on its own, so this only checks that the call runs where it can.
"""

from __future__ import annotations

import sys

from tpurank.memory import release_free_memory


def test_malloc_trim_runs_on_linux() -> None:
    assert release_free_memory() is sys.platform.startswith("linux")
