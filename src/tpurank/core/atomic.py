"""Atomic file writes: write to a temporary file beside the target, then rename.

An interrupted run never leaves a half-written output, so "the file exists" means "the file is
complete", which is what makes every stage resumable.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from tpurank.core.errors import DiskFullError, TpurankError

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


def write_model(
    target: str | Path,
    write: Callable[[Path], object],
    suffix: str = "",
    errors: tuple[type[BaseException], ...] = (),
) -> None:
    """Write a model file through `write(tmp)`, atomically; a failed write is one line naming `target`.

    Model libraries do not say "disk full" as an OSError: LightGBM raises LightGBMError ("Cannot
    write binary data to <tmp>") and torch a RuntimeError from its zip writer ("enforce fail at
    inline_container.cc"). Every model file goes through here, so each of them reads the same.

    Args:
        target: the model file.
        write: writes the model to the temporary path it is given.
        suffix: ending the temporary file needs (LightGBM and torch keep the name they are given).
        errors: the writer's own error types (besides OSError) that mean the write failed.

    Raises:
        DiskFullError: no space left (the device has under 1 MiB free when the write failed).
        TpurankError: any other failed write; the temporary file is gone, a previous model kept.
    """
    target = Path(target)
    with atomic_path(target, suffix) as tmp:  # it removes the temporary file whatever happens
        try:
            write(tmp)
        except (OSError, *errors) as e:
            # measured before the partial file is removed: removing it frees what it took
            if is_disk_full(e) or _free_bytes(target.parent) < 1 << 20:
                raise DiskFullError(target) from None
            reason = _first_line(e).replace(str(tmp), "its temporary file")
            raise TpurankError(
                f"{target}: could not write the model ({reason}); disk full? A model written before "
                "is kept: free some space and rerun"
            ) from None


def _first_line(e: BaseException) -> str:
    """The first non-empty line of an error (torch's span several), without Python's `[Errno N]`."""
    if isinstance(e, OSError) and e.strerror:
        return e.strerror
    lines = [x.strip() for x in str(e).splitlines() if x.strip()]
    return lines[0] if lines else type(e).__name__


def _free_bytes(folder: Path) -> int:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 1 << 62  # unknown: say what the writer said


def write_bytes(target: str | Path, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_text(target: str | Path, text: str) -> None:
    write_bytes(target, text.encode())


def write_json(target: str | Path, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n")
