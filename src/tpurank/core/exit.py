"""The command's exit, without unloading every module first.

A Python process ends by tearing down each module it imported. For torch, PyTorch Geometric and
LightGBM that takes over a second (bench/LOG.md), paid by every `rank`, `tune` and stage a script
runs, for memory the operating system frees at once anyway. `exit_now` does what a normal exit
does for the command's results (finish the threads, run the exit handlers, flush stdout and
stderr) and then ends the process.
"""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn


def exit_now(rc: int) -> NoReturn:
    """End the process with status `rc` once the exit handlers ran and the streams are flushed.

    Falls back to Python's own exit (`SystemExit`) while a non-daemon thread still runs, which that
    exit waits for, or when a stream cannot be flushed, which it reports.

    Args:
        rc: the exit status.
    """
    others = [t for t in threading.enumerate() if t is not threading.main_thread() and not t.daemon]
    if others:
        raise SystemExit(rc)
    if not _flushed():
        raise SystemExit(rc)  # before any exit handler ran: Python's exit runs them once, and reports
    atexit._run_exitfuncs()  # tempfile's finalizers, logging's flush, multiprocessing's children
    os._exit(rc if _flushed() else rc or 1)  # a handler's output that could not be written fails the exit


def _flushed() -> bool:
    """Whether stdout and stderr took what they hold."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):
        return False
    return True
