"""Worker processes that die with their parent: a killed run leaves no orphans behind.

`ProcessPoolExecutor(..., initializer=die_with_parent, initargs=(os.getpid(),))` makes each
worker ask Linux for SIGKILL when its parent dies (prctl PR_SET_PDEATHSIG), so even a SIGKILL of
the stage (which runs no cleanup) takes its idle workers with it. Elsewhere it does nothing.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1


def die_with_parent(parent_pid: int) -> None:
    """Pool initializer: SIGKILL this process when `parent_pid` exits.

    Args:
        parent_pid: the pid of the process that created the pool (os.getpid() there).
    """
    if not sys.platform.startswith("linux"):
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # no prctl (an unusual libc): workers then end on their own
        return
    if os.getppid() != parent_pid:  # the parent died before prctl took effect
        os.kill(os.getpid(), signal.SIGKILL)
