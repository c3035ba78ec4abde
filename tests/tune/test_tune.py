"""`rank --measured`, `Tuner` and `tpurank tune` on trained models: without measurements the ranking
is `predict`'s; with them LightGBM learns from the measured configs, which the scores leave out; bad
measurements stop in one line and write nothing; the loop is repeatable for a seed."""

from __future__ import annotations

import csv
import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import (
    SAMPLE_ROOT,
    TWO_COLLECTIONS,
    copy_tree,
    layout_pb,
    one_error,
    snapshot,
    two_collection_all,
)

from tpurank.cli import main
from tpurank.core.collections import collection_dir
from tpurank.core.errors import TpurankError
from tpurank.core.metrics import graph_metrics, order_from_costs
from tpurank.core.paths import Paths
from tpurank.lgbm.training_rows import TRAIN_ROWS_FILE
from tpurank.lgbm.training_rows import load as load_rows
from tpurank.models.predictions import load_predictions
from tpurank.pb.schema import ModuleTuningData
from tpurank.tune import Calibration, Tuner

LAYOUT = next(c for c in TWO_COLLECTIONS if c.startswith("layout:"))


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    return two_collection_all(tmp_path_factory)


def _valid(paths: Paths) -> Path:
    """A valid graph of the small tree: every config measured."""
    return sorted((paths.npz / collection_dir(LAYOUT) / "valid").glob("*.npz"))[0]


def _write_csv(path: Path, rows: list[tuple], header: str = "config,runtime_ns") -> Path:
    path.write_text(header + "\n" + "".join(",".join(str(v) for v in r) + "\n" for r in rows))
    return path


def _measured(npz: Path, k: int, seed: int = 0) -> list[tuple[int, int]]:
    """k configs of an npz and their runtimes in the file, drawn at random."""
    runtime = np.load(npz)["config_runtime"]
    picked = np.random.default_rng(seed).choice(len(runtime), size=k, replace=False)
    return [(int(i), int(runtime[i])) for i in sorted(picked)]


def _rank(small: Paths, files: list[Path], out: Path, *extra: str) -> list[str]:
    return [
        "rank",
        *map(str, files),
        "--models",
        str(small.out),
        "--collection",
        LAYOUT,
        "--out",
        str(out),
        *extra,
    ]


