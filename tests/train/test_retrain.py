"""A retrain never loses the finished model; corrupt or foreign models are one line; each trained
model ends with one line."""

from __future__ import annotations

import errno
import json
import signal
import time
from pathlib import Path

import pytest
from helpers import ROOT, TRAIN_LOG, TRAINED_COLLECTION, TRAINED_SMALL, common, fake_clock, snapshot
from runners import Forked, forked

from tpurank.cli import main
from tpurank.core.errors import DiskFullError
from tpurank.core.paths import Paths

COLLECTION = TRAINED_COLLECTION
SMALL = [arg for item in TRAINED_SMALL for arg in ("--set", item)]
# seconds of training for a retrain with another config: enough to interrupt it once it has written
# its first resume state; its resumed run spends them on a fake clock (helpers.fake_clock)
RETRAIN_S = 3
# that config, validating (and so writing last.pt) every 2 steps, its step cap out of reach
OTHER = [*SMALL, "--set", "gnn.hidden=8", "--set", "gnn.max_steps=100000", "--set", "gnn.eval_every=2"]
OTHER += ["--set", f"gnn.time_budget_min={RETRAIN_S / 60}", "--set", "gnn.patience=1000000"]


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGKILL])
def test_an_interrupted_retrain_leaves_the_finished_model_and_resumes(
    trained: Paths, sig: int, capsys: pytest.CaptureFixture, monkeypatch: pytest.MonkeyPatch, one_thread
) -> None:
    """Interrupted as a process (Ctrl-C, or killed), the retrain leaves the finished model and its
    predictions as they were; run again (here in this process), it resumes from its own state and
    stops when its time is up (on a clock of half a second a step: it need not wait that out)."""
    final = trained.model_dir("gnn", COLLECTION)
    staging = final.with_name(".next-" + final.name)
    before, preds = snapshot(final), trained.prediction_file("gnn", "valid").read_bytes()
    args = ["train", "--model", "gnn", "--collections", COLLECTION, *common(trained), *OTHER]
    proc = Forked(*args, cwd=ROOT)  # a process of its own, started in milliseconds
    deadline = time.monotonic() + 120
    while not (staging / "last.pt").exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert proc.poll() is None, proc.communicate()
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode != 0 and "Traceback" not in err, err
    assert snapshot(final) == before  # byte for byte, model.pt included
    assert trained.prediction_file("gnn", "valid").read_bytes() == preds
    assert (staging / "last.pt").is_file()  # the retrain's own state, for its resume
    capsys.readouterr()
    fake_clock(monkeypatch, step_s=0.5, validation_s=0.1)
    assert main(args) == 0
    done = capsys.readouterr()
    assert "resuming after step" in done.out + done.err
    assert snapshot(final) != before and not staging.exists()
    line = [ln for ln in done.err.splitlines() if ln.startswith(f"[gnn {COLLECTION}] ")]
    assert len(line) == 1 and "stopped: time budget; best " in line[0], done.err[-2000:]


