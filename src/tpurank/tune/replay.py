"""The autotuning loop replayed on a file with measured runtimes (`tpurank tune`).

Each round the `Tuning` proposes `per_round` configs, reads their runtimes from the file as if it
had measured them, and calibrates before it proposes again. Beside it, after the same number of
measurements: random search (its expectation, exact: no draw involved) and the uncalibrated model
measuring its own top configs. At the end, how many measurements each needed to come within
`tolerance` of the true best.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy.special import gammaln

from tpurank.core.metrics import kendall_tau, order_from_costs
from tpurank.tune.tuner import Tuning

TOLERANCE = 0.005  # "within 0.5% of the best": most real layout configs sit this close to it
TOP_K = (1, 5, 10)  # the TpuGraphs paper's top-K error of a cost model, at these K


@dataclass(frozen=True)
class Round:
    """The loop after one round.

    Args:
        measured: measurements so far.
        tuner: the best runtime the loop found over the true best.
        random: random search's expected best over the true best, after as many measurements.
        model: the uncalibrated model's best among its top `measured` over the true best.
        tau: Kendall tau of the calibrated ranking on the configs not yet measured (NaN: < 2 left).
        tau_model: the uncalibrated ranking's tau on the same configs.
    """

    measured: int
    tuner: float
    random: float
    model: float
    tau: float
    tau_model: float


@dataclass
class Replay:
    """A replayed loop on one graph.

    Args:
        graph: its name.
        configs: the candidates with a runtime in the file (the only ones the loop can measure).
        best: the true best runtime (ns; tile: over its normalizer, as scored).
        rounds: one `Round` per round.
        needed: measurements each needed to come within `TOLERANCE` of the best ("tuner": None
            when the rounds ran out first; "random": the expectation; "model": its first such
            config's place in its ranking).
        top_k_error: the TpuGraphs paper's measure, per search and K in `TOP_K`: the best runtime
            among its first K configs over the true best, minus 1 ("tuner": the first K the loop
            proposed, None when it proposed fewer; "random": the expectation; "model": its own top
            K as trained).
    """

    graph: str
    configs: int
    best: float
    rounds: list[Round] = field(default_factory=list)
    needed: dict[str, float | None] = field(default_factory=dict)
    top_k_error: dict[str, dict[int, float | None]] = field(default_factory=dict)

    def as_json(self) -> dict:
        return asdict(self)


def expected_random_best(runtime: np.ndarray, n: int) -> float:
    """The expected best runtime of `n` configs drawn at random without replacement.

    The i-th fastest (0-based) is the best of the draw when it is drawn and none of the i faster
    ones is: C(N-1-i, n-1) / C(N, n) of the draws.

    Args:
        runtime: every candidate's runtime.
        n: draws, 1..N.
    """
    r = np.sort(np.asarray(runtime, dtype=np.float64))
    big, n = len(r), min(n, len(r))
    i = np.arange(big - n + 1)
    log_p = _log_comb(big - 1 - i, n - 1) - _log_comb(np.array(big), n)
    return float((np.exp(log_p) * r[: len(i)]).sum())


def _log_comb(a: np.ndarray, b: int) -> np.ndarray:
    return gammaln(a + 1) - gammaln(b + 1) - gammaln(a - b + 1)


def expected_random_needed(runtime: np.ndarray, tolerance: float = TOLERANCE) -> float:
    """Random search's expected measurements until one is within `tolerance` of the best: with G
    such configs among N, (N + 1) / (G + 1) (draws without replacement)."""
    r = np.asarray(runtime, dtype=np.float64)
    good = int((r <= r.min() * (1 + tolerance)).sum())
    return (len(r) + 1) / (good + 1)


def replay(tuning: Tuning, truth: np.ndarray, rounds: int, per_round: int, explore: float = 0.0) -> Replay:
    """Run the loop on a program whose runtimes are known.

    Args:
        tuning: a fresh tuning of the program, allowed to propose only configs with a runtime.
        truth: each config's runtime (ns) in the program's order; > 0 where measured in the file.
        rounds: how many rounds.
        per_round: configs measured per round.
        explore: the share of each round drawn at random (`Tuning.propose`).
    """
    known = truth > 0
    runtime = truth[known]
    best = float(runtime.min())
    good = truth <= best * (1 + TOLERANCE)
    model_costs = tuning.program.costs[tuning.program.model]
    model_order = [p for p in order_from_costs(model_costs) if known[p]]
    position = {int(c): i for i, c in enumerate(tuning.program.candidates.file_index)}
    out = Replay(tuning.name, int(known.sum()), best)
    found_at: int | None = None
    proposed: list[float] = []  # the runtimes of the loop's proposals, in the order proposed
    for _ in range(rounds):
        configs = tuning.propose(per_round, explore)
        if not configs:
            break
        proposed += [float(truth[position[c]]) for c in configs]
        for c in configs:
            seen = len(tuning.measured) + configs.index(c) + 1
            if found_at is None and good[position[c]]:
                found_at = seen
        tuning.observe(configs, [float(truth[position[c]]) for c in configs])
        out.rounds.append(_round(tuning, truth, known, model_costs, model_order, best))
    first_good = next(i for i, p in enumerate(model_order, start=1) if good[p])
    out.needed = {"tuner": found_at, "random": expected_random_needed(runtime), "model": first_good}
    out.top_k_error = top_k_errors(proposed, truth[model_order], runtime, best)
    return out


def top_k_errors(
    proposed: list[float], model_runtimes: np.ndarray, runtime: np.ndarray, best: float
) -> dict[str, dict[int, float | None]]:
    """Each search's best among its first K over the true best, minus 1, for K in `TOP_K`.

    Args:
        proposed: the loop's proposals' runtimes, in the order proposed.
        model_runtimes: the runtimes in the uncalibrated model's order.
        runtime: every candidate's runtime (random search's draws).
        best: the true best.
    """
    out: dict[str, dict[int, float | None]] = {"tuner": {}, "random": {}, "model": {}}
    for k in TOP_K:
        out["tuner"][k] = min(proposed[:k]) / best - 1 if len(proposed) >= k else None
        out["random"][k] = expected_random_best(runtime, k) / best - 1
        out["model"][k] = float(model_runtimes[:k].min()) / best - 1
    return out


def _round(
    tuning: Tuning,
    truth: np.ndarray,
    known: np.ndarray,
    model_costs: np.ndarray,
    model_order: list[int],
    best: float,
) -> Round:
    """The scores after one round: slowdowns of the three searches, taus on the configs left."""
    n = len(tuning.measured)
    left = known.copy()
    left[list(tuning.measured)] = False
    calibrated = np.empty(len(truth), dtype=np.float64)
    ranking = tuning.ranking()
    position = {int(c): i for i, c in enumerate(tuning.program.candidates.file_index)}
    calibrated[[position[int(c)] for c in ranking.order]] = ranking.cost
    tau, tau_model = (_tau(costs, truth, left) for costs in (calibrated, model_costs))
    found = min(tuning.measured.values())
    model_best = float(truth[model_order[:n]].min())
    return Round(
        n, found / best, expected_random_best(truth[known], n) / best, model_best / best, tau, tau_model
    )


def _tau(costs: np.ndarray, truth: np.ndarray, keep: np.ndarray) -> float:
    """Kendall tau of `costs` against `truth` over the configs of `keep`."""
    if keep.sum() < 2:
        return math.nan
    return kendall_tau(order_from_costs(costs[keep]), truth[keep])
