"""One output lock per output folder: two tpurank runs never write the same folder at once.

Every command that writes a folder holds an exclusive `fcntl.flock` on `<folder>/.tpurank.lock`
while it runs (its declaration names them; tpurank.run.stages.execute takes the locks). A second run into a held folder is refused at once with one line naming the folder and
the holder's pid; it does not wait (a waiting run would rebuild what the first just wrote, and a
user who started both by mistake learns of it immediately). The kernel drops the lock when its
holder exits, even on SIGKILL, so a stale lock file never blocks anything. Locks are re-entrant
within a process (`tpurank all` runs the stages in-process) and cover the holder's child processes
(on big data `all` runs each stage in a process of its own).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.core.links import resolve

LOCK_NAME = ".tpurank.lock"
_held: dict[Path, list] = {}  # resolved folder -> [fd, depth]


def _holder(lock_file: Path) -> str:
    try:
        text = lock_file.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return "pid unknown"
    return text or "pid unknown"


def _held_by_parent(lock_file: Path) -> bool:
    """The lock's holder is this process's parent: the same run, which started this process to run
    one of its steps (`tpurank all` on big data), so its lock covers this process too."""
    return _holder(lock_file).startswith(f"pid {os.getppid()}, ")


@contextlib.contextmanager
def output_lock(folder: str | Path, command: str) -> Iterator[Path]:
    """Hold the folder's lock (creating the folder) for the duration of the block.

    Args:
        folder: the output folder a command writes.
        command: the command's name, recorded for the message another run gets.

    Raises:
        TpurankError: when another process holds the folder's lock.
    """
    folder = resolve(folder)  # a link loop: one line naming it
    if folder in _held:
        _held[folder][1] += 1
        try:
            yield folder
        finally:
            _held[folder][1] -= 1
        return
    folder.mkdir(parents=True, exist_ok=True)
    lock_file = folder / LOCK_NAME
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        if not _held_by_parent(lock_file):
            raise TpurankError(
                f"{folder} is in use by another tpurank run ({_holder(lock_file)}); wait for it to finish "
                "or stop it, then rerun (finished outputs are kept)"
            ) from None
        fd = -1  # a step `all` runs in a process of its own (core/isolated.py): its parent holds the lock
    except BaseException:
        os.close(fd)
        raise
    if fd < 0:
        yield folder
        return
    os.ftruncate(fd, 0)
    os.write(fd, f"pid {os.getpid()}, tpurank {command}\n".encode())
    _held[folder] = [fd, 1]
    try:
        yield folder
    finally:
        _held.pop(folder, None)
        os.close(fd)  # closing the descriptor releases the lock; the file stays (harmless)


@contextlib.contextmanager
def output_locks(folders: Iterable[str | Path], command: str) -> Iterator[None]:
    """Hold the locks of several folders (taken in sorted order, so two runs never deadlock)."""
    unique = sorted({resolve(f) for f in folders})
    with contextlib.ExitStack() as stack:
        for f in unique:
            stack.enter_context(output_lock(f, command))
        yield
