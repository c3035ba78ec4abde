"""Discovery of the dataset's graph files, with their collection, split and submission ID."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.collections import COLLECTIONS, SPLITS, check_collection, collection_dir, kind_of
from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import DATA_FIX, NPZ_SUBDIR

# small data (the demo's 17 MB, the tiny test tree) below this much npz: `all` runs its steps in one
# process and `train` its GNN collections side by side; on big data (the real 6+ GB) each step of
# `all`, and each GNN collection, runs in a process of its own, one after another
SMALL_DATA_BYTES = 256 * 2**20


@dataclass(frozen=True, order=True)
class GraphFile:
    """One npz file of the dataset and where it belongs.

    Args:
        collection: one of COLLECTIONS.
        split: train, valid or test.
        stem: the file name without `.npz` (the graph's name).
        path: the file.
    """

    collection: str
    split: str
    stem: str
    path: Path

    @property
    def id(self) -> str:
        """The submission ID, `<collection>:<stem>` (e.g. `layout:xla:default:cd70...`)."""
        return f"{self.collection}:{self.stem}"

    @property
    def kind(self) -> str:
        return kind_of(self.collection)


def discover(
    npz_root: Path,
    collections: Iterable[str] | None = None,
    splits: Iterable[str] | None = None,
    want_existing: bool = True,
) -> list[GraphFile]:
    """Every `<npz_root>/<collection dir>/<split>/*.npz`, ordered by collection, split, then stem.

    Args:
        npz_root: the `npz_all/npz` folder.
        collections: restrict to these (default: all five).
        splits: restrict to these (default: train, valid, test).
        want_existing: False lists only the names that lead nowhere (see `dangling`).
    """
    collections = list(collections or COLLECTIONS)
    splits = list(splits or SPLITS)
    for s in splits:
        if s not in SPLITS:
            raise TpurankError(f"unknown split {s!r}; expected one of {', '.join(SPLITS)}")
    out: list[GraphFile] = []
    for c in COLLECTIONS:
        if c not in collections:
            continue
        for s in SPLITS:
            if s not in splits:
                continue
            folder = npz_root / collection_dir(c) / s
            if folder.is_dir():
                # a name starting with "." is a writer's temporary file (tpurank.core.atomic), never a graph
                found = [p for p in sorted(folder.glob("*.npz")) if p.name[0] != "."]
                # usable: a regular file (through a link); the rest (a dangling link, a FIFO, a folder
                # named .npz) is left out, and `unusable` names it for a one-line report
                out.extend(GraphFile(c, s, p.stem, p) for p in found if p.is_file() == want_existing)
    for c in collections:
        check_collection(c)
    return out


def dangling(
    npz_root: Path, collections: Iterable[str] | None = None, splits: Iterable[str] | None = None
) -> list[GraphFile]:
    """The `*.npz` names under the dataset folders that are not regular files (a symlink whose
    target is gone, a FIFO, a folder): `discover` leaves them out, so a stage can name each in one
    line and go on."""
    return discover(npz_root, collections, splits, want_existing=False)


def classify_path(path: Path) -> tuple[str, str] | None:
    """(collection, split) for a file inside a dataset tree, from its last folders; else None."""
    parts = path.resolve().parts
    if len(parts) >= 4 and parts[-4] == "tile" and parts[-3] == "xla":
        return "tile:xla", parts[-2]
    if len(parts) >= 5 and parts[-5] == "layout":
        collection = f"layout:{parts[-4]}:{parts[-3]}"
        if collection in COLLECTIONS:
            return collection, parts[-2]
    return None


def require_npz_root(npz_root: Path) -> Path:
    if not npz_root.is_dir():
        raise TpurankError(
            f"{npz_root}: no dataset here (expected {NPZ_SUBDIR}/...); {DATA_FIX}, "
            f"or run {command('download')} or generate one with {command('synth')}"
        )
    return npz_root


def npz_bytes(data_root: Path, collections: Iterable[str]) -> int:
    """Bytes of the collections' npz files under `data_root`: from the files' sizes alone, so deciding
    how to run on the data costs no read of it."""
    total = 0
    for c in collections:
        folder = data_root / NPZ_SUBDIR / collection_dir(c)
        total += sum(f.stat().st_size for f in folder.glob("*/*.npz"))
    return total
