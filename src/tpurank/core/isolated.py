"""Run a call in a fresh Python process and return its exit code: memory a step leaves behind dies
with its process.

`all` runs its steps one after another; in one process the heap that training and scoring leave
(freed but not returned, however often glibc is trimmed: tpurank.core.memory) stacks up over a long
run, so on the full-scale data `all`'s GNN predictions peaked at 2.3 GB where the same predictions
alone peak at 1.4 GB (docs/scale.md, "Memory on the CPU"). A `spawn` child starts from a clean
interpreter (no fork of a process that holds torch's threads) and costs a few seconds of imports:
nothing on a two-hour run, too much for the demo's short steps, so `all` isolates its steps only on
big data (tpurank.run.pipeline).
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable

from tpurank.core.pipes import end_quietly
from tpurank.core.workers import die_with_parent

STOP_WAIT_S = 30  # after Ctrl-C the child saves what it finished; then it is terminated


def _child(parent_pid: int, call: Callable[[], int]) -> None:
    """The child's body: the call's exit code as the process's. It dies with its parent (a killed
    `all` leaves no step running on); Ctrl-C ends it quietly (the parent says it was interrupted);
    a closed stdout (`| head`) ends it as it ends the CLI."""
    die_with_parent(parent_pid)
    try:
        code = call()
        sys.stdout.flush()
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:
        code = end_quietly()
    sys.stderr.flush()
    raise SystemExit(code)


def exit_code(process: multiprocessing.process.BaseProcess) -> int:
    """A finished child's exit code; a child killed by a signal (the kernel's out-of-memory killer:
    SIGKILL) gives 128 + the signal's number, as a shell says it."""
    code = process.exitcode
    if code is None:
        raise RuntimeError("the child process is still running")
    return 128 - code if code < 0 else code


def run_isolated(call: Callable[[], int]) -> int:
    """`call()` in a fresh `spawn` process; its exit code.

    Args:
        call: a picklable callable (a module-level function, a `functools.partial` of one, an
            object whose class pickles), run once in the child.
    """
    sys.stdout.flush()  # the child writes to the same terminal: what this process said comes first
    sys.stderr.flush()
    process = multiprocessing.get_context("spawn").Process(target=_child, args=(os.getpid(), call))
    process.start()
    try:
        process.join()
    except KeyboardInterrupt:  # on a terminal the child got the same Ctrl-C; from `kill -INT` it did not
        if process.pid is not None and process.is_alive():
            os.kill(process.pid, signal.SIGINT)
        process.join(STOP_WAIT_S)  # it saves what it finished
        raise
    finally:
        if process.is_alive():
            process.terminate()
            process.join()
    if process.exitcode is not None and process.exitcode < 0:
        print(f"its process was killed by {signal_name(-process.exitcode)} (out of memory?)", file=sys.stderr)
    return exit_code(process)


def signal_name(number: int) -> str:
    """`SIGKILL` for 9; the number for one this platform does not name."""
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"
