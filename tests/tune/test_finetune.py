"""The GNN fine-tuned on a program's measured configs (`Calibration.gnn`, `rank --gnn-steps`): it
learns from them and ranks the others, its scores leave them out, the trained files are only read,
a seed repeats it, the ensemble keeps its weights over the calibrated members, and bad settings are
refused in one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import TWO_COLLECTIONS, one_error, snapshot, two_collection_all

from tpurank.cli import main
from tpurank.core.collections import collection_dir
from tpurank.core.errors import TpurankError
from tpurank.core.metrics import graph_metrics
from tpurank.core.paths import Paths
from tpurank.models.ensemble import combine
from tpurank.rank.finetune import FineTune
from tpurank.tune import Calibration, Tuner

LAYOUT = next(c for c in TWO_COLLECTIONS if c.startswith("layout:"))
# a few steps: the tiny model moves, the suite stays fast. The time limit is one no run comes near: the
# fine-tuning's learning rate follows the larger of its shares of steps and of seconds spent
# (gnn/training/lr_schedule.py), so under a 60 s limit the first step's rate is 0.5 * (1 + cos(pi *
# spent / 60)), which the seconds a busy machine takes before that step move by up to 2e-6: two
# fine-tunes with one seed then differed in the 7th digit. Over 1e12 s the time share is below 1e-10
# and the factor is exactly 1.0, so the costs are a function of the seed alone
TUNE = FineTune(steps=3, seconds=1e12, lr=1e-3)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    return two_collection_all(tmp_path_factory)


def _valid(paths: Paths) -> Path:
    """A valid graph of the small tree: every config measured."""
    return sorted((paths.npz / collection_dir(LAYOUT) / "valid").glob("*.npz"))[0]


def _measured(npz: Path, k: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """k configs of an npz (its positions are its indices) and their runtimes in the file."""
    runtime = np.load(npz)["config_runtime"]
    picked = np.sort(np.random.default_rng(seed).choice(len(runtime), size=k, replace=False))
    return picked, runtime[picked].astype(np.float64)


BAD = [
    *({"steps": v} for v in (0, -2, 2.5)),
    *({"seconds": v} for v in (0.0, math.nan, math.inf)),
    *({"lr": v} for v in (0.0, -1e-3, math.nan)),
]


@pytest.mark.parametrize("bad", BAD, ids=str)
def test_bad_fine_tuning_settings_are_refused(bad: dict) -> None:
    with pytest.raises(TpurankError, match="GNN fine-tuning"):
        FineTune(**bad)


def test_a_calibration_refuses_a_gnn_setting_that_is_not_a_fine_tune() -> None:
    with pytest.raises(TpurankError, match="must be a FineTune"):
        Calibration(gnn=20)  # type: ignore[arg-type]


def test_the_gnn_learns_repeats_for_a_seed_and_never_writes_its_trained_files(small: Paths) -> None:
    f = _valid(small)
    positions, runtime = _measured(f, 12)
    before = snapshot(small.out)
    with Tuner.load(small.out) as tuner:
        program = tuner.programs(f, collection=LAYOUT, model="gnn")[0]
        assert program.gnn is not None
        rng_before = torch.random.get_rng_state()
        trained = program.costs["gnn"]
        plain = program.costs_with(positions, runtime, Calibration(gnn=None))
        np.testing.assert_array_equal(plain, trained)  # turned off: ranked as trained
        tuned = [program.costs_with(positions, runtime, Calibration(gnn=TUNE)) for _ in range(2)]
        other = program.costs_with(positions, runtime, Calibration(gnn=TUNE, seed=1))
        rng_after = torch.random.get_rng_state()
    assert not np.allclose(tuned[0], trained)
    np.testing.assert_array_equal(tuned[0], tuned[1])  # the same seed, the same costs
    assert tuned[0].shape == trained.shape and np.isfinite(tuned[0]).all()
    assert other.shape == trained.shape
    assert snapshot(small.out) == before  # the trained files are only read
    assert torch.equal(rng_after, rng_before)  # no global state changed


def test_one_measured_config_leaves_the_gnn_as_trained(small: Paths) -> None:
    f = _valid(small)
    positions, runtime = _measured(f, 1)
    with Tuner.load(small.out) as tuner:
        program = tuner.programs(f, collection=LAYOUT, model="gnn")[0]
        one = program.costs_with(positions, runtime, Calibration(gnn=TUNE))
    np.testing.assert_array_equal(one, program.costs["gnn"])


def test_the_ensemble_keeps_its_weights_over_the_calibrated_members_when_the_gnn_learns(
    small: Paths,
) -> None:
    f = _valid(small)
    positions, runtime = _measured(f, 12)
    how = Calibration(gnn=TUNE, select=False)
    with Tuner.load(small.out) as tuner:
        program = tuner.programs(f, collection=LAYOUT)[0]
        kept = program.costs_with(positions, runtime, how)
        lgbm = program.lgbm.calibrated(positions, runtime, how)
        gnn = program.gnn.calibrated(positions, runtime, TUNE, how.seed)
        alone = program.costs_with(positions, runtime, Calibration(gnn=TUNE, ensemble="lgbm", select=False))
        untuned = program.costs_with(positions, runtime, Calibration(gnn=None, select=False))
    w = program.weights
    members = [{"lgbm": lgbm, "gnn": gnn}.get(m, program.costs[m]) for m in w["members"]]
    np.testing.assert_allclose(kept, combine(members, np.asarray(w["weights"]), w["normalize"]), rtol=1e-6)
    np.testing.assert_array_equal(alone, lgbm)
    np.testing.assert_array_equal(untuned, lgbm)  # the GNN not fine-tuned: the calibrated LightGBM alone
    assert (Calibration().weights, Calibration(gnn=None).weights) == ("kept", "lgbm")


def _write_csv(path: Path, positions: np.ndarray, runtime: np.ndarray) -> Path:
    rows = "".join(f"{p},{int(r)}\n" for p, r in zip(positions, runtime, strict=True))
    path.write_text("config,runtime_ns\n" + rows)
    return path


def _rank(small: Paths, f: Path, out: Path, *extra: str) -> list[str]:
    models = ["--models", str(small.out), "--collection", LAYOUT, "--model", "gnn"]
    return ["rank", str(f), *models, "--out", str(out), *extra]


def test_rank_fine_tunes_the_gnn_and_scores_only_the_configs_it_did_not_learn_from(
    small: Paths, tmp_path: Path, capsys
) -> None:
    f = _valid(small)
    positions, runtime = _measured(f, 10, seed=2)
    m = _write_csv(tmp_path / "m.csv", positions, runtime)
    whole = ["--measured", str(m), "--no-select"]
    assert main(_rank(small, f, tmp_path / "r.json", *whole, "--gnn-steps", "3")) == 0
    capsys.readouterr()
    g = json.loads((tmp_path / "r.json").read_text())[0]
    n = g["configs"]
    assert (g["calibrated_on"], g["scored"]) == (10, n - 10)
    truth = np.load(f)["config_runtime"]
    rest = [r["config"] for r in g["ranking"] if r["calibrated_with_ns"] is None]
    assert not set(rest) & set(positions.tolist())
    expected = graph_metrics(LAYOUT, np.arange(len(rest)), truth[rest])
    assert g["scores"]["score"] == pytest.approx(expected["score"])
    # --gnn-steps 0: the GNN ranks as trained, and says so in one line
    assert main(_rank(small, f, tmp_path / "plain.json", *whole, "--gnn-steps", "0")) == 0
    assert "the GNN is not fine-tuned (--gnn-steps 0): ranked as trained" in capsys.readouterr().err
    plain = json.loads((tmp_path / "plain.json").read_text())[0]
    assert [r["config"] for r in plain["ranking"]] != [r["config"] for r in g["ranking"]]


@pytest.mark.parametrize(
    ("extra", "measured", "message"),
    [
        (["--gnn-steps", "-1"], True, "--gnn-steps must be >= 0"),
        (
            ["--gnn-steps", "0", "--gnn-seconds", "5"],
            True,
            "--gnn-seconds limits the GNN's fine-tuning, which",
        ),
        (["--gnn-seconds", "0"], True, "GNN fine-tuning seconds must be a positive number"),
        (
            ["--gnn-steps", "3"],
            False,
            "--gnn-steps sets how the GNN learns from measurements: give them with",
        ),
    ],
)
def test_rank_refuses_bad_fine_tuning_options_in_one_line(
    small: Paths, tmp_path: Path, capsys, extra: list[str], measured: bool, message: str
) -> None:
    f = _valid(small)
    positions, runtime = _measured(f, 5)
    m = ["--measured", str(_write_csv(tmp_path / "m.csv", positions, runtime))] if measured else []
    assert main(_rank(small, f, tmp_path / "r.json", *m, *extra)) == 1
    assert message in one_error(capsys, "rank")
    assert not (tmp_path / "r.json").exists()


def test_the_tuner_with_gnn_fine_tuning_repeats_its_proposals_for_a_seed(small: Paths) -> None:
    f = _valid(small)
    truth = np.load(f)["config_runtime"]
    runs = []
    for _ in range(2):
        with Tuner.load(small.out, how=Calibration(gnn=TUNE)) as tuner:
            tuning = tuner.start(f, collection=LAYOUT, model="gnn")
            proposed = []
            for _ in range(2):
                configs = tuning.propose(4)
                tuning.observe(configs, [float(truth[c]) for c in configs])
                proposed.append(configs)
            runs.append(proposed)
    assert runs[0] == runs[1]
    assert len({c for r in runs[0] for c in r}) == 8  # never proposed twice


def test_a_tile_kernel_fine_tunes_on_its_normalized_runtimes(small: Paths) -> None:
    f = sorted((small.npz / collection_dir("tile:xla") / "valid").glob("*.npz"))[0]
    with Tuner.load(small.out) as tuner:
        program = tuner.programs(f, model="gnn")[0]
        c = program.candidates
        positions = np.flatnonzero(c.runtime > 0)[:8]
        runtime = c.runtime[positions].astype(np.float64)
        tuned = [
            program.costs_with(positions, runtime, Calibration(gnn=TUNE, gnn_tile=True, select=False))
            for _ in range(2)
        ]
        by_default = program.costs_with(positions, runtime, Calibration(gnn=TUNE))
        note = program.ranking(
            dict(zip(positions.tolist(), runtime, strict=True)), Calibration(gnn=TUNE)
        ).notes
    assert program.collection == "tile:xla" and c.normalizer is not None
    assert not np.allclose(tuned[0], program.costs["gnn"])
    np.testing.assert_array_equal(tuned[0], tuned[1])
    # not measured on real tile kernels: their GNN is fine-tuned only when asked (gnn_tile, --gnn-steps)
    np.testing.assert_array_equal(by_default, program.costs["gnn"])
    assert any("a tile kernel's GNN is fine-tuned only with --gnn-steps" in n for n in note)
