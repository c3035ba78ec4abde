"""One graph of a user's file, ranked by the trained models and ready to be ranked again once some of
its configs are measured (`rank --measured`, `tpurank.tune.Tuner`).

Without measurements a program's ranking is the one `predict` gives (the costs it wrote). With
them, LightGBM learns from the measured configs first (tpurank.rank.calibrate), and the ensemble
ranks by the calibrated LightGBM alone (`Calibration.ensemble`; "kept": its trained weights over
the calibrated LightGBM and the other members). The GNNs are not fine-tuned on measurements: they
rank as they were trained.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tpurank.rank.calibrate import Calibration, LgbmInputs
from tpurank.rank.candidates import Candidates
from tpurank.rank.models import ENSEMBLE
from tpurank.rank.ranking import Ranking
from tpurank.rankers.ensemble import combine

LGBM = "lgbm"


@dataclass
class Program:
    """A graph, its models' costs and what calibrating them needs.

    Args:
        candidates: the graph and its ties to the user's file.
        collection: the collection whose models rank it.
        model: "ensemble" or one member.
        costs: model -> cost of each config (the graph's order) as `predict` wrote it, for `model`
            and, for the ensemble, each of its members.
        weights: the ensemble's weights record (members, weights, normalize); None for one member.
        lgbm: LightGBM's calibration inputs (None: LightGBM does not rank it, or nothing asked for
            calibration).
        notes: one line each about how the program was calibrated (printed by `rank` and `tune`).
    """

    candidates: Candidates
    collection: str
    model: str
    costs: dict[str, np.ndarray]
    weights: dict | None = None
    lgbm: LgbmInputs | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.candidates.name

    @property
    def calibrates(self) -> bool:
        """Whether measurements change its ranking (LightGBM ranks it, alone or in the ensemble)."""
        return self.lgbm is not None

    def position(self, config: int) -> int | None:
        """The position in the graph of the user's config index (None: not a candidate)."""
        found = np.flatnonzero(self.candidates.file_index == config)
        return int(found[0]) if len(found) else None

    def ranking(self, measured: Mapping[int, float] | None = None, how: Calibration | None = None) -> Ranking:
        """The graph's ranking; with `measured` (position -> runtime in ns) calibrated on those configs,
        which its scores then leave out.

        Args:
            measured: the measured configs (positions in the graph) and their runtimes; None or
                empty: the ranking `predict` gives.
            how: the calibration's method and settings (default: `Calibration()`).
        """
        c = self.candidates
        if measured is None:
            return Ranking.of(c, self.collection, self.model, self.costs[self.model])
        used = np.zeros(len(c.file_index), dtype=np.float64)
        positions = np.fromiter(measured.keys(), dtype=np.int64, count=len(measured))
        runtime = np.fromiter(measured.values(), dtype=np.float64, count=len(measured))
        used[positions] = runtime
        ranking = Ranking.of(c, self.collection, self.model, self.costs_with(positions, runtime, how), used)
        ranking.notes = tuple(self.notes)
        return ranking

    def costs_with(
        self, positions: np.ndarray, runtime: np.ndarray, how: Calibration | None = None
    ) -> np.ndarray:
        """Each config's cost once the model has learned from the measured configs.

        Args:
            positions: the measured configs (positions in the graph).
            runtime: their runtimes in ns.
            how: the calibration (default: `Calibration()`).
        """
        how = how or Calibration()
        if self.lgbm is None or not len(positions):
            return self.costs[self.model]
        label = runtime
        if self.candidates.normalizer is not None:  # tile: ranked as the competition scores it
            label = runtime / np.maximum(self.candidates.normalizer[positions], 1)
        calibrated = self.lgbm.calibrated(positions, label, how)
        if calibrated is None:  # nothing to learn from (fewer than two distinct runtimes)
            return self.costs[self.model]
        if self.model == LGBM or how.ensemble == "lgbm":
            return calibrated
        assert self.weights is not None
        members = [calibrated if m == LGBM else self.costs[m] for m in self.weights["members"]]
        weights = np.asarray(self.weights["weights"], dtype=np.float64)
        return combine(members, weights, self.weights["normalize"]).astype(np.float32)


def not_calibrated_note(program: Program) -> str:
    """Why measurements leave a program's ranking as it was (a GNN alone, or an ensemble without LightGBM)."""
    which = program.model if program.model != ENSEMBLE else "the ensemble (it has no LightGBM member)"
    return (
        f"{program.name}: {which} is not calibrated (fine-tuning a GNN on measurements is not done): "
        "ranked as without measurements; its scores still leave out the measured configs"
    )
