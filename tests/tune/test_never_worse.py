"""Calibration never ranks the configs it did not learn from worse than the model as trained, beyond
noise (one standard deviation of Kendall tau over the configs left, ranked at random), whatever it
is given: all runtimes equal, one config, the top of the model's own order (what an autotuner
measures), or a uniform draw; and it says in one line what it chose. LightGBM and the GNN learn side
by side on two cores what they learn one after the other."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import numpy as np
import pytest
from helpers import TWO_COLLECTIONS, two_collection_all
from scipy.stats import kendalltau

from tpurank.core.collections import collection_dir
from tpurank.core.metrics import order_from_costs
from tpurank.rank.calibrate import LgbmInputs
from tpurank.rank.finetune import FineTune, GnnInputs
from tpurank.rank.program import Program
from tpurank.rank.select import null_sd, prior_share
from tpurank.tune import Calibration, Tuner

LAYOUT = next(c for c in TWO_COLLECTIONS if c.startswith("layout:"))
HOW = Calibration(gnn=FineTune(steps=5, lr=1e-3))
CASES = [
    "all equal",
    "one config",
    "two configs",
    "top 10 of its own order",
    "12 drawn at random",
    "24 drawn at random",
    "all but one",
]


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Program]]:
    """The small tree's first valid layout graph (every config measured), ranked by each model."""
    small = two_collection_all(tmp_path_factory)
    f = sorted((small.npz / collection_dir(LAYOUT) / "valid").glob("*.npz"))[0]
    with Tuner.load(small.out) as tuner:
        yield {m: tuner.programs(f, collection=LAYOUT, model=m)[0] for m in ("lgbm", "gnn", "ensemble")}


def _measured(program: Program, case: str) -> tuple[np.ndarray, np.ndarray]:
    truth = program.candidates.runtime.astype(np.float64)
    if case == "top 10 of its own order":
        positions = order_from_costs(program.costs[program.model])[:10]
    elif case in ("one config", "two configs"):
        positions = np.arange(1 if case == "one config" else 2)
    else:
        count = {
            "all equal": 10,
            "12 drawn at random": 12,
            "24 drawn at random": 24,
            "all but one": len(truth) - 1,
        }
        positions = np.random.default_rng(0).choice(len(truth), count[case], replace=False)
    runtime = np.full(len(positions), 1000.0) if case == "all equal" else truth[positions]
    return positions, runtime


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("model", ["lgbm", "gnn", "ensemble"])
def test_calibration_ranks_the_rest_no_worse_than_as_trained(
    programs: dict[str, Program], model: str, case: str
) -> None:
    program = programs[model]
    positions, runtime = _measured(program, case)
    costs, line = program.calibrate(positions, runtime, HOW)
    trained = program.costs[model]
    left = np.ones(len(trained), dtype=bool)
    left[positions] = False
    truth = program.candidates.runtime[left]
    if left.sum() > 1:  # all but one: a single config left has no order to score
        tau, tau_trained = (kendalltau(c[left], truth).statistic for c in (costs, trained))
        assert tau >= tau_trained - null_sd(int(left.sum())), (line, tau, tau_trained)
    if case in ("all equal", "one config", "two configs"):  # nothing to tell: as trained, said so
        np.testing.assert_array_equal(costs, trained)
        assert line.endswith("distinct are needed): ranked as trained")
        return
    n = len(positions)
    if n < HOW.checked_from:
        assert line.startswith(f"{program.name}: {n} measured configs, too few to check each model")
    else:
        assert line.startswith(f"{program.name}: calibration chosen on {n} measured configs by 3")
    assert ("lgbm " in line) == (model != "gnn") and ("gnn " in line) == (model != "lgbm")
    if n < HOW.checked_from:  # unchecked, each member's prior share: the trained model outweighs a few
        for m in {"lgbm": ["lgbm"], "gnn": ["gnn"]}.get(model, ["lgbm", "gnn"]):
            share = prior_share(n, HOW.prior_of(m, checked=False))
            assert f"{m} {'as trained' if share == 0 else f'{share:g} calibrated'}" in line, (m, line)
    if "\n" in line or (costs is trained) != line.endswith(": ranked as trained"):
        raise AssertionError(line)


