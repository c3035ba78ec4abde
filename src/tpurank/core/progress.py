"""Progress bars: tqdm's bars on a terminal, a plain line every few seconds elsewhere.

In a notebook cell or a log file a redrawn bar becomes hundreds of partial lines (`\\r` updates). When
the bar's stream is not a terminal, this tqdm prints whole lines instead: one when it starts, one
every `TPURANK_PROGRESS_SECONDS` (default 10; tpurank.core.env checks it) and one when it ends.
tqdm's own environment options apply as usual, e.g. `TQDM_DISABLE=1` for no bars at all. Every
tpurank module imports tqdm from here.
"""

from __future__ import annotations

import math
import sys
import time
from typing import Any

from tqdm import tqdm as _tqdm

from tpurank.core.env import PROGRESS_SECONDS

_LINES_ONLY = False  # set by `lines_only`: processes that share a terminal print whole lines


def lines_only() -> None:
    """Plain lines from here on, even on a terminal: for worker processes side by side, whose
    redrawn bars would overwrite each other's."""
    global _LINES_ONLY
    _LINES_ONLY = True


def _is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


class tqdm(_tqdm):  # noqa: N801 - a drop-in for tqdm.tqdm
    """tqdm.tqdm that prints plain lines, at most every few seconds, when its stream is not a terminal."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # until tqdm's own __init__ sets it: a bar whose settings fail (a bad $TPURANK_PROGRESS_SECONDS)
        # is closed by __del__, which must find it disabled rather than fail a second time
        self.disable = True
        stream = kwargs.get("file") or sys.stderr
        self._lines = _LINES_ONLY or not _is_terminal(stream)
        if self._lines:
            kwargs.setdefault("mininterval", PROGRESS_SECONDS.read())
            kwargs.setdefault("ascii", True)
            kwargs.setdefault("ncols", 100)
        self._last_line_t = -math.inf
        super().__init__(*args, **kwargs)

    def refresh(self, nolock: bool = False, lock_args: Any = None) -> bool | None:
        # set_postfix and set_description refresh on every call: in line mode at most one line
        # per interval (update() already waits for it)
        if self.disable:  # a disabled bar has no settings at all
            return None
        if self._lines and time.time() - self._last_line_t < self.mininterval:
            return False
        return super().refresh(nolock, lock_args)

    def display(self, msg: str | None = None, pos: int | None = None) -> bool:
        if not self._lines:
            return super().display(msg, pos)
        if msg == "":  # tqdm clearing a bar: nothing to clear in line mode
            return True
        line = (msg if msg is not None else self.__str__()).strip()
        if line:
            self.fp.write(line + "\n")
            self.fp.flush()
            self._last_line_t = time.time()
        return True

    def clear(self, nolock: bool = False) -> None:
        # tqdm.write() clears every open bar first ("\r"): nothing to clear in line mode
        if not self._lines:
            super().clear(nolock)

    def close(self) -> None:
        if not self._lines:
            return super().close()
        if self.disable:
            return
        if getattr(self, "last_print_n", None) != self.n:
            self.display()  # the final state, once
        self.disable = True
        self._decr_instances(self)