def test_without_measured_the_ranking_is_predicts(small: Paths, tmp_path: Path) -> None:
    """The small tree's `all` predicted its valid split; `rank` of the same file gives that order."""
    f = _valid(small)
    assert main(_rank(small, [f], tmp_path / "r.csv")) == 0
    with open(tmp_path / "r.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    predicted = load_predictions(small.prediction_file("ensemble", "valid"))[f"{LAYOUT}:{f.stem}"]
    assert [int(r["config"]) for r in rows] == order_from_costs(predicted).tolist()
    assert "calibrated_with_ns" not in rows[0]


def test_calibration_learns_and_its_score_leaves_the_measured_configs_out(
    small: Paths, tmp_path: Path, capsys
) -> None:
    f = _valid(small)
    measured = _measured(f, 12)
    m = _write_csv(tmp_path / "m.csv", measured)
    assert main(_rank(small, [f], tmp_path / "r.json", "--measured", str(m), "--no-select")) == 0
    printed = capsys.readouterr().out
    g = json.loads((tmp_path / "r.json").read_text())[0]
    n = g["configs"]
    assert (g["calibrated_on"], g["scored"]) == (12, n - 12)
    assert (
        f"calibrated on 12 measured configs; against {n - 12} measured of the other {n - 12} configs"
        in printed
    )
    used = {r["config"]: r["calibrated_with_ns"] for r in g["ranking"] if r["calibrated_with_ns"] is not None}
    assert used == {c: float(rt) for c, rt in measured}
    # the reported score is the ranking's score on the configs not measured, and on those only
    runtime = np.load(f)["config_runtime"]
    rest = [r["config"] for r in g["ranking"] if r["config"] not in used]
    expected = graph_metrics(LAYOUT, np.arange(len(rest)), runtime[rest])
    assert g["scores"]["score"] == pytest.approx(expected["score"])
    # calibration moved the ranking away from the uncalibrated one
    assert main(_rank(small, [f], tmp_path / "plain.json")) == 0
    plain = json.loads((tmp_path / "plain.json").read_text())[0]
    assert [r["config"] for r in plain["ranking"]] != [r["config"] for r in g["ranking"]]


def test_the_file_runtimes_of_the_measured_configs_never_enter_the_score(
    small: Paths, tmp_path: Path
) -> None:
    """The same measurements, the file's runtimes of the measured configs made the fastest: the
    ranking and its score do not move (the file's runtimes are only the truth the rest is scored by)."""
    f = _valid(small)
    measured = _measured(f, 10, seed=1)
    m = _write_csv(tmp_path / "m.csv", measured)
    changed = tmp_path / f.name
    with np.load(f) as z:
        arrays = dict(z)
    arrays["config_runtime"] = arrays["config_runtime"].copy()
    arrays["config_runtime"][[c for c, _ in measured]] = 1
    np.savez(changed, **arrays)
    docs = []
    for i, file in enumerate((f, changed)):
        assert main(_rank(small, [file], tmp_path / f"r{i}.json", "--measured", str(m))) == 0
        docs.append(json.loads((tmp_path / f"r{i}.json").read_text())[0])
    assert [r["config"] for r in docs[0]["ranking"]] == [r["config"] for r in docs[1]["ranking"]]
    assert docs[0]["scores"] == docs[1]["scores"] and docs[0]["scored"] == docs[0]["configs"] - 10


def _failed_pb(path: Path) -> Path:
    """A layout protobuf of three runs: 0 and 1 measured, 2 failed (an error)."""
    m = ModuleTuningData.FromString(layout_pb(path).read_bytes())
    for runtime, error in ((120, False), (0, True)):
        run = m.runs.add()
        run.CopyFrom(m.runs[0])
        run.is_default, run.error = False, error
        run.profile.compute_time_ns = runtime
    path.write_bytes(m.SerializeToString())
    return path


BAD = {
    "a config the file lacks": ([(0, 100), (99, 5)], "line 3: config 99 is not a config of"),
    "a negative runtime": ([(0, 100), (1, -5)], "line 3: runtime_ns -5 is not positive"),
    "a NaN runtime": ([(0, "nan")], "line 2: runtime_ns nan is not a finite number"),
    "a duplicate index": ([(1, 100), (1, 120)], "line 3: config 1 measured twice (also line 2)"),
    "a runtime for a config that failed": ([(2, 100)], "line 2: config 2 failed in"),
    "a config that is no index": ([("x", 100)], "line 2: config 'x' is not an integer index"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_measurements_stop_in_one_line_and_write_nothing(
    small: Paths, case: str, tmp_path: Path, capsys
) -> None:
    pb = _failed_pb(tmp_path / "m.pb")
    rows, message = BAD[case]
    m = _write_csv(tmp_path / "measured.csv", rows)
    before = snapshot(tmp_path)
    assert main(_rank(small, [pb], tmp_path / "r.csv", "--measured", str(m))) == 1
    line = one_error(capsys, "rank")
    assert f"{m}: " in line and message in line, line
    assert snapshot(tmp_path) == before  # no ranking written, the user's files as they were


def test_a_wrong_header_and_two_files_are_refused(small: Paths, tmp_path: Path, capsys) -> None:
    pb = _failed_pb(tmp_path / "m.pb")
    m = _write_csv(tmp_path / "m.csv", [(0, 100)], header="index,ns")
    assert main(_rank(small, [pb], tmp_path / "r.csv", "--measured", str(m))) == 1
    assert "header 'index,ns', expected config,runtime_ns or graph,config,runtime_ns" in one_error(
        capsys, "rank"
    )
    m = _write_csv(tmp_path / "m.csv", [(0, 100)])
    other = layout_pb(tmp_path / "other.pb")
    assert main(_rank(small, [pb, other], tmp_path / "r.csv", "--measured", str(m))) == 1
    assert "measured runtimes belong to one file" in one_error(capsys, "rank")
    assert not (tmp_path / "r.csv").exists()


def test_models_without_training_rows_calibrate_and_say_so_in_one_line(
    small: Paths, tmp_path: Path, capsys
) -> None:
    old = copy_tree(small, tmp_path / "old")
    (old.model_dir("lgbm", LAYOUT) / TRAIN_ROWS_FILE).unlink()
    f = _valid(small)
    m = _write_csv(tmp_path / "m.csv", _measured(f, 12))
    argv = ["rank", str(f), "--models", str(old.out), "--collection", LAYOUT, "--measured", str(m)]
    assert main([*argv, "--out", str(tmp_path / "r.json")]) == 0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if "train_rows.npz" in ln]
    assert len(notes) == 1 and "absent (models trained before training rows were kept)" in notes[0]
    assert json.loads((tmp_path / "r.json").read_text())[0]["calibrated_on"] == 12


def test_training_writes_bounded_training_rows_with_the_models_features(small: Paths) -> None:
    for c in TWO_COLLECTIONS:
        folder = small.model_dir("lgbm", c)
        rows = load_rows(folder / TRAIN_ROWS_FILE)
        assert rows is not None and rows.features == json.loads((folder / "features.json").read_text())
        assert 0 < rows.rows <= 20_000 and rows.x.dtype == np.float32 and int(rows.sizes.sum()) == rows.rows


def test_the_tuner_proposes_the_best_unmeasured_learns_and_repeats_for_a_seed(small: Paths) -> None:
    f = _valid(small)
    runtime = np.load(f)["config_runtime"]
    rounds = []
    for _ in range(2):
        with Tuner.load(small.out, how=Calibration(seed=3)) as tuner:
            tuning = tuner.start(f, collection=LAYOUT)
            first = tuning.propose(6)
            assert first == tuning.ranking().order[:6].tolist()  # nothing measured: the model's top
            tuning.observe(first, runtime[first].tolist())
            second = tuning.propose(6)
            assert not set(first) & set(second) and len(second) == 6
            assert tuning.best() == (min(first, key=lambda c: (runtime[c], c)), float(runtime[first].min()))
            rounds.append((first, second, tuning.ranking().cost.tolist()))
    assert rounds[0] == rounds[1]  # the same seed: the same proposals and costs


def test_the_tuner_refuses_bad_observations_and_never_proposes_a_failed_config(small: Paths) -> None:
    f = _valid(small)
    with Tuner.load(small.out) as tuner:
        tuning = tuner.start(f, collection=LAYOUT)
        top = tuning.propose(3)
        for configs, runtimes, message in (
            ([top[0]], [math.nan], "not a positive number"),
            ([top[0]], [-1.0], "not a positive number"),
            ([top[0], top[0]], [1.0, 2.0], "observed twice"),
            ([10_000], [1.0], "config 10000 is not a candidate"),
            ([top[0]], [1.0, 2.0], "1 configs but 2 runtimes"),
        ):
            with pytest.raises(TpurankError, match=message):
                tuning.observe(configs, runtimes)
        assert tuning.measured == {}  # a refused observation records nothing
        tuning.observe([top[0]], [math.inf])
        assert top[0] not in tuning.propose(len(tuning.program.candidates.file_index))
        assert tuning.best() is None
        mixed = tuning.propose(6, explore=0.5)  # 3 of the best, 3 drawn from the rest (seeded)
        assert mixed[:3] == tuning.propose(3) and mixed == tuning.propose(6, explore=0.5)
        assert not set(mixed[3:]) & set(tuning.propose(3)) and len(set(mixed)) == 6
        with pytest.raises(TpurankError, match="explore must be in 0..1"):
            tuning.propose(6, explore=1.5)


def test_tune_replays_the_loop_and_prints_its_table(small: Paths, tmp_path: Path, capsys) -> None:
    f = _valid(small)
    argv = [
        "tune",
        str(f),
        "--models",
        str(small.out),
        "--collection",
        LAYOUT,
        "--rounds",
        "3",
        "--per-round",
        "4",
    ]
    assert main([*argv, "--out", str(tmp_path / "t.json")]) == 0
    out = capsys.readouterr().out
    assert "| measured | loop: best found / true best | random search (expected) |" in out
    assert "measurements to come within 0.5% of the best: loop" in out
    doc = json.loads((tmp_path / "t.json").read_text())[0]
    assert [r["measured"] for r in doc["rounds"]] == [4, 8, 12]
    assert all(r["tuner"] >= 1 and r["random"] >= 1 and r["model"] >= 1 for r in doc["rounds"])
    assert doc["rounds"][0]["tuner"] == doc["rounds"][0]["model"]  # round one: the model's own top 4
    assert doc["configs"] == len(np.load(f)["config_runtime"])


def test_the_models_dataset_ships_the_training_rows_and_rank_calibrates_from_it(
    small: Paths, tmp_path: Path, capsys
) -> None:
    """A models dataset needs all five collections: the small tree's two, and its layout models
    standing in for the three others."""
    from tpurank.core.collections import COLLECTIONS

    paths = copy_tree(small, tmp_path / "tree")
    for c in COLLECTIONS:
        for model in ("lgbm", "gnn", "ensemble"):
            if not paths.model_dir(model, c).exists():
                shutil.copytree(paths.model_dir(model, LAYOUT), paths.model_dir(model, c))
    dest = tmp_path / "dataset"
    argv = ["build-models-dataset", "--out-dir", str(paths.out), "--dest", str(dest), "--allow-synthetic"]
    assert main([*argv, "--kaggle-user", "someone"]) == 0
    manifest = json.loads((dest / "tpurank-models.json").read_text())
    assert {f"models/lgbm/{c.replace(':', '-')}/{TRAIN_ROWS_FILE}" for c in TWO_COLLECTIONS} <= set(
        manifest["files"]
    )
    assert "training rows for calibration: 5 LightGBM models" in capsys.readouterr().out
    f = _valid(small)
    m = _write_csv(tmp_path / "m.csv", _measured(f, 12))
    argv = ["rank", str(f), "--models", str(dest), "--collection", LAYOUT, "--measured", str(m)]
    assert main([*argv, "--out", str(tmp_path / "r.json")]) == 0
    assert "train_rows.npz" not in capsys.readouterr().err
    assert json.loads((tmp_path / "r.json").read_text())[0]["calibrated_on"] == 12


def test_a_failed_run_of_the_real_layout_protobuf_is_refused(small: Paths, tmp_path: Path, capsys) -> None:
    pb = SAMPLE_ROOT / "pb" / "module_tuning_data_layout.pb"
    if not pb.is_file():
        pytest.skip(f"real protobuf not found at {pb} (../shared is absent on a fresh clone)")
    failed = next(i for i, r in enumerate(ModuleTuningData.FromString(pb.read_bytes()).runs) if r.error)
    m = _write_csv(tmp_path / "m.csv", [(failed, 1000)])
    assert main(_rank(small, [pb], tmp_path / "r.csv", "--measured", str(m))) == 1
    assert f"config {failed} failed in {pb}" in one_error(capsys, "rank")


def test_the_ensemble_ranks_by_the_calibrated_lightgbm_or_its_kept_weights(small: Paths) -> None:
    from tpurank.models.ensemble import combine

    f = _valid(small)
    runtime = np.load(f)["config_runtime"]
    measured = dict(_measured(f, 12))
    with Tuner.load(small.out) as tuner:
        program = tuner.programs(f, collection=LAYOUT)[0]
    positions = np.array(sorted(measured))  # an npz's configs: its positions are its indices
    lgbm = program.lgbm.calibrated(positions, runtime[positions].astype(float), Calibration())
    assert lgbm is not None and not np.array_equal(lgbm, program.costs["lgbm"])
    untuned = Calibration(
        gnn=None, select=False
    )  # the GNN as trained (tests/tune/test_finetune.py fine-tunes it)
    alone = program.costs_with(positions, runtime[positions].astype(float), untuned)
    np.testing.assert_array_equal(alone, lgbm)
    kept = program.costs_with(
        positions, runtime[positions].astype(float), Calibration(ensemble="kept", gnn=None, select=False)
    )
    w = program.weights
    members = [lgbm if m == "lgbm" else program.costs[m] for m in w["members"]]
    np.testing.assert_allclose(kept, combine(members, np.asarray(w["weights"]), w["normalize"]), rtol=1e-6)
    one = program.costs_with(positions[:1], runtime[positions[:1]].astype(float))
    np.testing.assert_array_equal(one, program.costs["ensemble"])  # one config: nothing to learn


def test_every_config_measured_and_more_rounds_than_configs_say_so_in_one_line(
    small: Paths, tmp_path: Path, capsys
) -> None:
    f = _valid(small)
    runtime = np.load(f)["config_runtime"]
    every = _write_csv(tmp_path / "m.csv", [(i, int(r)) for i, r in enumerate(runtime)])
    assert main(_rank(small, [f], tmp_path / "r.json", "--measured", str(every))) == 0
    best = int(np.argmin(runtime))
    err = capsys.readouterr().err
    assert f"every config is measured: nothing left to rank; the fastest is config {best}" in err
    argv = ["tune", str(f), "--models", str(small.out), "--collection", LAYOUT, "--model", "lgbm"]
    assert main([*argv, "--rounds", "20", "--per-round", "12", "--out", str(tmp_path / "t.json")]) == 0
    err = capsys.readouterr().err
    line = f"20 rounds of 12 ask for more measurements than its {len(runtime)} configs with a runtime"
    assert line in err and "the loop ends when all are measured" in err
    rounds = json.loads((tmp_path / "t.json").read_text())[0]["rounds"]
    assert rounds[-1]["measured"] == len(runtime) and len(rounds) == -(-len(runtime) // 12) > 2
