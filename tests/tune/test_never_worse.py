"""Calibration never ranks the configs it did not learn from worse than the model as trained, beyond
noise (one standard deviation of Kendall tau over the configs left, ranked at random), whatever it
is given: all runtimes equal, one config, the top of the model's own order (what an autotuner
measures), or a uniform draw; and it says in one line what it chose. Its fits compute side by side
on any count of cores what they compute one after another."""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from helpers import TWO_COLLECTIONS, two_collection_all
from scipy.stats import kendalltau

from tpurank.core.collections import collection_dir
from tpurank.core.metrics import order_from_costs
from tpurank.rank import finetune
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


@pytest.mark.parametrize("dropout", [True, False], ids=["dropout", "no dropout"])
def test_the_fits_run_side_by_side_and_compute_the_same_on_any_count_of_cores(
    programs: dict[str, Program], monkeypatch: pytest.MonkeyPatch, dropout: bool
) -> None:
    """Every fit (each member's held-out folds and its fit on all measured configs) runs on one thread,
    as many at once as there are cores: the same costs and line on 1, 2 and 3 cores, checked or used
    whole; on one core all in the caller's thread. The GNN's fits go one at a time where a step draws
    from torch's generator (dropout), side by side where none does (as trained here)."""
    plain_load = finetune.load_model

    def with_dropout(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        """The member as trained (no dropout), its dropout layers at 0.2 when the case asks."""
        loaded = plain_load(*args, **kw)
        for m in loaded.model.modules():
            if isinstance(m, torch.nn.Dropout):
                m.p = 0.2 if dropout else 0.0
        return loaded

    monkeypatch.setattr(finetune, "load_model", with_dropout)
    program = programs["ensemble"]
    assert program.gnn is not None
    program = dataclasses.replace(program, gnn=dataclasses.replace(program.gnn, _side_by_side=None))
    assert program.gnn is not None and program.gnn.side_by_side() is not dropout
    positions, runtime = _measured(program, "24 drawn at random")
    caller, lock, running, seen = threading.get_ident(), threading.Lock(), [0], []
    for cls, name in ((LgbmInputs, "lgbm"), (GnnInputs, "gnn")):

        def spy(self, *args, plain=cls.calibrated, name=name, **kw):  # noqa: ANN001, ANN202
            with lock:
                running[0] += name == "gnn"
                seen.append((name, threading.get_ident(), running[0]))
            try:
                return plain(self, *args, **kw)
            finally:
                with lock:
                    running[0] -= name == "gnn"

        monkeypatch.setattr(cls, "calibrated", spy)
    results, fits = {}, {}
    for cores in (1, 2, 3):
        monkeypatch.setattr("tpurank.rank.fits.affinity_cores", lambda cores=cores: cores)
        seen.clear()
        for checked in (True, False):
            results[cores, checked] = program.calibrate(
                positions, runtime, dataclasses.replace(HOW, select=checked)
            )
        fits[cores] = list(seen)
    for cores, checked in results:
        np.testing.assert_array_equal(results[cores, checked][0], results[1, checked][0])
        assert results[cores, checked][1] == results[1, checked][1]
    assert {t for _, t, _ in fits[1]} == {caller}
    assert caller not in {t for _, t, _ in fits[2]}
    gnn_at_once = max(n for name, _, n in fits[2] if name == "gnn")
    gnn_threads = {t for name, t, _ in fits[2] if name == "gnn"}
    if dropout:
        assert gnn_at_once == 1
    else:
        assert gnn_at_once == 2 or len(gnn_threads) >= 2


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
