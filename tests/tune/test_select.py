"""How far a calibration is trusted (tpurank.rank.select): the blend share and the ensemble's weights
chosen on held-out folds of the measured configs, with a margin over the trained order that noise
does not cross."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from tpurank.core.errors import TpurankError
from tpurank.rank import select
from tpurank.rank.calibrate import Calibration


def test_the_null_sd_is_the_spread_of_tau_over_random_orders() -> None:
    rng = np.random.default_rng(0)
    for n in (5, 10, 30):
        runtime = np.arange(n, dtype=float)
        taus = [kendalltau(rng.permutation(n), runtime).statistic for _ in range(1200)]
        assert select.null_sd(n) == pytest.approx(np.std(taus), rel=0.08)
    assert select.null_sd(1) == np.inf


def test_folds_are_balanced_seeded_and_never_more_than_the_configs() -> None:
    fold = select.fold_of(10, 3, seed=4)
    assert sorted(np.bincount(fold)) == [3, 3, 4]
    np.testing.assert_array_equal(fold, select.fold_of(10, 3, seed=4))
    assert not np.array_equal(fold, select.fold_of(10, 3, seed=5))
    assert sorted(np.bincount(select.fold_of(2, 3, seed=0))) == [1, 1]


def _case(n: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runtimes, a trained order that agrees with them a little, and random noise."""
    rng = np.random.default_rng(seed)
    runtime = rng.permutation(n).astype(float) + 1
    trained = runtime + rng.normal(0, n / 2, n)
    return runtime, trained, rng.permutation(n).astype(float)


def test_a_calibration_that_orders_held_out_configs_better_is_used_whole() -> None:
    runtime, trained, _ = _case(30, 0)
    choice = select.choose_share(trained, select.normalize(runtime, "rank"), runtime, margin=0.5)
    assert choice.share == 1.0 and choice.tau == pytest.approx(1.0)
    assert choice.trained == pytest.approx(kendalltau(trained, runtime).statistic)
    assert "1 calibrated (held-out tau 1.00, as trained" in choice.text("lgbm")


@pytest.mark.parametrize("seed", range(5))
def test_a_noisy_calibration_gives_way_to_the_trained_order_only_beyond_the_margin(seed: int) -> None:
    runtime, trained, noise = _case(20, seed)
    rank_t, rank_n = select.normalize(trained, "rank"), select.normalize(noise, "rank")
    taus = {s: kendalltau((1 - s) * rank_t + s * rank_n, runtime)[0] for s in select.SHARES}
    best = max(select.SHARES, key=lambda s: (taus[s], s))
    choice = select.choose_share(trained, rank_n, runtime, margin=0.5)
    if taus[best] - taus[1.0] > 0.5 * select.null_sd(20):
        assert (choice.share, choice.tau) == (best, pytest.approx(taus[best]))
    else:
        assert choice.share == 1.0
    assert choice.trained == pytest.approx(taus[0.0])


def test_a_clearly_worse_calibration_gives_way_to_the_trained_order() -> None:
    runtime = np.arange(30, dtype=float) + 1
    choice = select.choose_share(runtime, select.normalize(runtime[::-1], "rank"), runtime, margin=0.5)
    assert choice.share == 0.25 and choice.tau == pytest.approx(1.0)  # as good as trained: the larger
    assert choice.text("gnn") == "gnn 0.25 calibrated (held-out tau 1.00, as trained 1.00)"
    np.testing.assert_allclose(choice.oof, select.normalize(runtime, "rank"))
    flat = select.choose_share(runtime, np.zeros(30), runtime, 0.5)  # it tells no config apart
    assert (
        flat.share == 0.75
        and flat.text("lgbm") == "lgbm 0.75 calibrated (held-out tau 1.00, as trained 1.00)"
    )


def test_a_fold_that_learned_nothing_changes_nothing_held_out() -> None:
    runtime, trained, _ = _case(12, 1)
    choice = select.choose_share(trained, np.full(12, np.nan), runtime, margin=0.0)
    assert choice.share == 1.0 and choice.tau == pytest.approx(choice.trained)


def test_out_of_fold_ranks_come_from_models_that_never_saw_the_fold() -> None:
    positions = np.arange(10, 20)
    runtime = np.arange(10, dtype=float)[::-1] + 1
    seen: list[set[int]] = []

    def learn(p: np.ndarray, r: np.ndarray, scored: np.ndarray) -> np.ndarray:
        seen.append(set(p.tolist()))
        return -scored.astype(float)  # ranks by position, reversed: the runtimes' own order

    fold = select.fold_of(10, 3, seed=0)
    oof = select.out_of_fold({f: fit() for f, fit in select.held_out(learn, positions, runtime, fold)}, fold)
    assert len(seen) == 3
    for f, trained_on in zip(np.unique(fold), seen, strict=True):
        assert not trained_on & set(positions[fold == f].tolist())
    assert kendalltau(oof, runtime).statistic == pytest.approx(1.0)


def test_a_fold_whose_fit_learned_nothing_is_left_nan() -> None:
    fold = np.array([0, 1, 2, 0, 1, 2])
    costs = {0: np.arange(6.0), 1: None, 2: -np.arange(6.0)}
    oof = select.out_of_fold(costs, fold)
    assert np.isnan(oof[fold == 1]).all()
    assert oof[fold == 0].tolist() == [0.0, 0.6] and oof[fold == 2].tolist() == [0.6, 0.0]