def test_the_choice_is_printed_in_one_line_and_repeats_for_a_seed(programs: dict[str, Program]) -> None:
    program = programs["ensemble"]
    positions, runtime = _measured(program, "24 drawn at random")
    measured = dict(zip(positions.tolist(), runtime, strict=True))
    first, again = (program.ranking(measured, HOW) for _ in range(2))
    np.testing.assert_array_equal(first.order, again.order)
    (line,) = [n for n in first.notes if "calibration chosen" in n]
    assert "the ensemble " in line and "held-out tau" in line and "\n" not in line


def test_lightgbm_learns_in_a_thread_beside_the_gnn_what_it_learns_after_it(
    programs: dict[str, Program], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On two cores LightGBM calibrates in a thread of its own, the GNN in the caller's, each on one
    thread: the same costs and line as one after the other on one core, checked or used whole."""
    program = programs["ensemble"]
    assert program.lgbm is not None
    one_thread = dataclasses.replace(program.lgbm, params={**program.lgbm.params, "num_threads": 1})
    program = dataclasses.replace(program, lgbm=one_thread)
    positions, runtime = _measured(program, "12 drawn at random")
    caller, seen = threading.get_ident(), set()
    for cls, name in ((LgbmInputs, "lgbm"), (GnnInputs, "gnn")):

        def spy(self, *args, plain=cls.calibrated, name=name, **kw):  # noqa: ANN001, ANN202
            seen.add((name, threading.get_ident() == caller))
            return plain(self, *args, **kw)

        monkeypatch.setattr(cls, "calibrated", spy)
    results, threads = {}, {}
    for cores in (1, 2):
        monkeypatch.setattr("tpurank.rank.program.affinity_cores", lambda cores=cores: cores)
        seen.clear()
        for checked in (True, False):
            how = dataclasses.replace(HOW, select=checked)
            results[cores, checked] = program.calibrate(positions, runtime, how)
        threads[cores] = set(seen)
    for checked in (True, False):
        np.testing.assert_array_equal(results[1, checked][0], results[2, checked][0])
        assert results[1, checked][1] == results[2, checked][1]
    assert threads[1] == {("lgbm", True), ("gnn", True)}
    assert threads[2] == {("lgbm", False), ("gnn", True)}


def test_the_ensemble_takes_the_better_member_alone_when_the_other_is_shuffled_noise(
    programs: dict[str, Program],
) -> None:
    """The GNN's trained costs replaced by a shuffle (noise), left as trained and weighted 0.8: on
    held-out folds of the measured configs the ensemble's weights go to LightGBM alone, said in the
    line, and it ranks the rest no worse than its trained weights over the same members."""
    program = programs["ensemble"]
    noise = np.random.default_rng(1).permutation(program.costs["gnn"]).astype(np.float32)
    assert program.weights is not None
    members = list(program.weights["members"])
    weights = {**program.weights, "weights": [0.2 if m == "lgbm" else 0.8 for m in members]}  # mostly noise
    shuffled = dataclasses.replace(program, costs={**program.costs, "gnn": noise}, weights=weights)
    truth = program.candidates.runtime.astype(np.float64)
    positions = np.random.default_rng(2).choice(len(truth), len(truth) // 2, replace=False)
    how = dataclasses.replace(HOW, gnn=None)
    costs, line = shuffled.calibrate(positions, truth[positions], how)
    assert "the ensemble lgbm alone (held-out tau" in line, line
    left = np.ones(len(truth), dtype=bool)
    left[positions] = False
    tau, tau_kept = (
        kendalltau(c[left], truth[left]).statistic
        for c in (
            costs,
            shuffled.calibrate(positions, truth[positions], dataclasses.replace(how, select=False))[0],
        )
    )
    assert tau >= tau_kept - null_sd(int(left.sum()))
