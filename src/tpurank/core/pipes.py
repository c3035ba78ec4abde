"""A reader that leaves early (`tpurank config show | head -1`) ends the command quietly.

Python ignores SIGPIPE, so writing to a pipe nobody reads raises BrokenPipeError, which the
stages' one-line error handler would print as "error: Broken pipe" with exit 1. When it is our
stdout that lost its reader, the output was simply not wanted any more: the CLI ends with exit 0
and nothing on stderr, as `head` and `grep -q` users expect. A broken pipe anywhere else (a worker
process that died) stays an error.
"""

from __future__ import annotations

import os
import select
import sys


def stdout_closed() -> bool:
    """Whether stdout is a pipe (or socket) whose reader has gone: a write end with no reader polls
    as an error on Linux and macOS, so this tells our stdout's broken pipe from any other."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by a buffer (tests), or closed
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def end_quietly() -> int:
    """Point stdout at /dev/null, so the flush at interpreter exit cannot raise again, and return
    the exit status 0 (the Python documentation's recipe for SIGPIPE, "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 0
