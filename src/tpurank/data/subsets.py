"""The official validation subsets: at most 1,000 configs per valid layout graph.

The official evaluation scores each valid layout graph on a fixed subset of its configs, listed in
`eval_indices/{xla,nlp}_{default,random}.json` (graph name -> config indices) of the TpuGraphs
release. `prepare` stores each graph's subset in the cache (where the folder is present), training
validates on it, and `score` / `validate` can score on it.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from tpurank.core.collections import LAYOUT_COLLECTIONS
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
