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
from functools import partial

import numpy as np

from tpurank.core.collections import kind_of
from tpurank.core.normalize import normalize
from tpurank.models.ensemble import combine
from tpurank.rank import select
from tpurank.rank.calibrate import Calibration, LgbmInputs
from tpurank.rank.candidates import Candidates
from tpurank.rank.finetune import GnnInputs
from tpurank.rank.fits import run_lanes, width
from tpurank.rank.models import ENSEMBLE
from tpurank.rank.ranking import Ranking
from tpurank.rank.select import Learner

LGBM = "lgbm"
GNN = "gnn"
FOLD_MEMBERS = 1  # a held-out fold only tells whether fine-tuning helps: one seed member, not all


@dataclass(frozen=True)
class MemberFits:
    """One learning member's fits on the measured configs.

    Args:
        oof: each measured config's out-of-fold rank (`select.out_of_fold`; NaN: no folds, or its
            fold's fit learned nothing).
        whole: its costs of every config from the fit on every measured config (None: not fitted, or
            it learned nothing).
    """

    oof: np.ndarray
    whole: np.ndarray | None


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
        costs, chosen = self.calibrate(positions, runtime, how)
        ranking = Ranking.of(c, self.collection, self.model, costs, used)
        ranking.notes = (*self.notes, *self._gnn_note(how or Calibration()), *([chosen] if chosen else []))
        if len(measured) == len(c.file_index):
            best = int(c.file_index[positions[np.argmin(runtime)]])
            ranking.notes += (
                f"{self.name}: every config is measured: nothing left to rank; the fastest is config {best}",
            )
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
        """Each config's cost once the model has learned from the measured configs (`calibrate`)."""
        return self.calibrate(positions, runtime, how)[0]

    def calibrate(
        self, positions: np.ndarray, runtime: np.ndarray, how: Calibration | None = None
    ) -> tuple[np.ndarray, str | None]:
        """Each config's cost once the model has learned from the measured configs, and the one line
        saying what the measured configs chose (`Calibration.select`; None: nothing was chosen).

        Args:
            positions: the measured configs (positions in the graph).
            runtime: their runtimes in ns.
            how: the calibration (default: `Calibration()`).
        """
        how = (how or Calibration()).for_kind(kind_of(self.collection))
        learners = self._learners(how)
        if not len(positions) or not learners:
            return self.costs[self.model], None
        label = runtime
        if self.candidates.normalizer is not None:  # tile: ranked as the competition scores it
            label = runtime / np.maximum(self.candidates.normalizer[positions], 1)
        if how.select:
            return self._selected(learners, positions, label, how)
        fits = self._fits(learners, positions, label, None, set(learners))
        return self._whole({m: f.whole for m, f in fits.items() if f.whole is not None}, how), None

    def _learners(self, how: Calibration) -> dict[str, tuple[Learner, Learner]]:
        """Member -> how it learns from measured configs, for itself and inside a held-out fold (the
        GNN's folds fine-tune its first seed member alone): LightGBM, and the GNN where `how.gnn` asks
        and its costs are used (alone, or in the ensemble). Each fit runs on one thread, side by side
        with the others (`_fits`, tpurank.rank.fits)."""
        lgbm_learns = self.lgbm is not None and self.model in (LGBM, ENSEMBLE)
        in_ensemble = self.model == ENSEMBLE and (how.select or how.weights == "kept" or self.lgbm is None)
        gnn_learns = self.gnn is not None and how.gnn is not None and (self.model == GNN or in_ensemble)
        out: dict[str, tuple[Learner, Learner]] = {}
        if lgbm_learns:
            lgbm = self.lgbm
            assert lgbm is not None

            def learn_lgbm(p: np.ndarray, r: np.ndarray, s: np.ndarray | None) -> np.ndarray | None:
                return lgbm.calibrated(p, r, how, s, threads=1)

            out[LGBM] = (learn_lgbm, learn_lgbm)
        if gnn_learns:
            gnn, tune = self.gnn, how.gnn
            assert gnn is not None and tune is not None

            def learn_gnn(p: np.ndarray, r: np.ndarray, s: np.ndarray | None, n: int | None = None):
                return gnn.calibrated(p, r, tune, how.seed, s, members=n, threads=1)

            out[GNN] = (learn_gnn, lambda p, r, s: learn_gnn(p, r, s, FOLD_MEMBERS))
        return out

    def _fits(
        self,
        learners: dict[str, tuple[Learner, Learner]],
        positions: np.ndarray,
        label: np.ndarray,
        fold: np.ndarray | None,
        wholes: set[str],
    ) -> dict[str, MemberFits]:
        """Each learner's fits: one per held-out fold (`fold`; None: no folds) and, for the members in
        `wholes`, one on every measured config; side by side, each on one thread (tpurank.rank.fits).
        The GNN's fits are the longest, so they go first; they share one lane where they could not
        run side by side (`GnnInputs.side_by_side`)."""
        lanes = []
        for m in sorted(learners, key=lambda m: m != GNN):
            learn, in_fold = learners[m]
            fits = [((m, None), partial(learn, positions, label, None))] if m in wholes else []
            if fold is not None:
                fits += [((m, f), fit) for f, fit in select.held_out(in_fold, positions, label, fold)]
            apart = m != GNN or self.gnn is None or self.gnn.side_by_side()
            lanes += [[fit] for fit in fits] if apart else [fits]
        done = run_lanes(lanes)
        nothing = np.full(len(label), np.nan)
        return {
            m: MemberFits(
                select.out_of_fold({f: c for (n, f), c in done.items() if n == m and f is not None}, fold)
                if fold is not None
                else nothing,
                done.get((m, None)),
            )
            for m in learners
        }

    def _whole(self, calibrated: dict[str, np.ndarray], how: Calibration) -> np.ndarray:
        """The calibrated models used whole (`Calibration.select` off): the model's own, or the
        ensemble by `how.weights`."""
        if not calibrated:  # nothing to learn from (fewer than two distinct runtimes)
            return self.costs[self.model]
        if self.model != ENSEMBLE:
            return calibrated[self.model]
        if how.weights == "lgbm" and LGBM in calibrated:
            return calibrated[LGBM]
        assert self.weights is not None
        members = [calibrated.get(m, self.costs[m]) for m in self.weights["members"]]
        weights = np.asarray(self.weights["weights"], dtype=np.float64)
        return combine(members, weights, self.weights["normalize"]).astype(np.float32)

    def _selected(
        self,
        learners: dict[str, tuple[Learner, Learner]],
        positions: np.ndarray,
        label: np.ndarray,
        how: Calibration,
    ) -> tuple[np.ndarray, str]:
        """Each learning model's share of calibration chosen on held-out folds of the measured
        configs, then (the ensemble) its weights (tpurank.rank.select)."""
        distinct = len(np.unique(label))
        if distinct < select.MIN_MEASURED:
            return self.costs[self.model], (
                f"{self.name}: {len(label)} measured configs ({distinct} distinct runtimes) cannot tell whether "
                f"calibrating helps ({select.MIN_MEASURED} distinct are needed): ranked as trained"
            )
        checked = len(positions) >= how.checked_from
        weighed = self.model == ENSEMBLE and len(positions) >= how.weights_from
        margin = how.margin if checked else np.inf  # unchecked: the prior shares
        fold = select.fold_of(len(positions), how.folds, how.seed) if checked or weighed else None
        prior = {m: select.prior_share(len(positions), how.prior_of(m, checked)) for m in learners}
        # a fit on every measured config goes beside the folds where it may be used: unchecked, where its
        # prior share is above 0; checked, on 2+ cores (most are used); one core: after the folds chose
        if not checked:
            early = {m for m in learners if prior[m] > 0}
        else:
            early = set(learners) if width(2) > 1 else set()
        fits = self._fits(learners, positions, label, fold, early)
        choices = {
            m: select.choose_share(self.costs[m][positions], fits[m].oof, label, margin, prior[m])
            for m in learners
        }
        late = {m for m in learners if m not in early and choices[m].share > 0}
        if late:
            fits |= self._fits({m: learners[m] for m in late}, positions, label, None, late)
        final = {m: self._blended(m, choices[m], fits[m].whole, positions, how) for m in learners}
        parts = [c.text(m, checked) for m, c in choices.items()]
        if self.model == ENSEMBLE:
            w_margin = (how.margin if checked else how.weights_margin) if weighed else np.inf
            costs, what = self._selected_weights(
                choices, final, positions, label, w_margin, weighed, how.reach
            )
            parts.append(f"the ensemble {what}")
        else:
            costs = final[self.model]
        said = "; ".join(parts) + (": ranked as trained" if costs is self.costs[self.model] else "")
        return costs, self._selection_note(said, len(label), fold, checked, weighed, how)

    def _blended(
        self, m: str, choice: select.Choice, whole: np.ndarray | None, positions: np.ndarray, how: Calibration
    ) -> np.ndarray:
        """Member `m`'s costs with `choice`'s share of its calibration (`whole`, its fit on every
        measured config; None: it learned nothing) blended in over the stretch of its order the measured
        configs span."""
        if choice.share == 0 or whole is None:
            return self.costs[m]
        near = select.coverage(self.costs[m], positions, how.reach)
        return select.blend(self.costs[m], whole, choice.share, near)

    def _selection_note(
        self,
        said: str,
        measured: int,
        fold: np.ndarray | None,
        checked: bool,
        weighed: bool,
        how: Calibration,
    ) -> str:
        """The one line saying how the program was calibrated: `said` of each member, after what chose
        it (the held-out folds, or too few measurements to check)."""
        folds = f"{int(fold.max()) + 1} held-out folds" if fold is not None else ""
        if checked:
            return f"{self.name}: calibration chosen on {measured} measured configs by {folds}: {said}"
        weights = f"; the ensemble's weights chosen by {folds}" if weighed else ""
        return (
            f"{self.name}: {measured} measured configs, too few to check each model's calibration on held-out "
            f"folds ({how.checked_from} are needed), its share as far as that many measurements go{weights}: {said}"
        )

    def _selected_weights(
        self,
        choices: dict[str, select.Choice],
        final: dict[str, np.ndarray],
        positions: np.ndarray,
        label: np.ndarray,
        margin: float,
        checked: bool,
        reach: float,
    ) -> tuple[np.ndarray, str]:
        """The ensemble's costs over its members as chosen, with the weights the held-out folds
        trust (its trained weights unless one member alone or equal weights beat them by `margin`),
        and what they are (unchecked: its trained weights). Other weights than its trained ones hold
        over the stretch of the ensemble's order the measured configs span (`select.coverage` with
        `reach`), its trained weights beyond."""
        assert self.weights is not None
        members = list(self.weights["members"])
        oof = {
            m: choices[m].oof if m in choices else normalize(self.costs[m][positions], "rank")
            for m in members
        }
        trained = np.asarray(self.weights["weights"], dtype=np.float64)
        weights, what, tau = select.choose_weights(members, oof, trained, label, margin)
        said = f"{what} (held-out tau {tau:.2f})" if checked else what
        if all(m not in choices or choices[m].share == 0 for m in members) and weights is trained:
            return self.costs[ENSEMBLE], said
        parts = [final.get(m, self.costs[m]) for m in members]
        costs = combine(parts, weights, self.weights["normalize"]).astype(np.float32)
        if weights is trained:
            return costs, said
        # weights chosen on the measured configs are trusted over the stretch they span, as each
        # member's calibration is: an autotuner's top k tell nothing of how the members order the rest
        kept = combine(parts, trained, self.weights["normalize"]).astype(np.float32)
        near = select.coverage(self.costs[ENSEMBLE], positions, reach)
        return select.blend(kept, costs, 1.0, near), said


def not_calibrated_note(program: Program) -> str:
    """Why measurements leave a program's ranking as it was (the baseline alone, or an ensemble of
    neither LightGBM nor the GNN)."""
    which = program.model if program.model != ENSEMBLE else "the ensemble (it has no LightGBM or GNN member)"
    return (
        f"{program.name}: {which} is not calibrated (only LightGBM and the GNN learn from measurements): "
        "ranked as without measurements; its scores still leave out the measured configs"
    )