def test_the_blend_is_trained_calibrated_or_their_ranks_mixed() -> None:
    trained, calibrated = np.array([1.0, 2, 3, 4]), np.array([40.0, 30, 20, 10])
    assert select.blend(trained, calibrated, 0.0) is trained
    assert select.blend(trained, calibrated, 1.0) is calibrated
    np.testing.assert_allclose(select.blend(trained, calibrated, 0.25), [0.25, 5 / 12, 7 / 12, 0.75])
    near = np.array([1.0, 1.0, 0.0, 0.5])  # the calibration trusted at the first two configs only
    np.testing.assert_allclose(select.blend(trained, calibrated, 1.0, near), [1, 2 / 3, 2 / 3, 0.5])


def test_coverage_is_one_over_the_measured_span_and_falls_to_none_beyond() -> None:
    trained = np.arange(101, dtype=float)  # ranks 0, 0.01, ..., 1
    near = select.coverage(trained, np.array([0, 2, 4]), reach=4.0)  # mean gap 0.02: trusted to 0.12
    assert (near[:5] == 1).all() and near[8] == pytest.approx(0.5) and near[12:] == pytest.approx(0, abs=1e-9)
    spread = select.coverage(trained, np.array([0, 50, 100]), reach=4.0)  # a wide draw spans it all
    np.testing.assert_array_equal(spread, np.ones(101))
    np.testing.assert_array_equal(select.coverage(trained, np.array([0]), reach=np.inf), np.ones(101))


def test_the_ensemble_keeps_its_weights_unless_a_member_alone_beats_them() -> None:
    runtime, trained, noise = _case(40, 3)
    good, bad = select.normalize(runtime, "rank"), select.normalize(noise, "rank")
    w = np.array([0.5, 0.5])
    weights, what, tau = select.choose_weights(["lgbm", "gnn"], {"lgbm": good, "gnn": bad}, w, runtime, 0.5)
    assert (list(weights), what, tau) == ([1.0, 0.0], "lgbm alone", pytest.approx(1.0))
    near = select.normalize(runtime + np.random.default_rng(0).normal(0, 0.5, 40), "rank")
    weights, what, _ = select.choose_weights(["lgbm", "gnn"], {"lgbm": good, "gnn": near}, w, runtime, 0.5)
    assert weights is w and what == "its trained weights"


@pytest.mark.parametrize(
    ("measured", "prior", "share"),
    [(5, 20.0, 0.0), (10, 20.0, 0.25), (20, 20.0, 0.5), (60, 20.0, 0.75), (3, 0.0, 1.0)],
)
def test_the_prior_share_grows_with_the_measurements_down_to_the_grid(
    measured: int, prior: float, share: float
) -> None:
    assert select.prior_share(measured, prior) == share


def test_each_member_has_its_prior_the_gnns_until_checked_and_tile_its_own() -> None:
    how = Calibration(lgbm_prior=20.0, tile_lgbm_prior=100.0, gnn_prior=5.0)
    assert (how.prior_of("lgbm", False), how.prior_of("lgbm", True)) == (20.0, 20.0)
    assert (how.prior_of("gnn", False), how.prior_of("gnn", True)) == (5.0, 0.0)
    tile = how.for_kind("tile")
    assert tile.prior_of("lgbm", True) == 100.0 and tile.gnn is None
    assert (how.anchor_query_rows, tile.anchor_query_rows) == (100, 0)  # tile's queries stay whole
    assert how.for_kind("layout") is how
    assert Calibration(gnn_tile=True).for_kind("tile").gnn is not None
    # what the default shares come to at the measured counts
    assert [select.prior_share(k, how.prior_of("gnn", False)) for k in (5, 10, 19)] == [0.5, 0.5, 0.75]
    assert [select.prior_share(k, tile.lgbm_prior) for k in (10, 20, 50)] == [0.0, 0.0, 0.25]


def test_unchecked_the_prior_share_stands_and_checked_only_a_clear_gain_moves_it() -> None:
    runtime, trained, _ = _case(30, 2)
    unchecked = select.choose_share(trained, np.full(30, np.nan), runtime, margin=np.inf, prior=0.25)
    assert unchecked.share == 0.25
    perfect = select.normalize(runtime, "rank")  # out of fold the calibration orders them all right
    assert select.choose_share(trained, perfect, runtime, margin=1.0, prior=0.0).share == 1.0
    wrong = select.normalize(-runtime, "rank")  # out of fold it orders them all wrong
    assert select.choose_share(trained, wrong, runtime, margin=1.0, prior=0.5).share == 0.0


def test_the_ensemble_takes_equal_weights_when_its_members_err_apart() -> None:
    rng = np.random.default_rng(5)
    runtime = np.arange(60, dtype=float)
    a, b = (select.normalize(runtime + rng.normal(0, 15, 60), "rank") for _ in range(2))
    w = np.array([1.0, 0.0])  # trained: the first member alone
    weights, what, tau = select.choose_weights(["lgbm", "gnn"], {"lgbm": a, "gnn": b}, w, runtime, 0.5)
    taus = {n: kendalltau(x, runtime).statistic for n, x in (("a", a), ("b", b), ("ab", a + b))}
    assert taus["ab"] - max(taus["a"], taus["b"]) > 0.5 * select.null_sd(60)  # the case is what it says
    assert (list(weights), what, tau) == ([0.5, 0.5], "equal weights", pytest.approx(taus["ab"]))


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("folds", 1),
        ("margin", -0.1),
        ("margin", float("nan")),
        ("weights_margin", -0.5),
        ("reach", 0.0),
        ("lgbm_prior", -1.0),
        ("tile_lgbm_prior", float("nan")),
        ("gnn_prior", float("inf")),
        ("checked_from", 1),
        ("anchor_query_rows", 1),
        ("anchor_query_rows", -5),
        ("anchor_query_rows", 50.5),
        ("anchor_query_rows", False),
    ],
)
def test_bad_selection_settings_are_refused(field: str, value: float) -> None:
    with pytest.raises(TpurankError, match=f"calibration {field} must be"):
        Calibration(**{field: value})
