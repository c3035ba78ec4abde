"""How much a calibration is trusted, chosen from the measured configs themselves.

A model calibrated on a few measured configs can rank the others worse than as trained: the
measurements are noisy, and an autotuner measures what the model ranks best, near-equal configs
whose order is mostly noise. On real programs a calibration used whole ranks the rest better on
average (docs/rank.md), so it is used, within two bounds the measured configs themselves set:

- over the stretch of the trained model's order they span (`coverage`), fading to the trained order
  beyond it: an autotuner measures the model's own best, and learning from them alone must not
  bend the order of the rest;
- by how much evidence they are: a member's share of its calibration before any check grows with
  the k measured configs as `k / (k + prior)` (`prior_share`): the trained model counts as `prior`
  measured configs. LightGBM's calibration made the rest worse on real layout programs at 5 and 10
  measured configs and helped from 20 (`LGBM_PRIOR`); on tile kernels, whose trained order is
  already near the best, a uniform 20 still lowered one (`TILE_LGBM_PRIOR`); the GNN's fine-tuning
  used whole lowered one layout program at 5 (`GNN_PRIOR`, until the folds can check it);
- from `MIN_CHECKED` measured configs, checked on held-out folds: each fold's configs are ranked
  by a model calibrated on the other folds (out of fold: it never saw them) and by the trained
  model (it never saw any); another share (`SHARES`; 0 = as trained) replaces the prior one only
  when it orders the held-out configs better by `margin` standard deviations of Kendall tau
  (`null_sd`): a smaller difference is noise. The ensemble keeps its trained weights unless one
  member alone, or equal weights, order them better by the same margin.

docs/rank.md gives the measurements on real programs that chose the settings.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial

import numpy as np

from tpurank.core.normalize import normalize
from tpurank.models.ensemble import combine

SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)  # the calibrated ranking's share in the blend with the trained one
MIN_MEASURED = 4  # distinct runtimes: fewer hold too little order to learn from (none measured below 5)
MIN_CHECKED = 20  # measured configs: below, folds on two thirds of them are too noisy to judge by
LGBM_PRIOR = 20.0  # the trained LightGBM counts as 20 measured configs: used whole, 5 or 10 hurt it
TILE_LGBM_PRIOR = 100.0  # on tile kernels: at 40 a uniform 20 lowered one kernel's tile score, at 70 none
GNN_PRIOR = 5.0  # the GNN's fine-tuning, until checked: whole, 5 measured lowered one program by 0.04
MIN_WEIGHED = 5  # measured configs: from 5, held-out folds choosing the ensemble's weights helped it
# below MIN_CHECKED, other weights replace the trained ones when they beat them by half the margin: at
# 10 measured configs the full margin kept trained weights that trailed the better member by 0.07
WEIGHTS_MARGIN = 0.5
REACH = 4.0  # coverage: a calibration is trusted up to four mean gaps beyond the measured configs' span
# a model learns from the measured configs: (positions, runtimes, positions scored) -> their costs,
# None where it learns nothing (fewer than two distinct runtimes)
Learner = Callable[[np.ndarray, np.ndarray, np.ndarray], "np.ndarray | None"]


@dataclass(frozen=True)
class Choice:
    """What the measured configs chose for one model.

    Args:
        share: the calibrated ranking's share in the blend (0: ranked as trained).
        tau: the held-out Kendall tau of the chosen blend on the measured configs.
        trained: the trained model's tau on the same configs.
        oof: each measured config's out-of-fold rank in the chosen blend (0 = fastest, 1 = slowest).
    """

    share: float
    tau: float
    trained: float
    oof: np.ndarray

    def text(self, name: str, checked: bool = True) -> str:
        """`lgbm 0.75 calibrated (held-out tau 0.41, as trained 0.22)`; unchecked: `lgbm 0.25
        calibrated` (no held-out tau to give)."""
        what = "as trained" if self.share == 0 else f"{self.share:g} calibrated"
        if not checked:
            return f"{name} {what}"
        return f"{name} {what} (held-out tau {_num(self.tau)}, as trained {_num(self.trained)})"


def null_sd(n: int) -> float:
    """Kendall tau's standard deviation over `n` items ranked at random: the noise of a tau."""
    return math.sqrt(2 * (2 * n + 5) / (9 * n * (n - 1))) if n > 1 else math.inf


