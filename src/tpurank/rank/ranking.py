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
        calibration: the runtime (ns) each was calibrated with, in that order, 0 where it was
            not; None: ranked without measurements (`rank` without `--measured`).
        notes: one line each about its calibration (e.g. a model that could not learn from it).
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
    calibration: np.ndarray | None = None
    notes: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        c: Candidates,
        collection: str,
        model: str,
        costs: np.ndarray,
        calibration: np.ndarray | None = None,
    ) -> Ranking:
        """The ranking of `c` from a model's costs per config of its graph.

        Args:
            c: the graph.
            collection: the collection whose models ranked it.
            model: the model that ranked it.
            costs: the cost of each config of the graph, in its order.
            calibration: the runtime each config was calibrated with, in the graph's order (0:
                not); None: not calibrated.
        """
        by = order_from_costs(costs)
        norm = c.normalizer[by] if c.normalizer is not None else None
        used = calibration[by] if calibration is not None else None
        order, runtime = c.file_index[by], c.runtime[by]
        return cls(c.source, c.name, c.kind, collection, model, order, costs[by], runtime, norm, used)

    @property
    def relative(self) -> np.ndarray:
        """Each config's predicted cost above the predicted best (0 for the first)."""
        return self.cost - self.cost[0] if len(self.cost) else self.cost

    @property
    def measured(self) -> int:
        """How many configs have a measured runtime."""
        return int((self.runtime > 0).sum())

    @property
    def calibrated_on(self) -> int:
        """How many configs the model was calibrated with (0 when not calibrated)."""
        return 0 if self.calibration is None else int((self.calibration > 0).sum())

    @property
    def scored(self) -> np.ndarray:
        """Which configs the score counts: measured in the file and not used to calibrate (a
        config the model learned from would score its own lesson)."""
        keep = self.runtime > 0
        return keep if self.calibration is None else keep & (self.calibration == 0)

    def scores(self) -> dict[str, float] | None:
        """The ranking scored against the measured runtimes (None with fewer than 2 to score).

        Over the measured configs not used to calibrate (`scored`) only: `score` (Kendall tau for
        layout; 2 - top-5 slowdown for tile, as the competition), `slowdown@1` (the measured runtime of the predicted best over the
        true best), `slowdown@5`, and for layout `pair_accuracy`. Tile runtimes are divided by
        their normalizers first, as the competition scores them.
        """
        keep = self.scored
        if keep.sum() < 2:
            return None
        # `order` is already fastest first: the measured configs keep that order among themselves
        within = np.arange(int(keep.sum()))
        runtime = normalized_runtime(
            self.runtime[keep], None if self.normalizer is None else self.normalizer[keep]
        )
        return graph_metrics(self.collection, within, runtime)

    def rows(self) -> list[dict[str, Any]]:
        """One row per config, fastest predicted first (what `rank --out` writes); a calibrated
        ranking adds `calibrated_with_ns`, the runtime a config was calibrated with (None: not)."""
        rows = [
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
        if self.calibration is not None:
            for row, used in zip(rows, self.calibration, strict=True):
                row["calibrated_with_ns"] = float(used) if used > 0 else None
        return rows

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
        } | (
            {}
            if self.calibration is None
            else {"calibrated_on": self.calibrated_on, "scored": int(self.scored.sum())}
        )


def calibration_line(r: Ranking) -> str:
    """What a calibrated ranking's report says of its scores: how many configs calibrated it and how
    many others it is scored against (never those it learned from)."""
    used, scored, others = r.calibrated_on, int(r.scored.sum()), len(r.order) - r.calibrated_on
    head = f"calibrated on {used} measured configs"
    scores = r.scores()
    if scores is None:
        return f"{head}; {scored} of the other {others} configs measured in the file: too few to score"
    name = "2 - top-5 slowdown" if r.kind == "tile" else "Kendall tau"
    value, slow = (_num(scores[k]) for k in ("score", "slowdown@1"))
    return (
        f"{head}; against {scored} measured of the other {others} configs: {name} {value}, the "
        f"predicted best of them runs {slow}x their best"
    )


def _num(v: float) -> str:
    return "undefined" if math.isnan(v) else f"{v:.4f}"
