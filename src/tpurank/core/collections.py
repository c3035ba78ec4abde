"""The five collections and the three splits: the names every stage shares."""

from __future__ import annotations

from pathlib import Path

from tpurank.core.errors import TpurankError

# In the order of sample_submission.csv; the competition score is the plain mean over these five.
COLLECTIONS: tuple[str, ...] = (
    "tile:xla",
    "layout:xla:default",
    "layout:xla:random",
    "layout:nlp:default",
    "layout:nlp:random",
)
LAYOUT_COLLECTIONS: tuple[str, ...] = COLLECTIONS[1:]
SPLITS: tuple[str, ...] = ("train", "valid", "test")
KINDS: tuple[str, ...] = ("layout", "tile")  # what `kind_of` answers


def kind_of(collection: str) -> str:
    """'tile' or 'layout'."""
    check_collection(collection)
    return collection.split(":")[0]


def check_collection(collection: str) -> str:
    if collection not in COLLECTIONS:
        raise TpurankError(f"unknown collection {collection!r}; expected one of {', '.join(COLLECTIONS)}")
    return collection


def collection_dir(collection: str) -> Path:
    """`tile:xla` -> tile/xla, `layout:nlp:random` -> layout/nlp/random (relative to npz_all/npz)."""
    return Path(*check_collection(collection).split(":"))
