"""`all` after commands run by hand: the steps they touched run again, and a collection retrained
by its plan is the clean run's model, whatever the clock says (a trained model is a function of its
data, config, seed and plan: tpurank.train.pace), so the submission bytes are the clean run's."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from helpers import FAST, TWO_COLLECTIONS, ran_steps, two_collection_all, validation_table
from runners import in_process

from tpurank.core.paths import Paths
from tpurank.gnn.training import loop

TWO = ["--collections", *TWO_COLLECTIONS]  # `all` on the two-collection tree


@pytest.fixture(scope="module")
def small_all(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """A clean `all --collections TWO_COLLECTIONS` on a data root of just those; read-only."""
    return two_collection_all(tmp_path_factory)


def _curve(model_dir: Path) -> list[list[str]]:
    """A training's metrics.csv without its seconds: steps, rates, losses and scores."""
    rows = [line.split(",") for line in (model_dir / "metrics.csv").read_text().splitlines()]
    gone = rows[0].index("elapsed")
    return [row[:gone] + row[gone + 1 :] for row in rows]


def test_manual_commands_then_all_equal_a_clean_all(
    small_all: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Retrain one model by hand with other settings and predict with it, then `all`: every step
    the manual commands touched, and those downstream, run again; the rest is skipped; the
    retrain is the clean run's plan again, trained to the same rates, losses and predictions
    though its clock runs far slower than the clean run's (a trained model is a function of its
    data, config, seed and plan), its one line saying the plan differs from the hand-made model's;
    the submission bytes and the validation table are the clean run's."""
    clean = small_all.out
    out = tmp_path / "run"
    shutil.copytree(clean, out)
    run = ["--data-dir", str(small_all.data), "--out-dir", str(out), *TWO]
    again = in_process("all", *run, *FAST)  # a second `all` on an unchanged run skips everything
    assert again.returncode == 0 and again.stderr.count("up to date, skipped") == 14, again.stderr[-3000:]
    assert "tpurank train" not in again.stderr
    other = [*FAST, "--set", "gnn.hidden=8", "--set", "gnn.max_steps=5"]
    one = ["--data-dir", str(small_all.data), "--out-dir", str(out), "--collections", "layout:nlp:random"]
    for cmd in (["train", "--model", "gnn"], ["predict", "--model", "gnn", "--split", "valid"]):
        r = in_process(*cmd, *one, *other)
        assert r.returncode == 0, r.stderr[-2000:]
    # validate has not run yet: the report is the old one
    assert validation_table(out) == validation_table(clean)
    retrained, model = out / "models/gnn/layout-nlp-random", clean / "models/gnn/layout-nlp-random"
    plan = json.loads((model / "model.json").read_text())["plan"]
    cap_s, clock, real_step = plan["time_cap_min"] * 60, SimpleNamespace(now=0.0, steps=0), loop.step_once

    def slow() -> float:
        """The training's clock: each read a 200th of the time cap on (a step reads it about three
        times), a machine ten or twenty times slower than the clean run's, its steps still in the cap."""
        clock.now += cap_s / 200
        return clock.now

    def first_slow(*args, **kwargs):
        """The first step a sixth of the cap long (a process's one-time costs): a rate that followed
        the time spent would be past its warm-up's step then."""
        clock.now += cap_s / 6 if clock.steps == 0 else 0.0
        clock.steps += 1
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "time", SimpleNamespace(perf_counter=slow))
    monkeypatch.setattr(loop, "step_once", first_slow)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the collections trained in this process, on that clock
    r = in_process("all", *run, *FAST)
    assert r.returncode == 0, r.stderr[-3000:]
    ran = ran_steps(r.stderr)
    assert {"train gnn", "predict gnn valid", "predict gnn test"} <= ran
    assert not ran & {"prepare", "features", "train lgbm", "predict lgbm valid"}
    assert _curve(retrained) == _curve(model)
    assert json.loads((retrained / "model.json").read_text())["plan"] == plan and plan["time_cap_min"] > 0
    line = [x for x in r.stderr.splitlines() if x.startswith("[gnn layout:nlp:random] ")]
    assert len(line) == 1 and "; the plan changed (was 5 steps " in line[0], r.stderr[-3000:]
    for f in ("predictions/gnn/valid.npz", "predictions/gnn/test.npz"):
        with np.load(out / f) as mine, np.load(clean / f) as theirs:
            assert mine.files == theirs.files and all(np.array_equal(mine[k], theirs[k]) for k in mine.files)
    sub = "submissions/submission.csv"
    assert (out / sub).read_bytes() == (clean / sub).read_bytes()
    assert validation_table(out) == validation_table(clean)
