"""Does the prepared cache belong to the data at hand? `predict` asks before it ranks anything.

The index records, for every graph, the content identity of the npz it was built from and the
build key written into its cache file. A data file rewritten under its own name (configs
reordered) no longer matches the first; a cache file rebuilt with other settings by a `prepare`
that was killed before it wrote the index no longer matches the second. Either way the cache
would rank the wrong configs, so predict stops and says which file.
"""

from __future__ import annotations

from pathlib import Path

from tpurank.core.errors import TpurankError, command
from tpurank.data.dataset import discover
from tpurank.prepare.build import input_identity
from tpurank.prepare.cache import INDEX_FILE, read_build, read_index


def check_cache(prepared: Path, npz_root: Path, collection: str, split: str) -> None:
    """Raise unless every cached graph of `collection`/`split` was built from the npz now present
    under the same name, and is the file the index describes.

    Raises:
        TpurankError: naming the first file that does not match, and what to run.
    """
    index = read_index(prepared)
    if "input" not in index.columns or "key" not in index.columns:
        raise TpurankError(
            f"{prepared / INDEX_FILE}: written by an older tpurank; rerun {command('prepare')}"
        )
    rows = index[(index["collection"] == collection) & (index["split"] == split)]
    if not npz_root.is_dir() or rows.empty:
        return  # nothing to compare: the completeness check names what is missing
    files = {gf.stem: gf for gf in discover(npz_root, [collection], [split])}
    for stem, rel, made_from, key in zip(rows["stem"], rows["path"], rows["input"], rows["key"], strict=True):
        gf = files.get(stem)
        if gf is not None and input_identity(gf) != made_from:
            raise TpurankError(
                f"{gf.path}: not the file the prepared cache was built from (its content changed); "
                f"rerun {command('prepare')}"
            )
        found = read_build(prepared / rel)
        if found is None or found.key != key:
            raise TpurankError(
                f"{prepared / rel}: does not match {prepared / INDEX_FILE} (rebuilt with other settings "
                f"by an interrupted prepare?); rerun {command('prepare')}"
            )
