"""The official validation subsets: at most 1,000 configs per valid layout graph.

The official evaluation scores each valid layout graph on a fixed subset of its configs, listed in
`eval_indices/{xla,nlp}_{default,random}.json` (graph name -> config indices) of the TpuGraphs
release. `prepare` stores each graph's subset in the cache (where the folder is present), training
validates on it, and `score` / `validate` can score on it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.collections import LAYOUT_COLLECTIONS, kind_of
from tpurank.core.errors import DataError, TpurankError

# official eval_indices file of each layout collection, e.g. layout:xla:default -> xla_default.json
SUBSET_FILES = {c: c.removeprefix("layout:").replace(":", "_") + ".json" for c in LAYOUT_COLLECTIONS}


def load_subsets(folder: str | Path) -> dict[str, dict[str, np.ndarray]]:
    """{layout collection: {graph name: config indices}} from the official eval_indices JSONs.

    Raises:
        TpurankError: the folder is missing or holds none of the files.
        DataError: a file is not a JSON object of graph name -> list of indices.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise TpurankError(f"{folder}: no such folder (expected eval_indices/*.json)")
    out: dict[str, dict[str, np.ndarray]] = {}
    for collection, name in SUBSET_FILES.items():
        f = folder / name
        if not f.exists():
            continue
        try:
            data = json.loads(f.read_text())
            out[collection] = {k: np.asarray(v, dtype=np.int64) for k, v in data.items()}
        except (json.JSONDecodeError, TypeError, ValueError, AttributeError, UnicodeDecodeError) as e:
            raise DataError(f, f"not a JSON object of graph name -> list of indices ({e})") from None
        for name, v in data.items():  # a number, or a list of anything but integers, is no subset
            if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
                raise DataError(f, f"graph {name!r}: expected a list of config indices, got {v!r:.60}")
    if not out:
        raise TpurankError(f"{folder}: none of {', '.join(SUBSET_FILES.values())} found")
    return out


def coverage(rows: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(layout graphs scored, those of them scored on their official subset), from per-graph score
    rows (`submission.score.score_parsed`: `id`, `collection`, `subset`); a graph is counted once
    however many models' rows name it."""
    layout: dict[str, bool] = {}
    for r in rows:
        if kind_of(r["collection"]) == "layout":
            layout[r["id"]] = layout.get(r["id"], False) or bool(r["subset"])
    return len(layout), sum(layout.values())


def coverage_sentence(layout_graphs: int, on_subset: int) -> str:
    """What scoring with the official subsets did, in one sentence: they list layout graphs only, and
    a graph they do not list is scored on all its configs."""
    if layout_graphs == 0:
        return (
            "No layout graph was scored, so the official subsets changed nothing: all configs of every "
            "graph scored."
        )
    if on_subset == 0:
        return (
            f"No graph of this data is in the official subsets: all configs of every graph scored "
            f"({layout_graphs} layout graph{'s' if layout_graphs > 1 else ''})."
        )
    if on_subset == layout_graphs:
        return (
            f"Every layout graph ({layout_graphs}) scored on its official subset; tile graphs on all "
            "their configs."
        )
    return (
        f"{on_subset} of {layout_graphs} layout graphs scored on their official subsets; the other "
        f"{layout_graphs - on_subset}, not in the subsets, and every tile graph on all their configs."
    )
