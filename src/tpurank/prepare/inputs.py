"""Which discovered files `prepare` can build: one line for each it cannot, the rest go on.

A dangling symbolic link (or a link loop) is named and skipped; a graph with 0 configs
(featurize-pb writes one for a pb without runs) is skipped with a warning in train and valid, and
is a failure in test.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from pathlib import Path

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.links import not_a_file
from tpurank.data.dataset import GraphFile, dangling
from tpurank.data.npz import read_header


def broken_links(
    npz_root: Path, collections: Iterable[str] | None, splits: Iterable[str] | None
) -> list[str]:
    """One error line per `*.npz` name that is not a regular file (discover leaves them out)."""
    return [f"{gf.path}: {not_a_file(gf.path)}: skipped" for gf in dangling(npz_root, collections, splits)]


def without_configs(files: list[GraphFile]) -> tuple[list[GraphFile], list[str], list[str]]:
    """(the files with at least one config, a warning line per train/valid file without, an
    error line per test file without).

    A graph with 0 configs (featurize-pb writes one for a pb without runs) has nothing to learn
    from or score, so it is skipped; a test graph without configs cannot get a submission row,
    so it is a failure. A file whose header cannot be read is left to the build's one line.
    """
    keep: list[GraphFile] = []
    skipped: list[str] = []
    failed: list[str] = []
    for gf in files:
        try:
            empty = read_header(gf.path, gf.kind)[1]["config_runtime"][0] == 0
        except TpurankError:
            empty = False
        if not empty:
            keep.append(gf)
        elif gf.split == "test":
            failed.append(f"{gf.path}: 0 configs: a test graph needs at least one for its submission row")
        else:
            skipped.append(f"{gf.path}: 0 configs: nothing to learn from or score, skipped")
    return keep, skipped, failed


def without_excluded(files: list[GraphFile], cfg: Config) -> tuple[list[GraphFile], list[str]]:
    """(the files but the train graphs matching `prepare.exclude`, a note saying how many were left out).

    A pattern matches the graph's ID (`layout:xla:default:unet_3d.4x4.bf16`) or its name; each
    collection's own patterns apply (its [collections] override).
    """
    patterns: dict[str, list[str]] = {}
    keep: list[GraphFile] = []
    out: list[GraphFile] = []
    for gf in files:
        if gf.collection not in patterns:
            patterns[gf.collection] = cfg.for_collection(gf.collection).prepare.exclude
        pats = patterns[gf.collection]
        hit = gf.split == "train" and any(fnmatch.fnmatchcase(n, p) for p in pats for n in (gf.id, gf.stem))
        (out if hit else keep).append(gf)
    if not out:
        return keep, []
    return keep, [f"prepare.exclude left {len(out)} train graph(s) out of training, e.g. {out[0].id}"]
