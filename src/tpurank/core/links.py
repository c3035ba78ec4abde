"""Paths that are not what they seem: symbolic link loops, dangling links, folders named `*.npz`.

Python 3.11's `Path.resolve()` raises a RuntimeError ("Symlink loop from ...") on a link that leads
back to itself, which no `except OSError` catches. Every path a user names or a tree walk finds is
resolved here instead, so such a link is one line naming it, never a traceback.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tpurank.core.errors import TpurankError

LOOP = "a symbolic link loop (it leads back to itself)"


def resolve(path: str | Path) -> Path:
    """The absolute path with every link followed, as `Path.resolve()`.

    Raises:
        TpurankError: the path (or a folder on it) is a symbolic link loop.
    """
    try:
        return Path(path).resolve()
    except RuntimeError:  # pathlib's "Symlink loop from ..." (3.11, 3.12)
        raise TpurankError(f"{path}: {LOOP}") from None
    except OSError as e:  # ELOOP from a later Python
        if e.errno == errno.ELOOP:
            raise TpurankError(f"{path}: {LOOP}") from None
        raise


def not_a_file(path: Path) -> str | None:
    """Why `path` cannot be read as a data file (a loop, a dangling link, a folder, a FIFO), or None
    for a regular file (through links)."""
    if path.is_file():
        return None
    if path.is_symlink():
        try:
            os.stat(path)
        except OSError as e:
            return LOOP if e.errno == errno.ELOOP else "a symbolic link to a missing file"
    if path.is_dir():
        return "a folder"
    if not path.exists():
        return "no such file"
    return "not a regular file (a FIFO, socket or device)"
