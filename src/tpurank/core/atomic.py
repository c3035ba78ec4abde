"""Atomic file writes: write to a temporary file beside the target, then rename.

An interrupted run never leaves a half-written output, so "the file exists" means "the file is
complete", which is what makes every stage resumable.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tpurank.core.errors import DiskFullError

_FULL = (errno.ENOSPC, errno.EDQUOT)

_UMASK = os.umask(0)
os.umask(_UMASK)  # read once: mkstemp creates 0600 files, outputs get the usual permissions


@contextlib.contextmanager
def atomic_path(target: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto `target` on success.

    Args:
        target: the final path.
        suffix: ending the temporary file needs (e.g. ".npz": numpy appends one otherwise).
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp" + suffix, dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.chmod(tmp_path, 0o666 & ~_UMASK)
        os.replace(tmp_path, target)
    except OSError as e:
        if is_disk_full(e):
            raise DiskFullError(target) from None
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def is_disk_full(e: BaseException) -> bool:
    """An OSError saying the disk (or quota) is full; pyarrow's carry no errno, only the text."""
    return isinstance(e, OSError) and (e.errno in _FULL or "No space left on device" in str(e))


def write_bytes(target: str | Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: str | Path, text: str) -> None:
    write_bytes(target, text.encode())


def write_json(target: str | Path, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
