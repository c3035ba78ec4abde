"""LightGBM calibrated on the measured configs of the program it ranks.

A user's measured configs become one more ranking query, weighted against the training queries,
and LightGBM learns from it before it ranks the program's other configs:

- `boost` (the default): boosting continues from the trained model (`lgb.train(init_model=...)`)
  for `rounds` more trees on the measured query and the training rows shipped with the model
  (tpurank.lgbm.training_rows). The trained trees stay; the new ones correct them where the
  program's measurements disagree.
- `refit`: a new model of the trained model's size, fitted from scratch on the shipped training
  rows and the measured query.

docs/rank.md gives the measurements on real programs that chose the default and its settings.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import lightgbm as lgb
import numpy as np

from tpurank.core.errors import TpurankError
from tpurank.lgbm.queries import grades, query_labels
from tpurank.lgbm.training_rows import TrainingRows
from tpurank.rank.finetune import FineTune
from tpurank.rank.select import (
    GNN_PRIOR,
    LGBM_PRIOR,
    MIN_CHECKED,
    MIN_WEIGHED,
    TILE_LGBM_PRIOR,
    WEIGHTS_MARGIN,
)

METHODS = ("boost", "refit")
# the ensemble once calibrated: "kept" (its trained weights over the calibrated members) when the GNN is
# fine-tuned, else "lgbm" (the calibrated LightGBM alone); or either of them named
ENSEMBLE_WEIGHTS = ("auto", "lgbm", "kept")
AUTO_WEIGHT_PER = 10  # the default weight: 1 up to 10 measured configs, then one more per 10
# layout: the shipped training queries are cut into queries of at most 100 rows, a fifth of the pairs
# LambdaRank's gradient walks over (nearly all of a fit's time when it counts every pair)
ANCHOR_QUERY_ROWS = 100
MIN_MEASURED = 2  # configs of different runtimes: fewer hold no order to learn


@dataclass(frozen=True)
class Calibration:
    """How LightGBM learns from a program's measured configs.

    Args:
        method: "boost" (continue from the trained model) or "refit" (a new model from scratch).
        weight: each measured row's weight; a training row weighs 1. None: grows with the
            measurements, `max(1, measured / AUTO_WEIGHT_PER)` (`weight_for`).
        rounds: boost: the trees added. refit: ignored (the trained model's count).
        seed: seeds LightGBM's row and column draws: a calibration is repeatable.
        ensemble: how the ensemble ranks once calibrated: "kept" (the trained weights over the
            calibrated members, the others as trained), "lgbm" (the calibrated LightGBM alone: the
            trained weights can give LightGBM none, and a GNN as trained would leave the
            measurements unused), or "auto" (the default: "kept" when the GNN is fine-tuned, else
            "lgbm").
        gnn: how the GNN is fine-tuned on the measured configs (None: it ranks as trained).
        gnn_tile: fine-tune the GNN of tile kernels too. Off by default: fine-tuning was measured on
            real layout programs only (docs/rank.md), so a tile kernel's ensemble ranks by the
            calibrated LightGBM alone, as measured on the real tile kernels.
        select: choose each model's share of calibration, and the ensemble's weights, from the
            measured configs by held-out folds (tpurank.rank.select); False: use the calibrated
            models whole, with `ensemble`'s weights.
        folds: the held-out folds of `select` (>= 2).
        margin: how far (in null standard deviations of Kendall tau over the measured configs) a
            blend with a smaller share of the calibration must beat the calibration whole on the
            held-out configs to be used instead (>= 0).
        reach: with `select`, how far from the measured configs (in the trained model's order, in
            mean gaps between them) the calibration is trusted; as trained beyond (> 0; inf: all
            the way; tpurank.rank.select.coverage).
        lgbm_prior: with `select`, how many measured configs the trained LightGBM is worth: its
            calibration's share before any check is `k / (k + lgbm_prior)` of k measured
            (tpurank.rank.select.prior_share; 0: whole).
        tile_lgbm_prior: the same on tile kernels (`for_kind`): their trained order is near the
            best already, so a few measurements move it less.
        gnn_prior: the same for the GNN's fine-tuning, below `checked_from`; from there the folds
            check its fine-tuning starting from the whole (it ranked the rest better at every k
            from 20 on the real programs).
        checked_from: with `select`, the measured configs from which held-out folds check each
            model's share (below: the prior shares).
        weights_from: with `select`, the measured configs from which held-out folds choose the
            ensemble's weights (below: its trained weights).
        weights_margin: below `checked_from`, the margin (as `margin`) by which one member alone or
            equal weights must beat the ensemble's trained weights on the held-out folds (from
            `checked_from`: `margin`).
        anchor_query_rows: each query of the training rows shipped with LightGBM is cut, by a
            seeded draw, into queries of at most this many rows before boosting on them (0: whole).
            Layout's LambdaRank counts every pair of a query, so a 500-row query costs 25 times a
            100-row one; a cut query is still a ranking of its rows. Tile kernels keep theirs whole
            (`for_kind`): their truncation level already bounds a query's pairs.
    """

    method: str = "boost"
    weight: float | None = None
    rounds: int = 50
    seed: int = 0
    ensemble: str = "auto"
    gnn: FineTune | None = FineTune()
    gnn_tile: bool = False  # real tile kernels: measured with LightGBM's calibration only
    select: bool = True  # a calibration is used only as far as held-out measured configs trust it
    folds: int = 3  # held-out folds of the measured configs: each fold one more calibration to pay
    margin: float = 1.0  # a smaller share must beat the calibration whole by this many null SDs of tau
    reach: float = 4.0  # trust a calibration this many mean gaps from the measured configs (select.coverage)
    lgbm_prior: float = LGBM_PRIOR  # the trained LightGBM counts as 20 measured configs (select.prior_share)
    tile_lgbm_prior: float = TILE_LGBM_PRIOR  # tile kernels: the trained LightGBM counts as 100 measured
    gnn_prior: float = GNN_PRIOR  # the GNN's fine-tuning counts as 5 measured configs until checked
    checked_from: int = MIN_CHECKED  # held-out folds check each share from 20 measured configs
    weights_from: int = MIN_WEIGHED  # the ensemble's weights chosen on held-out folds from 5 measured
    weights_margin: float = WEIGHTS_MARGIN  # half the margin for the weights while the shares are unchecked
    anchor_query_rows: int = ANCHOR_QUERY_ROWS  # layout's shipped queries cut to 100 rows

    def __post_init__(self) -> None:
        if self.method not in METHODS:
            raise TpurankError(f"calibration method must be one of {', '.join(METHODS)}, got {self.method!r}")
        if self.weight is not None and not (self.weight > 0 and np.isfinite(self.weight)):
            raise TpurankError(f"calibration weight must be a positive number, got {self.weight}")
        if self.ensemble not in ENSEMBLE_WEIGHTS:
            raise TpurankError(
                f"calibration ensemble must be one of {', '.join(ENSEMBLE_WEIGHTS)}, got {self.ensemble!r}"
            )
        if self.gnn is not None and not isinstance(self.gnn, FineTune):
            raise TpurankError(f"calibration gnn must be a FineTune or None, got {self.gnn!r}")
        if self.rounds < 1:
            raise TpurankError(f"calibration rounds must be >= 1, got {self.rounds}")
        if self.folds < 2:
            raise TpurankError(f"calibration folds must be >= 2, got {self.folds}")
        for name in ("margin", "weights_margin"):
            value = getattr(self, name)
            if not (value >= 0 and np.isfinite(value)):
                raise TpurankError(f"calibration {name} must be a number >= 0, got {value}")
        if not self.reach > 0:
            raise TpurankError(f"calibration reach must be > 0, got {self.reach}")
        for name in ("lgbm_prior", "tile_lgbm_prior", "gnn_prior"):
            value = getattr(self, name)
            if not (value >= 0 and np.isfinite(value)):
                raise TpurankError(f"calibration {name} must be a number >= 0, got {value}")
        if not (
            type(self.anchor_query_rows) is int
            and (self.anchor_query_rows == 0 or self.anchor_query_rows >= 2)
        ):
            raise TpurankError(
                f"calibration anchor_query_rows must be 0 or an integer >= 2, got {self.anchor_query_rows!r}"
            )
        for name in ("checked_from", "weights_from"):
            value = getattr(self, name)
            if not (isinstance(value, int) and value >= 2):
                raise TpurankError(f"calibration {name} must be an integer >= 2, got {value!r}")

    def prior_of(self, member: str, checked: bool) -> float:
        """How many measured configs the trained `member` ("lgbm" or "gnn") is worth; `checked`:
        held-out folds check the shares (the GNN's prior then gives way to its fine-tuning whole)."""
        if member == "lgbm":
            return self.lgbm_prior
        return 0.0 if checked else self.gnn_prior

    def for_kind(self, kind: str) -> Calibration:
        """The calibration of a program of `kind` ("layout" or "tile"): on tile, LightGBM's prior is
        `tile_lgbm_prior`, its shipped queries stay whole, and the GNN is not fine-tuned unless
        `gnn_tile` asks for it."""
        if kind != "tile":
            return self
        gnn = self.gnn if self.gnn_tile else None
        return dataclasses.replace(self, lgbm_prior=self.tile_lgbm_prior, gnn=gnn, anchor_query_rows=0)

    @property
    def weights(self) -> str:
        """How the ensemble ranks once calibrated: "kept" or "lgbm" (`ensemble`, "auto" resolved)."""
        if self.ensemble != "auto":
            return self.ensemble
        return "kept" if self.gnn is not None else "lgbm"

    def weight_for(self, measured: int) -> float:
        """The measured rows' weight when `measured` configs calibrate: the set weight, or by
        default one that grows with them (a few measurements are noisy, many outweigh training).

        Args:
            measured: the distinct measured configs.
        """
        return self.weight if self.weight is not None else max(1.0, measured / AUTO_WEIGHT_PER)


@dataclass
class LgbmInputs:
    """What calibrating one program's LightGBM ranker needs.

    Args:
        booster: the trained ranker.
        params: its training parameters (tpurank.lgbm.model.lgb_params of the trained config).
        levels: relevance grades per query (`lgbm.relevance_levels`), as training labelled them.
        x: (unique configs, features) the program's feature rows, in the booster's feature order.
        inverse: each config of the program -> its unique row of `x`.
        training: the training rows shipped with the model (None: an older model without them).
    """

    booster: lgb.Booster
    params: dict
    levels: int
    x: np.ndarray
    inverse: np.ndarray
    training: TrainingRows | None = None

    def _costs(self, booster: lgb.Booster, scored: np.ndarray | None, threads: int) -> np.ndarray:
        rows = self.inverse if scored is None else self.inverse[scored]
        unique, back = np.unique(rows, return_inverse=True)
        scores = booster.predict(self.x[unique], num_threads=threads)
        return (-scores)[back].astype(np.float32)

    def calibrated(
        self,
        positions: np.ndarray,
        runtime: np.ndarray,
        how: Calibration,
        scored: np.ndarray | None = None,
        threads: int | None = None,
    ) -> np.ndarray | None:
        """Each config's cost from the model that learned from the measured configs (None: fewer
        than two of them, or all equally fast: no order to learn).

        Args:
            positions: the measured configs (positions in the program's config order).
            runtime: their measured runtimes (tile: divided by their normalizers), > 0.
            how: the method and its settings.
            scored: the positions whose costs are returned (None: every config).
            threads: LightGBM's threads (None: the model's `num_threads`, the cores usable when
                the program was read).

        Raises:
            TpurankError: refit without training rows.
        """
        xq, yq = measured_query(self.x, self.inverse, positions, runtime, self.levels)
        if len(yq) < MIN_MEASURED or len(np.unique(yq)) < 2:
            return None
        if how.method == "refit" and self.training is None:
            raise TpurankError("refit calibration needs the training rows shipped with the model")
        data = self._dataset(xq, yq, how.weight_for(len(yq)), how.anchor_query_rows)
        params = {**self.params, "seed": how.seed, "deterministic": True, "verbose": -1}
        if threads is not None:
            params["num_threads"] = threads
        if self.training is None:  # the measured query alone: let a leaf hold a few of its rows
            params["min_data_in_leaf"] = max(1, min(params.get("min_data_in_leaf", 20), len(yq) // 4))
        try:
            if how.method == "boost":
                model = lgb.train(params, data, how.rounds, init_model=self.booster)
            else:
                model = lgb.train(params, data, max(1, self.booster.current_iteration()))
        except lgb.basic.LightGBMError as e:
            raise TpurankError(f"LightGBM calibration failed ({e})") from None
        return self._costs(model, scored, params.get("num_threads", 1))

    def _dataset(self, xq: np.ndarray, yq: np.ndarray, weight: float, query_rows: int) -> lgb.Dataset:
        """The training rows' queries (when shipped; cut to `query_rows`, `cut_queries`), then the
        measured query with its weight."""
        names = list(self.booster.feature_name())
        if self.training is None:
            x, y, sizes, w = xq, yq, np.array([len(yq)]), np.full(len(yq), weight)
        else:
            t = cut_queries(self.training, query_rows)
            ty = query_labels(t.runtime, t.sizes, self.levels)
            x = np.concatenate([t.x, xq])
            y = np.concatenate([ty, yq])
            sizes = np.append(t.sizes, len(yq))
            w = np.concatenate([np.ones(t.rows), np.full(len(yq), weight)])
        return lgb.Dataset(x, y, group=sizes, weight=w, feature_name=names, free_raw_data=False)


def cut_queries(rows: TrainingRows, query_rows: int, seed: int = 0) -> TrainingRows:
    """The training rows with each query of more than `query_rows` rows cut into queries of near-equal
    sizes, at most `query_rows` each, its rows dealt to them by a seeded draw (0: as they are).

    Args:
        rows: the shipped training rows, query by query.
        query_rows: the most rows a query keeps (0: no cut).
        seed: the draw's seed: the same cut for every calibration of a program.
    """
    if query_rows == 0 or int(rows.sizes.max(initial=0)) <= query_rows:
        return rows
    rng = np.random.default_rng(seed)
    order, sizes, start = [], [], 0
    for size in rows.sizes.tolist():
        parts = -(-size // query_rows)
        order.append(start + rng.permutation(size))
        sizes += [len(p) for p in np.array_split(np.arange(size), parts)]
        start += size
    take = np.concatenate(order)
    return dataclasses.replace(
        rows, x=rows.x[take], runtime=rows.runtime[take], sizes=np.asarray(sizes, dtype=rows.sizes.dtype)
    )


def measured_query(
    x: np.ndarray, inverse: np.ndarray, positions: np.ndarray, runtime: np.ndarray, levels: int
) -> tuple[np.ndarray, np.ndarray]:
    """The measured configs as one query: their unique feature rows and relevance grades.

    Configs that share a feature row (duplicates) count once, at their mean runtime, as training
    counts them.

    Args:
        x: the program's unique feature rows.
        inverse: config -> unique row.
        positions: the measured configs.
        runtime: their runtimes.
        levels: relevance grades, as training used.
    """
    rows = inverse[np.asarray(positions, dtype=np.int64)]
    unique, codes = np.unique(rows, return_inverse=True)
    mean = np.bincount(codes, weights=np.asarray(runtime, np.float64)) / np.bincount(codes)
    return x[unique], grades(mean, levels)
