"""How much a calibration is trusted, chosen from the measured configs themselves.

A model calibrated on a few measured configs can rank the others worse than as trained: the
measurements are noisy, and an autotuner measures what the model ranks best, near-equal configs
whose order is mostly noise. So nothing calibrated is used before the measured configs say it helps.
They are split into folds; each fold's configs are ranked by a model calibrated on the other folds
(out of fold: it never saw them), and the trained model ranks them too (it never saw any). The
calibrated ranking's share in a blend with the trained one (`SHARES`; 0 = as trained) is the one
whose out-of-fold order agrees best with the measured runtimes (Kendall tau), and a share above 0
must beat the trained order by `margin` standard deviations of tau (`null_sd`): a gain smaller
than that is noise. The held-out folds see only the measured configs, so the blend is trusted only
near them in the trained model's order (`coverage`), as trained far from them. The ensemble's
weights are chosen like the share among its trained weights and each member alone.

docs/rank.md gives the measurements on real programs that chose the settings.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tpurank.core.normalize import normalize
from tpurank.models.ensemble import combine

SHARES = (0.0, 0.25, 0.5, 0.75, 1.0)  # the calibrated ranking's share in the blend with the trained one
MIN_MEASURED = 4  # distinct runtimes: with fewer, one held-out fold holds no order to check
BANDWIDTH = 2.0  # coverage: a calibration is trusted up to two mean gaps from the measured configs
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

    def text(self, name: str) -> str:
        """`lgbm 0.75 calibrated (held-out tau 0.41, as trained 0.22)`."""
        what = "as trained" if self.share == 0 else f"{self.share:g} calibrated"
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


def out_of_fold(learn: Learner, positions: np.ndarray, runtime: np.ndarray, fold: np.ndarray) -> np.ndarray:
    """Each measured config's rank among the measured configs (0..1) by a model calibrated on the
    other folds; NaN where that model learned nothing."""
    out = np.full(len(positions), np.nan)
    for f in np.unique(fold):
        held = fold == f
        costs = learn(positions[~held], runtime[~held], positions)
        if costs is not None:
            out[held] = normalize(costs, "rank")[held]
    return out


def choose_share(trained: np.ndarray, oof: np.ndarray, runtime: np.ndarray, margin: float) -> Choice:
    """The blend share whose out-of-fold order agrees best with the runtimes, above 0 only when it
    beats the trained order by `margin` null standard deviations.

    Args:
        trained: the trained model's costs of the measured configs.
        oof: their out-of-fold ranks (`out_of_fold`); NaN: the trained rank stands in.
        runtime: their runtimes.
        margin: the gain over the trained order that counts, in `null_sd` units.
    """
    rank_t = normalize(trained, "rank")
    oof = np.where(np.isnan(oof), rank_t, oof)
    blends = {s: (1 - s) * rank_t + s * oof for s in SHARES}
    taus = {s: held_out_tau(b, runtime) for s, b in blends.items()}
    best = max(SHARES, key=lambda s: (taus[s], -s))  # ties: the smaller share
    if taus[best] - taus[0.0] <= margin * null_sd(len(runtime)):
        best = 0.0
    return Choice(best, taus[best], taus[0.0], normalize(blends[best], "rank"))


def coverage(trained: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """How near each config is to the measured ones in the trained model's order: 1 at a measured
    config, falling to 0 at `BANDWIDTH` times the mean gap between them.

    Calibration learns the order of the configs it was shown. Near them (in the order the model
    gives) it knows something; far from them it extrapolates, and an autotuner shows it only the
    model's own best, so far from them is most of the program. A uniform draw covers the whole
    order; the top 10 of 2,000 cover its first half percent.

    Args:
        trained: the trained model's costs of every config.
        positions: the measured configs.
    """
    r = normalize(trained, "rank")
    m = np.sort(r[positions])
    gap = (m[-1] - m[0]) / (len(m) - 1) if len(m) > 1 else 0.0
    width = max(BANDWIDTH * gap, 1 / max(1, len(r) - 1))
    i = np.searchsorted(m, r)
    near = np.minimum(np.abs(r - m[np.maximum(i - 1, 0)]), np.abs(r - m[np.minimum(i, len(m) - 1)]))
    return np.clip(1 - near / width, 0, 1)


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
    """The ensemble's weights over its calibrated members: its trained weights, or one member alone
    when that member's out-of-fold order beats them by `margin` null standard deviations.

    Args:
        members: the ensemble's members, in its weights' order.
        oof: member -> its out-of-fold ranks of the measured configs (`Choice.oof`).
        trained: the ensemble's trained weights.
        runtime: the measured runtimes.
        margin: as `choose_share`.

    Returns:
        The weights, what they are ("its trained weights" or "<member> alone") and their held-out tau.
    """
    kept = held_out_tau(sum(w * oof[m] for w, m in zip(trained, members, strict=True)), runtime)
    alone = {m: held_out_tau(oof[m], runtime) for m in members}
    best = max(members, key=lambda m: alone[m])
    if alone[best] - kept <= margin * null_sd(len(runtime)):
        return trained, "its trained weights", kept
    return np.array([float(m == best) for m in members]), f"{best} alone", alone[best]


def _num(v: float) -> str:
    return f"{v:.2f}"
