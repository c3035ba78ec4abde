"""One graph's ranking in the user's own config indices, and its score where runtimes were measured."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.metrics import graph_metrics, normalized_runtime, order_from_costs
from tpurank.rank.candidates import Candidates


@dataclass
class Ranking:
    """A graph's configs, fastest predicted first.

    Args:
        source: the user's file.
        graph: the graph's name (a tile protobuf holds one graph per kernel).
        kind: "layout" or "tile".
        collection: the collection whose models ranked it.
        model: the model that ranked it ("ensemble" or a member).
        order: the file's config indices, fastest predicted first.
        cost: the predicted cost of each, in that order (lower = faster; a ranking score, not seconds).
        runtime: the measured runtime of each (ns), in that order; 0 where not measured.
        normalizer: tile: each one's runtime normalizer, in that order (None: 1).
    """

    source: Path
    graph: str
    kind: str
    collection: str
    model: str
    order: np.ndarray
    cost: np.ndarray
    runtime: np.ndarray
    normalizer: np.ndarray | None = None

    @classmethod
    def of(cls, c: Candidates, collection: str, model: str, costs: np.ndarray) -> Ranking:
        """The ranking of `c` from a model's costs per config of its graph."""
        by = order_from_costs(costs)
        norm = c.normalizer[by] if c.normalizer is not None else None
        return cls(
            c.source, c.name, c.kind, collection, model, c.file_index[by], costs[by], c.runtime[by], norm
        )

    @property
    def relative(self) -> np.ndarray:
        """Each config's predicted cost above the predicted best (0 for the first)."""
        return self.cost - self.cost[0] if len(self.cost) else self.cost

    @property
    def measured(self) -> int:
        """How many configs have a measured runtime."""
        return int((self.runtime > 0).sum())

    def scores(self) -> dict[str, float] | None:
        """The ranking scored against the measured runtimes (None with fewer than 2 measured).

        Over the measured configs only: `score` (Kendall tau for layout; 2 - top-5 slowdown for
        tile, as the competition), `slowdown@1` (the measured runtime of the predicted best over the
        true best), `slowdown@5`, and for layout `pair_accuracy`. Tile runtimes are divided by
        their normalizers first, as the competition scores them.
        """
        keep = self.runtime > 0
        if keep.sum() < 2:
            return None
        # `order` is already fastest first: the measured configs keep that order among themselves
        within = np.arange(int(keep.sum()))
        runtime = normalized_runtime(
            self.runtime[keep], None if self.normalizer is None else self.normalizer[keep]
        )
        return graph_metrics(self.collection, within, runtime)

    def rows(self) -> list[dict[str, Any]]:
        """One row per config, fastest predicted first (what `rank --out` writes)."""
        return [
            {
                "file": str(self.source),
                "graph": self.graph,
                "rank": i + 1,
                "config": int(cfg),
                "predicted_cost": float(cost),
                "relative_cost": float(rel),
                "measured_runtime_ns": int(rt) if rt > 0 else None,
            }
            for i, (cfg, cost, rel, rt) in enumerate(
                zip(self.order, self.cost, self.relative, self.runtime, strict=True)
            )
        ]

    def summary(self) -> dict[str, Any]:
        """What the JSON output says of the graph besides its rows."""
        scores = self.scores()
        clean = {k: (None if math.isnan(v) else v) for k, v in (scores or {}).items()}
        return {
            "file": str(self.source),
            "graph": self.graph,
            "kind": self.kind,
            "collection": self.collection,
            "model": self.model,
            "configs": len(self.order),
            "measured": self.measured,
            "scores": clean or None,
        }