def held_out_tau(score: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall tau (tau-b) of scores (lower = faster) against runtimes; 0 where undefined."""
    from scipy.stats import kendalltau  # here: the stage processes that import rank stay light

    tau = kendalltau(score, runtime).statistic
    return 0.0 if math.isnan(tau) else float(tau)


def fold_of(n: int, folds: int, seed: int) -> np.ndarray:
    """Each measured config's fold (seeded): `folds` folds of as equal size as `n` allows."""
    return np.random.default_rng([seed, n]).permutation(n) % min(folds, n)


def held_out(
    learn: Learner, positions: np.ndarray, runtime: np.ndarray, fold: np.ndarray
) -> list[tuple[int, Callable[[], np.ndarray | None]]]:
    """Each fold's fit, to run (`tpurank.rank.fits`): a model calibrated on the other folds' measured
    configs, scoring every measured config.

    Args:
        learn: how the model learns from measured configs.
        positions, runtime: the measured configs and their runtimes.
        fold: each measured config's fold (`fold_of`).
    """
    return [
        (int(f), partial(learn, positions[fold != f], runtime[fold != f], positions)) for f in np.unique(fold)
    ]


def out_of_fold(costs: Mapping[int, np.ndarray | None], fold: np.ndarray) -> np.ndarray:
    """Each measured config's rank among the measured configs (0..1) by the model calibrated on the
    other folds, which never saw it (`held_out`'s fits: fold -> their costs of the measured configs);
    NaN where that model learned nothing.

    Args:
        costs: each fold's fit's costs of every measured config (None: it learned nothing).
        fold: each measured config's fold.
    """
    out = np.full(len(fold), np.nan)
    for f, c in costs.items():
        if c is not None:
            held = fold == f
            out[held] = normalize(c, "rank")[held]
    return out


def prior_share(measured: int, prior: float) -> float:
    """The share of the calibration that `measured` configs earn before any check: the trained model
    counts as `prior` measured configs, so the share grows as `measured / (measured + prior)`, down
    to the grid of `SHARES` (prior 0: the calibration whole).

    Args:
        measured: the measured configs.
        prior: how many measured configs the trained model is worth (>= 0).
    """
    share = measured / (measured + prior) if prior > 0 else 1.0
    return max(s for s in SHARES if s <= share + 1e-9)


def choose_share(
    trained: np.ndarray, oof: np.ndarray, runtime: np.ndarray, margin: float, prior: float = 1.0
) -> Choice:
    """The `prior` share of the calibration (`prior_share`), unless another share orders the held-out
    configs better by `margin` null standard deviations: then the share that orders them best.

    Args:
        trained: the trained model's costs of the measured configs.
        oof: their out-of-fold ranks (`out_of_fold`); NaN: the trained rank stands in (all NaN: the
            prior share, unchecked).
        runtime: their runtimes.
        margin: the gain over the prior share's order that counts, in `null_sd` units.
        prior: the share used unless the held-out configs say otherwise.
    """
    rank_t = normalize(trained, "rank")
    oof = np.where(np.isnan(oof), rank_t, oof)
    blends = {s: (1 - s) * rank_t + s * oof for s in SHARES}
    taus = {s: held_out_tau(b, runtime) for s, b in blends.items()}
    best = max(SHARES, key=lambda s: (taus[s], -abs(s - prior)))  # ties: the share nearest the prior
    if taus[best] - taus[prior] <= margin * null_sd(len(runtime)):
        best = prior
    return Choice(best, taus[best], taus[0.0], normalize(blends[best], "rank"))


def coverage(trained: np.ndarray, positions: np.ndarray, reach: float = REACH) -> np.ndarray:
    """How far the calibration is trusted at each config: 1 within the stretch of the trained
    model's order that the measured configs span, falling to 0 at `reach` times their mean gap
    beyond it (inf: 1 everywhere).

    Calibration learns the order of the configs it was shown. Among them (in the order the model
    gives) it knows something; beyond them it extrapolates, and an autotuner shows it only the
    model's own best. A uniform draw spans the whole order, so it is trusted everywhere; the top 10
    of 2,000 span its first half percent.

    Args:
        trained: the trained model's costs of every config.
        positions: the measured configs.
        reach: how far beyond their span the calibration is trusted, in mean gaps between them.
    """
    if math.isinf(reach):
        return np.ones(len(trained))
    r = normalize(trained, "rank")
    m = r[positions]
    low, high = float(m.min()), float(m.max())
    gap = (high - low) / (len(m) - 1) if len(m) > 1 else 0.0
    width = max(reach * gap, 1 / max(1, len(r) - 1))
    beyond = np.maximum(0.0, np.maximum(low - r, r - high))
    return np.clip(1 - beyond / width, 0, 1)


def blend(
    trained: np.ndarray, calibrated: np.ndarray, share: float, near: np.ndarray | None = None
) -> np.ndarray:
    """The program's costs: the trained and calibrated rankings blended, `share` calibrated; with
    `near` (`coverage`), each config's share scaled by its nearness to the measured configs.

    Args:
        trained: the trained model's costs of every config.
        calibrated: the calibrated model's.
        share: the calibrated ranking's share (`choose_share`).
        near: each config's nearness to the measured configs (None: 1 everywhere).
    """
    if share <= 0:
        return trained
    if near is None:
        if share >= 1:
            return calibrated
        return combine([trained, calibrated], np.array([1 - share, share]), "rank").astype(np.float32)
    r_t, r_c = normalize(trained, "rank"), normalize(calibrated, "rank")
    return (r_t + share * near * (r_c - r_t)).astype(np.float32)


def choose_weights(
    members: list[str], oof: dict[str, np.ndarray], trained: np.ndarray, runtime: np.ndarray, margin: float
) -> tuple[np.ndarray, str, float]:
    """The ensemble's weights over its calibrated members: its trained weights, unless one member
    alone or equal weights order the measured configs better out of fold by `margin` null standard
    deviations: then the best of those.

    Args:
        members: the ensemble's members, in its weights' order.
        oof: member -> its out-of-fold ranks of the measured configs (`Choice.oof`).
        trained: the ensemble's trained weights.
        runtime: the measured runtimes.
        margin: as `choose_share`.

    Returns:
        The weights, what they are ("its trained weights", "<member> alone" or "equal weights")
        and their held-out tau.
    """
    n = len(members)
    candidates = {"its trained weights": np.asarray(trained, dtype=np.float64)}
    candidates |= {f"{m} alone": np.eye(n)[i] for i, m in enumerate(members)}
    candidates["equal weights"] = np.full(n, 1 / n)
    taus = {
        what: held_out_tau(sum(w * oof[m] for w, m in zip(ws, members, strict=True)), runtime)
        for what, ws in candidates.items()
    }
    best = max(taus, key=lambda what: taus[what])
    if taus[best] - taus["its trained weights"] <= margin * null_sd(len(runtime)):
        return trained, "its trained weights", taus["its trained weights"]
    return candidates[best], best, taus[best]


def _num(v: float) -> str:
    return f"{v:.2f}"
