"""Content identity of files: what every cache key and step record names instead of a timestamp.

A touched or copied file with the same bytes keeps its identity; a rewritten one gets a new one.
Zip files (npz inputs, `.tpg` cache files, prediction npz) are named by their central directory:
each member's name, CRC-32 and size, read without decompressing anything. Every other file is
named by a BLAKE2b digest of its bytes.
"""

from __future__ import annotations

import hashlib
import stat
import zipfile
from collections.abc import Iterable
from pathlib import Path

from tpurank.core.errors import DataError

ZIP_SUFFIXES = (".npz", ".tpg")  # files we read as zip archives: their central directory names them
DIGEST_BYTES = 16
READ_BLOCK = 1 << 20


def _hasher() -> hashlib.blake2b:
    return hashlib.blake2b(digest_size=DIGEST_BYTES)


def regular_file(path: Path) -> None:
    """Refuse anything but a regular file (a FIFO would block the reader forever).

    Raises:
        DataError: naming the file and what it is.
    """
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    except OSError as e:
        raise DataError(path, f"cannot read ({e.strerror or e})") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a FIFO, socket or device)"
        raise DataError(path, kind)


def zip_identity(path: Path) -> str:
    """Digest of a zip's central directory: member names, CRC-32s and sizes (nothing decompressed).

    Raises:
        DataError: the file is not a readable zip.
    """
    regular_file(path)
    h = _hasher()
    try:
        with zipfile.ZipFile(path) as z:
            for info in z.infolist():
                h.update(f"{info.filename}\0{info.CRC:08x}\0{info.file_size}\n".encode())
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        raise DataError(path, f"not a readable zip/npz file ({e})") from None
    return "zip:" + h.hexdigest()


def file_digest(path: Path) -> str:
    """BLAKE2b digest of a file's bytes.

    Raises:
        DataError: the file is missing, not a regular file, or unreadable.
    """
    regular_file(path)
    h = _hasher()
    try:
        with path.open("rb") as f:
            while block := f.read(READ_BLOCK):
                h.update(block)
    except OSError as e:
        raise DataError(path, f"cannot read ({e.strerror or e})") from None
    return "b2:" + h.hexdigest()


def file_identity(path: Path) -> str:
    """The content identity of one file (zip central directory for npz/tpg, else its digest)."""
    path = Path(path)
    return zip_identity(path) if path.suffix in ZIP_SUFFIXES else file_digest(path)


def tree_files(root: Path) -> list[Path]:
    """The files under `root` (or `root` itself), sorted, leaving out hidden ones (locks, temp files)."""
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(
        f
        for f in root.rglob("*")
        if f.is_file() and not any(part.startswith(".") for part in f.relative_to(root).parts)
    )


def tree_identity(roots: Iterable[Path]) -> str:
    """One identity for several files and folders: every file's relative path and identity.

    A missing root counts as missing (it changes the identity when it appears).
    """
    h = _hasher()
    for root in roots:
        root = Path(root)
        h.update(f"[{root.name}]{'' if root.exists() else ' missing'}\n".encode())
        for f in tree_files(root):
            rel = f.relative_to(root).as_posix() if f != root else f.name
            h.update(f"{rel}\0{file_identity(f)}\n".encode())
    return h.hexdigest()
