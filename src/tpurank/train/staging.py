"""A (re)training never touches the finished model until it completes.

Training writes into a staging folder beside the model's folder (`models/<M>/.next-<collection>/`),
which starts as a hard-linked copy of the finished one: a trainer sees its finished model there
(so it can tell it is up to date and skip), and every write, made by renaming a new file into
place (tpurank.core.atomic), replaces a link in the staging folder, never the finished file's
bytes. Only when training returns is the staging folder swapped in for the finished one.

A failure (an error, a full disk) removes the staging folder: what it holds is a mix of new and
finished files that no rerun should build on, and on a full disk it is the space the user needs
back. An interruption (Ctrl-C, SIGKILL) keeps it: it holds the resume state (`last.pt`), so
rerunning the same command resumes the retrain. Either way the finished model, and so the
predictions and report made from it, stay as they were.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.core.paths import STAGING_PREFIX, Paths

OLD_PREFIX = ".old-"  # the finished folder, for the instant between the two renames of a swap
NEW_PREFIX = ".new-"  # a staging folder being linked together (appears whole or not at all)


def recover(final: Path) -> None:
    """Finish a swap that was killed between its two renames (the old folder is still whole)."""
    old = final.with_name(OLD_PREFIX + final.name)
    if old.is_dir():
        if final.exists():
            shutil.rmtree(old)
        else:
            old.rename(final)


def staging_folder(paths: Paths, model: str, collection: str) -> Path:
    """Where (`model`, `collection`) is (re)trained: `models/<M>/.next-<collection>/`."""
    return dataclasses.replace(paths, staging=True).model_dir(model, collection)


def _staging_folder(final: Path) -> Path:
    """The staging folder of `final`, made (as links to its files) when there is none yet; a
    half-linked one is removed when making it fails."""
    staging = final.with_name(STAGING_PREFIX + final.name)
    if staging.is_dir():
        return staging  # an interrupted retrain's: it holds the resume state
    new = final.with_name(NEW_PREFIX + final.name)
    shutil.rmtree(new, ignore_errors=True)
    try:
        if final.is_dir():
            shutil.copytree(final, new, copy_function=os.link)
        else:
            new.mkdir(parents=True)
        new.rename(staging)
    except BaseException:
        shutil.rmtree(new, ignore_errors=True)
        raise
    return staging


def publish(staging: Path, final: Path) -> None:
    """Swap the completed staging folder in for the finished one; a swap that fails puts the
    finished folder back."""
    old = final.with_name(OLD_PREFIX + final.name)
    if final.exists():
        final.rename(old)
    try:
        staging.rename(final)
    except BaseException:
        if old.is_dir() and not final.exists():
            old.rename(final)
        raise
    shutil.rmtree(old, ignore_errors=True)


def discard(paths: Paths, model: str, collection: str) -> None:
    """Remove the staging folder of (`model`, `collection`): its training failed, or was stopped
    because another collection's did (tpurank.train.collection_processes)."""
    shutil.rmtree(staging_folder(paths, model, collection), ignore_errors=True)


def _named_as_published(e: TpurankError, staging: Path, final: Path) -> None:
    """Name the files of an error by the finished folder the user knows, not the hidden staging
    folder: until a retrain writes them, its files are that folder's files (hard links)."""
    e.args = tuple(a.replace(str(staging), str(final)) if isinstance(a, str) else a for a in e.args)


@contextmanager
def staged(paths: Paths, model: str, collection: str) -> Iterator[Paths]:
    """Paths whose model folder for (`model`, `collection`) is its staging folder; published when
    the block ends without an exception, removed when it fails (a rerun links the finished folder
    afresh, as the user left it), kept for a resume when it is interrupted (KeyboardInterrupt is
    no Exception)."""
    final = paths.model_dir(model, collection)
    recover(final)
    staging = _staging_folder(final)
    try:
        yield dataclasses.replace(paths, staging=True)
        publish(staging, final)
    except Exception as e:
        shutil.rmtree(staging, ignore_errors=True)
        if isinstance(e, TpurankError):
            _named_as_published(e, staging, final)
        raise
