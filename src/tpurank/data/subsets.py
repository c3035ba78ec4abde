"""The configs a layout graph is scored on: at most 1,000, as the official evaluation did.

The official evaluation scores each valid layout graph on a fixed subset of its configs, listed in
`eval_indices/{xla,nlp}_{default,random}.json` (graph name -> config indices) of the TpuGraphs
release. `prepare` stores each graph's subset in the cache (where the folder is present), training
validates on it, and `score` / `validate` can score on it. A layout graph without an official subset
is scored on at most `EVAL_MAX_CONFIGS` configs spread evenly over its list (`scored_configs`): a
valid graph of the real data has up to ~100,000, and scoring each of them with a GNN would cost
more than training it (docs/scale.md), while 1,000 configs measure tau as the competition did.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.collections import LAYOUT_COLLECTIONS, kind_of
from tpurank.core.errors import DataError, TpurankError

EVAL_MAX_CONFIGS = 1000  # the official subsets' size: configs a layout graph is scored on
SPREAD_NOTE = (
    f" (a layout graph with more than {EVAL_MAX_CONFIGS:,} configs on {EVAL_MAX_CONFIGS:,} spread evenly)"
)
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


@functools.lru_cache(maxsize=4096)
def spread_configs(n: int, limit: int = EVAL_MAX_CONFIGS) -> np.ndarray:
    """Original config indices 0..n-1, or `limit` of them spread evenly (deterministic) when n is larger.
    Kept per (n, limit) and read-only: the ensemble's weight grid asks for each graph's many times.

    Args:
        n: configs of the graph.
        limit: the most to keep (0 = all).
    """
    rows = np.arange(n) if limit <= 0 or n <= limit else np.linspace(0, n - 1, limit).round().astype(np.int64)
    rows = np.unique(rows)
    rows.flags.writeable = False
    return rows


def scored_configs(collection: str, n: int) -> np.ndarray | None:
    """The configs a graph of `collection` with `n` configs is scored on where no official subset is
    given: None (all) for tile and for layout graphs of at most `EVAL_MAX_CONFIGS`, else
    `spread_configs(n)`."""
    if kind_of(collection) != "layout" or n <= EVAL_MAX_CONFIGS:
        return None
    return spread_configs(n)


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
    a graph they do not list is scored on all its configs (`scored_configs`: at most 1,000)."""
    if layout_graphs == 0:
        return (
            "No layout graph was scored, so the official subsets changed nothing: all configs of every "
            f"graph scored{SPREAD_NOTE}."
        )
    if on_subset == 0:
        return (
            f"No graph of this data is in the official subsets: all configs of every graph scored "
            f"({layout_graphs} layout graph{'s' if layout_graphs > 1 else ''}){SPREAD_NOTE}."
        )
    if on_subset == layout_graphs:
        return (
            f"Every layout graph ({layout_graphs}) scored on its official subset; tile graphs on all "
            "their configs."
        )
    return (
        f"{on_subset} of {layout_graphs} layout graphs scored on their official subsets; the other "
        f"{layout_graphs - on_subset}, not in the subsets, and every tile graph on all their configs{SPREAD_NOTE}."
    )


def capped_lines(rows: Iterable[Mapping[str, Any]]) -> list[str]:
    """One line per graph scored on fewer configs than it has, once however many models' rows name
    it: a score over 1,000 of a graph's configs must not pass for one over all of them.

    Args:
        rows: per-graph score rows (`submission.score.score_parsed`: `id`, `configs` scored,
            `total_configs`, `subset`).
    """
    lines: dict[str, str] = {}
    for r in rows:
        scored, total = int(r["configs"]), int(r["total_configs"])
        if scored < total and r["id"] not in lines:
            why = (
                "the official validation subset"
                if r["subset"]
                else f"{scored} spread evenly over them, the size of an official validation subset"
            )
            lines[r["id"]] = (
                f"{r['id']}: scored on {scored} of its {total} configs ({why}; --all-configs scores them all)"
            )
    return list(lines.values())
