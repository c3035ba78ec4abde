"""A (re)training never touches the finished model until it completes.

Training writes into a staging folder beside the model's folder (`models/<M>/.next-<collection>/`),
which starts as a hard-linked copy of the finished one: a trainer sees its finished model there
(so it can tell it is up to date and skip), and every write, made by renaming a new file into
place (tpurank.core.atomic), replaces a link in the staging folder, never the finished file's
bytes. Only when training returns is the staging folder swapped in for the finished one. Ctrl-C,
SIGKILL or a full disk leave the finished model, and so the predictions and report made from it,
as they were; the staging folder keeps the resume state (`last.pt`), so rerunning the same
command resumes the retrain.
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


def _staging_folder(final: Path) -> Path:
    """The staging folder of `final`, made (as links to its files) when there is none yet."""
    staging = final.with_name(STAGING_PREFIX + final.name)
    if staging.is_dir():
        return staging  # an interrupted retrain's: it holds the resume state
    new = final.with_name(NEW_PREFIX + final.name)
    shutil.rmtree(new, ignore_errors=True)
    if final.is_dir():
        shutil.copytree(final, new, copy_function=os.link)
    else:
        new.mkdir(parents=True)
    new.rename(staging)
    return staging


def publish(staging: Path, final: Path) -> None:
    """Swap the completed staging folder in for the finished one."""
    old = final.with_name(OLD_PREFIX + final.name)
    if final.exists():
        final.rename(old)
    staging.rename(final)
    shutil.rmtree(old, ignore_errors=True)


def _nothing_new(staging: Path, final: Path) -> bool:
    """Every file of the staging folder is still a link to the finished folder's file of that name:
    a retrain that failed before writing anything (a damaged model.pt it could not read)."""
    for f in staging.rglob("*"):
        twin = final / f.relative_to(staging)
        if f.is_file() and not (twin.is_file() and os.path.samefile(f, twin)):
            return False
    return True


def _named_as_published(e: TpurankError, staging: Path, final: Path) -> None:
    """Name the files of an error by the finished folder the user knows, not the hidden staging
    folder: until a retrain writes them, its files are that folder's files (hard links)."""
    e.args = tuple(a.replace(str(staging), str(final)) if isinstance(a, str) else a for a in e.args)


@contextmanager
def staged(paths: Paths, model: str, collection: str) -> Iterator[Paths]:
    """Paths whose model folder for (`model`, `collection`) is its staging folder; published when
    the block ends without an exception, kept for a resume when it does not (dropped when it holds
    nothing of its own, so a rerun links the finished folder afresh, as the user left it)."""
    final = paths.model_dir(model, collection)
    recover(final)
    staging = _staging_folder(final)
    try:
        yield dataclasses.replace(paths, staging=True)
    except TpurankError as e:
        if _nothing_new(staging, final):
            shutil.rmtree(staging, ignore_errors=True)
        _named_as_published(e, staging, final)
        raise
    publish(staging, final)
