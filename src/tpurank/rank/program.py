"""One graph of a user's file, ranked by the trained models and ready to be ranked again once some of
its configs are measured (`rank --measured`, `tpurank.tune.Tuner`).

Without measurements a program's ranking is the one `predict` gives (the costs it wrote). With
them, LightGBM learns from the measured configs first (tpurank.rank.calibrate), the GNN is
fine-tuned on them (tpurank.rank.finetune; `Calibration.gnn`), and the ensemble ranks by its
trained weights over the calibrated members (`Calibration.ensemble`; the calibrated LightGBM alone
when the GNN is not fine-tuned).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from tpurank.core.collections import kind_of
from tpurank.models.ensemble import combine
from tpurank.rank.calibrate import Calibration, LgbmInputs
from tpurank.rank.candidates import Candidates
from tpurank.rank.finetune import GnnInputs
from tpurank.rank.models import ENSEMBLE
from tpurank.rank.ranking import Ranking

LGBM = "lgbm"
GNN = "gnn"


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
        gnn: the GNN's fine-tuning inputs (None: the GNN does not rank it, or nothing asked for
            calibration).
        notes: one line each about how the program was calibrated (printed by `rank` and `tune`).
    """

    candidates: Candidates
    collection: str
    model: str
    costs: dict[str, np.ndarray]
    weights: dict | None = None
    lgbm: LgbmInputs | None = None
    gnn: GnnInputs | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.candidates.name

    @property
    def calibrates(self) -> bool:
        """Whether measurements can change its ranking (LightGBM or the GNN ranks it, alone or in the
        ensemble; the GNN only when `Calibration.gnn` asks)."""
        return self.lgbm is not None or self.gnn is not None

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
            ranking = Ranking.of(c, self.collection, self.model, self.costs[self.model])
            ranking.notes = tuple(self.notes)
            return ranking
        used = np.zeros(len(c.file_index), dtype=np.float64)
        positions = np.fromiter(measured.keys(), dtype=np.int64, count=len(measured))
        runtime = np.fromiter(measured.values(), dtype=np.float64, count=len(measured))
        used[positions] = runtime
        ranking = Ranking.of(c, self.collection, self.model, self.costs_with(positions, runtime, how), used)
        ranking.notes = tuple(self.notes) + self._gnn_note(how or Calibration())
        return ranking

    def _gnn_note(self, how: Calibration) -> tuple[str, ...]:
        """Why the GNN ranking alone stays as trained: fine-tuning was turned off, or not asked for a
        tile kernel."""
        if self.model != GNN or self.gnn is None or how.for_kind(kind_of(self.collection)).gnn is not None:
            return ()
        why = (
            "--gnn-steps 0" if how.gnn is None else "a tile kernel's GNN is fine-tuned only with --gnn-steps"
        )
        return (f"{self.name}: the GNN is not fine-tuned ({why}): ranked as trained",)

    def costs_with(
        self, positions: np.ndarray, runtime: np.ndarray, how: Calibration | None = None
    ) -> np.ndarray:
        """Each config's cost once the model has learned from the measured configs.

        Args:
            positions: the measured configs (positions in the graph).
            runtime: their runtimes in ns.
            how: the calibration (default: `Calibration()`).
        """
        how = (how or Calibration()).for_kind(kind_of(self.collection))
        if not len(positions):
            return self.costs[self.model]
        label = runtime
        if self.candidates.normalizer is not None:  # tile: ranked as the competition scores it
            label = runtime / np.maximum(self.candidates.normalizer[positions], 1)
        calibrated = self._calibrated(positions, label, how)
        if not calibrated:  # nothing to learn from (fewer than two distinct runtimes), or no model learns
            return self.costs[self.model]
        if self.model != ENSEMBLE:
            return calibrated[self.model]
        if how.weights == "lgbm" and LGBM in calibrated:
            return calibrated[LGBM]
        assert self.weights is not None
        members = [calibrated.get(m, self.costs[m]) for m in self.weights["members"]]
        weights = np.asarray(self.weights["weights"], dtype=np.float64)
        return combine(members, weights, self.weights["normalize"]).astype(np.float32)

    def _calibrated(
        self, positions: np.ndarray, label: np.ndarray, how: Calibration
    ) -> dict[str, np.ndarray]:
        """Member -> its costs once calibrated, for the members that learn here: LightGBM, and the
        GNN where `how.gnn` asks and its costs are used (alone, or in the ensemble's kept weights)."""
        out = {}
        if self.lgbm is not None and self.model in (LGBM, ENSEMBLE):
            costs = self.lgbm.calibrated(positions, label, how)
            if costs is not None:
                out[LGBM] = costs
        used = self.model == GNN or (self.model == ENSEMBLE and (how.weights == "kept" or self.lgbm is None))
        if self.gnn is not None and how.gnn is not None and used:
            costs = self.gnn.calibrated(positions, label, how.gnn, how.seed)
            if costs is not None:
                out[GNN] = costs
        return out


def not_calibrated_note(program: Program) -> str:
    """Why measurements leave a program's ranking as it was (the baseline alone, or an ensemble of
    neither LightGBM nor the GNN)."""
    which = program.model if program.model != ENSEMBLE else "the ensemble (it has no LightGBM or GNN member)"
    return (
        f"{program.name}: {which} is not calibrated (only LightGBM and the GNN learn from measurements): "
        "ranked as without measurements; its scores still leave out the measured configs"
    )
