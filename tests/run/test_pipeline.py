"""The ensemble and `tpurank all` end to end on tiny data (the Kaggle notebooks: test_kaggle_notebooks).

One clean `all` is built once per session (shared by the xdist workers); each test works on a copy
of it, and the checks that need a run of their own share one where they can (the run on changed
data is also the one killed while training). The tests that run `all` again do it on a tree of two
collections (helpers.two_collection_all, shared with test_declarations.py): the same code paths at
less than half the cost.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
from helpers import (
    FAST,
    ROOT,
    TWO_COLLECTIONS,
    clean_all_tree,
    copy_without_times,
    ran_steps,
    two_collection_all,
    validation_table,
)
from runners import Forked, in_process

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.models.ensemble import collection_score, normalize, train, valid_truth, weight_grid
from tpurank.models.predictions import save_predictions
from tpurank.prepare.cache import INDEX_FILE


def test_weight_grid_covers_the_simplex() -> None:
    g = weight_grid(3, 0.5)
    assert sorted(map(tuple, g.tolist())) == sorted(
        [(1, 0, 0), (0, 1, 0), (0, 0, 1), (0.5, 0.5, 0), (0.5, 0, 0.5), (0, 0.5, 0.5)]
    )
    assert np.allclose(weight_grid(2).sum(axis=1), 1) and len(weight_grid(2)) == 11


def test_normalize() -> None:
    np.testing.assert_allclose(normalize(np.array([10.0, 30.0, 20.0]), "rank"), [0, 1, 0.5])
    z = normalize(np.array([1.0, 2.0, 3.0]), "zscore")
    assert abs(z.mean()) < 1e-12 and abs(z.std() - 1) < 1e-12
    assert (normalize(np.array([4.0, 4.0]), "zscore") == 0).all()


def test_ensemble_never_worse_than_the_worse_member(tiny_paths: Paths) -> None:
    """Two members of different quality: a noisy truth and a random ranking, fitted on valid."""
    rng = np.random.default_rng(0)
    cfg = Config()
    cfg.ensemble.models = ["noisy", "rand"]
    for collection in COLLECTIONS:
        truth = valid_truth(tiny_paths, collection)
        assert truth, f"tiny data has no {collection} valid graphs"
        noisy = {g: np.log(rt + 1) + rng.normal(0, 0.05, len(rt)) for g, rt in truth.items()}
        rand = {g: rng.random(len(rt)) for g, rt in truth.items()}
        for name, preds in (("noisy", noisy), ("rand", rand)):
            save_predictions(tiny_paths.prediction_file(name, "valid"), preds)
        train(tiny_paths, cfg, collection)
        rec = json.loads((tiny_paths.model_dir("ensemble", collection) / "weights.json").read_text())
        singles = [collection_score(collection, p, truth) for p in (noisy, rand)]
        assert rec["valid_score"] >= min(singles) - 1e-12
        assert rec["valid_score"] >= max(singles) - 1e-12  # the grid holds each member alone
        assert rec["member_valid_scores"]["noisy"] == pytest.approx(singles[0])


def test_all_trains_the_ensemble_members_and_what_is_asked(tmp_path: Path) -> None:
    from tpurank.core.errors import TpurankError
    from tpurank.run.pipeline import models_to_train, plan

    assert models_to_train(["lgbm", "gnn"], []) == ["lgbm", "gnn"]
    assert models_to_train(["gnn", "lgbm"], ["baseline"]) == ["lgbm", "gnn", "baseline"]
    assert models_to_train(["gnn"], []) == ["gnn"]
    with pytest.raises(TpurankError, match="unknown model"):
        models_to_train(["xgb"], [])
    names = [str(s.name) for s in plan(["gnn"], 1)]
    assert "train gnn" in names and "features" not in names and "train baseline" not in names


class CleanRun(NamedTuple):
    """A clean `all` on a private copy of the tiny data: its data root, out folder, and output."""

    data: Path
    out: Path
    stdout: str
    stderr: str


@pytest.fixture(scope="module")
def clean_all(tiny_root: Path, tmp_path_factory: pytest.TempPathFactory) -> CleanRun:
    """One clean `all` on the tiny data, built by the first worker that asks; read-only."""
    folder = clean_all_tree(tmp_path_factory, tiny_root)
    return CleanRun(
        folder / "data",
        folder / "run",
        (folder / "stdout.txt").read_text(),
        (folder / "stderr.txt").read_text(),
    )


@pytest.fixture(scope="module")
def small_all(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """A clean `all --collections TWO_COLLECTIONS` on a data root of just those; read-only."""
    return two_collection_all(tmp_path_factory)


# `all` on the two-collection tree (its sample submission lists only those collections)
TWO = ["--collections", *TWO_COLLECTIONS]


def test_all_end_to_end_on_tiny(clean_all: CleanRun) -> None:
    data, out, r = clean_all.data, clean_all.out, clean_all
    sub = out / "submissions" / "submission.csv"
    assert sub.exists() and (out / "submissions" / "submission.json").exists()
    check = in_process("check-submission", str(sub), "--data-dir", str(data))
    assert check.returncode == 0, check.stdout + check.stderr
    ids = [line.split(",")[0] for line in sub.read_text().splitlines()[1:]]
    sample = [line.split(",")[0] for line in (data / "sample_submission.csv").read_text().splitlines()[1:]]
    assert ids == sample
    for m in ("random", "heuristic", "lgbm", "gnn", "ensemble"):
        assert (out / "submissions" / f"valid_{m}.csv").exists(), m
    # baseline is not an ensemble member: trained only when asked (--models baseline)
    assert not (out / "models" / "baseline").exists() and "[all] models: lgbm gnn" in r.stderr
    assert (out / "reports" / "validation.md").exists()
    assert "Validation scores" in r.stdout and "time per step" in r.stdout


def test_commands_by_hand_find_the_synthetic_data_all_used(
    clean_all: CleanRun, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """After `all` on synthetic data in data/synthetic-<scale>/ (where `all` puts it), the commands a
    user runs next without --data-dir use it and say so in one line (run in-process: the data root
    is resolved from $TPURANK_HOME and the working folder at each call)."""
    from tpurank.cli import main

    home = tmp_path / "project"
    shutil.copytree(clean_all.out, home)  # the outputs of `all`, in the project root
    shutil.copytree(clean_all.data, home / "data" / "synthetic-tiny")
    (home / "data" / ".last-data-root").write_text("synthetic-tiny\n")  # as `all` records it
    monkeypatch.delenv("TPURANK_DATA", raising=False)
    monkeypatch.setenv("TPURANK_HOME", str(home))
    monkeypatch.chdir(home)
    line = "tpurank: data: data/synthetic-tiny (synthetic 'tiny', the data the last `tpurank all` used; "
    capsys.readouterr()
    assert main(["check-submission", "submissions/submission.csv"]) == 0
    recorded = [x for x in capsys.readouterr().err.splitlines() if x.startswith("tpurank: data: ")]
    suffix = " (recorded with submission.csv; --data-dir DIR to check against another)"
    assert len(recorded) == 1 and recorded[0].endswith(suffix), recorded  # the data `all` wrote it for
    assert (
        Path(recorded[0].removeprefix("tpurank: data: ").removesuffix(suffix)).resolve()
        == clean_all.data.resolve()
    )
    for cmd in (
        ["check"],
        ["score", "--submission", "submissions/valid_ensemble.csv"],
        ["validate"],
        ["config", "show"],
    ):
        capsys.readouterr()
        rc = main(cmd)
        r = capsys.readouterr()
        assert rc == 0, r.err[-2000:]
        assert [x for x in r.err.splitlines() if x.startswith("tpurank: data: ")] == [
            line + "--data-dir DIR to use another)"
        ], r.err[-2000:]
    assert f"`{home / 'data' / 'synthetic-tiny'}`" in (home / "reports" / "validation.md").read_text()
    # config show read the same data, so it shows the demo preset that `all` trained with
    steps = next(x for x in r.out.splitlines() if x.startswith("gnn.max_steps "))
    assert "preset demo.toml" in steps
    monkeypatch.chdir(ROOT)
    assert main(["runs"]) == 0
    runs = capsys.readouterr()
    assert "synthetic" in runs.out, runs.err[-2000:]


def here(capsys: pytest.CaptureFixture, *args: str) -> subprocess.CompletedProcess:
    """`tpurank ARGS` in this process (a child costs seconds of imports): its exit code and output."""
    from tpurank.cli import main

    capsys.readouterr()
    rc = main(list(args))
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, rc, captured.out, captured.err)


def _kill_while_training(args: list[str], out: Path) -> None:
    """Start `tpurank ARGS` (an `all` into `out`) in a process of its own (forked: the imports are
    there) and SIGKILL it once the GNN's first resume state is written."""
    proc = Forked(*args, cwd=ROOT)
    deadline = time.monotonic() + 300
    while not list((out / "models/gnn").glob(".next-*/last.pt")) and time.monotonic() < deadline:
        assert proc.poll() is None, "all ended before the GNN trained"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_all_follows_the_data_content_and_a_killed_all_resumes(
    small_all: Paths, tmp_path: Path, capsys
) -> None:
    """The same bytes with new timestamps reuse every step; a test file rewritten under its own
    name (configs reordered) reruns what depends on it. A fresh `all` on the changed data, SIGKILLed
    while the GNN trains and run again, keeps its finished steps; both runs end byte for byte alike
    (and unlike the clean run on the old data)."""
    clean = small_all.out
    data, out = tmp_path / "data", tmp_path / "run"
    copy_without_times(small_all.data, data)
    shutil.copytree(clean, out)
    run = ["--data-dir", str(data), "--out-dir", str(out), *TWO]
    r = here(capsys, "all", *run, *FAST)
    assert r.returncode == 0 and r.stderr.count("up to date, skipped") == 14, r.stderr[-3000:]
    assert ": tpurank " not in r.stderr  # nothing ran, training least of all

    f = sorted((data / NPZ_SUBDIR / "layout/nlp/random/test").glob("*.npz"))[0]
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    order = np.arange(len(arrays["config_runtime"]))[::-1]
    arrays["node_config_feat"], arrays["config_runtime"] = (
        arrays["node_config_feat"][order],
        arrays["config_runtime"][order],
    )
    np.savez(f, **arrays)
    r = here(capsys, "all", *run, *FAST)
    assert r.returncode == 0, r.stderr[-3000:]
    assert {"prepare", "predict gnn test", "predict lgbm test", "predict ensemble test"} <= ran_steps(
        r.stderr
    )

    fresh = tmp_path / "fresh"
    cmd = ["all", "--data-dir", str(data), "--out-dir", str(fresh), *TWO, *FAST]
    _kill_while_training(cmd, fresh)
    assert not (fresh / "submissions/submission.csv").exists()
    r = here(capsys, *cmd)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "[all] prepare: up to date, skipped" in r.stderr
    sub = "submissions/submission.csv"
    assert (out / sub).read_bytes() == (fresh / sub).read_bytes() != (clean / sub).read_bytes()
    assert validation_table(out) == validation_table(fresh)