def test_a_full_disk_during_training_is_one_line_and_keeps_the_model(
    trained: Paths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    from tpurank.gnn.training import loop

    final = trained.model_dir("gnn", COLLECTION)
    before = snapshot(final)
    calls = []

    def full(path: Path, state: dict) -> None:
        calls.append(path)
        if len(calls) > 1:
            raise DiskFullError(path)

    monkeypatch.setattr(loop, "save_checkpoint", full)
    capsys.readouterr()
    rc = main(["train", "--model", "gnn", "--collections", COLLECTION, *common(trained), *OTHER])
    err = capsys.readouterr().err
    assert rc == 1 and "Traceback" not in err
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(lines) == 1 and "no space left" in lines[0].lower(), err
    assert snapshot(final) == before
    assert not final.with_name(".next-" + final.name).exists()  # its half-trained state is gone


def test_a_failed_lgbm_retrain_removes_its_staging_folder(
    trained: Paths, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A full disk once model.txt is written (features.json fails, raw OSError): one line, the
    finished model byte for byte, no hidden folder left beside it; with space, the rerun retrains."""
    from tpurank.lgbm import saved

    final = trained.model_dir("lgbm", COLLECTION)
    before = snapshot(final)

    def full(path: Path, obj: object) -> None:
        Path(path).with_name(".features.json.tmp").write_text("[")  # half a file, then the error
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(saved, "write_json", full)
    args = ["train", "--model", "lgbm", "--collections", COLLECTION, *common(trained), *SMALL]
    capsys.readouterr()
    assert main([*args, "--set", "lgbm.num_leaves=7"]) == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ": error: " in ln]
    assert len(lines) == 1 and "Traceback" not in err and "No space left" in lines[0], err
    assert snapshot(final) == before
    assert sorted(f.name for f in final.parent.iterdir()) == [".tpurank.lock", final.name]
    monkeypatch.undo()
    assert main([*args, "--set", "lgbm.num_leaves=7"]) == 0
    assert snapshot(final)["model.txt"] != before["model.txt"]
    assert sorted(f.name for f in final.parent.iterdir()) == [".tpurank.lock", final.name]


def _predict_error(paths: Paths, model: str) -> str:
    """predict in a child process (a native crash would kill pytest itself): its one error line."""
    r = forked(
        *["predict", "--model", model, "--split", "valid", "--force", "--collections", COLLECTION],
        *common(paths),
        cwd=ROOT,
        timeout=300,
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])
    return r.stderr


# a truncated lgbm model.txt, a gnn model of another collection and an ensemble weights.json `{}`:
# one line saying so, in test_hostile.py (its cases with `says`)


@pytest.mark.parametrize(
    "text",
    ["{not json", '{"members": ["lgbm"], "weights": [1e999], "normalize": "rank"}'],  # {}: hostile
)
def test_a_broken_ensemble_weights_file_is_one_line(trained: Paths, text: str) -> None:
    wfile = trained.model_dir("ensemble", COLLECTION) / "weights.json"  # fitted on lgbm and gnn
    assert json.loads(wfile.read_text())["members"] == ["lgbm", "gnn"]
    wfile.write_text(text)
    assert str(wfile) in _predict_error(trained, "ensemble")


def test_each_trained_model_ends_with_one_line(trained: Paths) -> None:
    """The trained tree's stderr of `train --model gnn` then `train --model lgbm` (TRAINED_SMALL)."""
    err = (trained.data.parent / TRAIN_LOG).read_text()
    gnn = [ln for ln in err.splitlines() if ln.startswith(f"[gnn {COLLECTION}] ")]
    assert len(gnn) == 1 and "6 steps in " in gnn[0] and "stopped: max_steps; best " in gnn[0], err
    assert json.loads((trained.model_dir("lgbm", COLLECTION) / "provenance.json").read_text())["model_digest"]


def test_a_swap_killed_between_its_renames_is_recovered(tmp_path: Path) -> None:
    from tpurank.train.staging import OLD_PREFIX, recover, staged

    paths = Paths(tmp_path / "data", tmp_path / "out")
    final = paths.model_dir("lgbm", COLLECTION)
    final.mkdir(parents=True)
    (final / "model.txt").write_text("finished")
    with staged(paths, "lgbm", COLLECTION) as p:
        staging = p.model_dir("lgbm", COLLECTION)
        assert (staging / "model.txt").read_text() == "finished"  # a link to the finished file
        (staging / "model.txt.tmp").write_text("retrained")
        (staging / "model.txt.tmp").rename(staging / "model.txt")
        assert (final / "model.txt").read_text() == "finished"
    assert (final / "model.txt").read_text() == "retrained" and not staging.exists()
    final.rename(final.with_name(OLD_PREFIX + final.name))  # killed after the first rename
    recover(final)
    assert (final / "model.txt").read_text() == "retrained"