def test_infer_on_a_copy_of_the_data_keeps_the_models_rule(
    clean_all: CleanRun, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Kaggle's /kaggle/input is a copy without timestamps, and may lack the train files: infer uses
    the feature rule shipped with the models as it is (never refits it), writes its cache under
    --work-dir, and submits what `all` submitted (in-process: the notebooks test runs it as Kaggle does)."""
    from tpurank.cli import main

    clean = clean_all.out
    pack = tmp_path / "models-dataset"
    rc = main(
        [
            "build-models-dataset",
            "--dest",
            str(pack),
            "--out-dir",
            str(clean),
            "--allow-synthetic",  # the tiny data is synthetic: refused without it
        ]
    )
    assert rc == 0, capsys.readouterr().err[-2000:]
    data = tmp_path / "input"
    copy_without_times(clean_all.data, data)
    shutil.rmtree(data / NPZ_SUBDIR / "layout/xla/random/train")  # a rule refitted would differ
    out, work = tmp_path / "working", tmp_path / "temp"
    capsys.readouterr()
    rc = main(
        [
            "infer",
            "--models-dataset",
            str(pack),
            "--data-dir",
            str(data),
            "--out-dir",
            str(out),
            "--work-dir",
            str(work),
        ]
    )
    err = capsys.readouterr().err
    assert rc == 0, err[-3000:]
    assert "fit feature rule" not in err
    rule = "features/prepared/node_feature_rule.json"
    assert (work / rule).read_bytes() == (clean / rule).read_bytes()
    assert (work / "features/prepared" / INDEX_FILE).is_file() and not (out / "features").exists()
    sub = "submissions/submission.csv"
    assert (out / sub).read_bytes() == (clean / sub).read_bytes()
    # the same models dataset serves `rank`: a test graph ranked as `all` predicted it
    from tpurank.models.predictions import load_predictions
    from tpurank.rank import Ranker

    f = sorted((clean_all.data / NPZ_SUBDIR / "tile/xla/test").glob("*.npz"))[0]
    with Ranker.load(pack, tmp_path / "rank-work") as ranker:
        (ranked,) = ranker.rank(f)
    costs = load_predictions(clean / "predictions/ensemble/test.npz")[f"tile:xla:{f.stem}"]
    assert ranked.cost.tolist() == sorted(costs.tolist()) and len(ranked.order) == len(costs)


def test_all_releases_memory_after_every_step(monkeypatch: pytest.MonkeyPatch) -> None:
    """`all` runs its steps in one process: after each one it ran (not after a skipped one), the
    decoded-chunk cache is emptied and the heap released before the next starts."""
    from types import SimpleNamespace

    from tpurank.run import pipeline
    from tpurank.run.steps import StepName

    calls: list[str] = []

    class Run:
        def __init__(self, module: object, namespace: object) -> None:
            self.command = namespace

        def up_to_date(self) -> bool:
            return self.command == "predict"

        def why(self) -> str:
            return pipeline.NEVER_RAN

    monkeypatch.setattr(pipeline, "StageRun", Run)
    monkeypatch.setattr(pipeline, "step_namespace", lambda command, *rest: command)
    monkeypatch.setattr(pipeline, "guarded", lambda command, run: calls.append(command) or 0)
    monkeypatch.setattr(pipeline, "progress_line", lambda *a: "")
    monkeypatch.setattr(pipeline, "command_line", lambda options: "")
    monkeypatch.setattr(pipeline, "clear_chunk_cache", lambda: calls.append("clear"))
    monkeypatch.setattr(pipeline, "release_between_steps", lambda: calls.append("release") or True)
    steps = [
        SimpleNamespace(name=StepName(*name.split()), options=SimpleNamespace(COMMAND=name.split()[0]))
        for name in ("prepare", "predict lgbm valid", "features")
    ]
    budget = SimpleNamespace(config=lambda: None, final=True, seconds=60.0)
    pipeline.run_steps(steps, Paths(data=Path("d"), out=Path("o")), budget, force=False, t0=0.0)
    assert calls == ["prepare", "clear", "release", "features", "clear", "release"]
