"""The training schedule follows the budget; early stopping cannot fire before a minimum share of
it; the best checkpoint is what predict loads; metrics.csv has a row per validation (and rows of
training loss between them: tests/report/test_curves.py)."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest
from helpers import fake_clock

from tpurank.core.config import Config
from tpurank.core.config_build import from_dict
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.gnn.data import eval_configs, load_split
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.training import loop, pacing, run_log
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_model
from tpurank.gnn.training.collection import train_collection
from tpurank.gnn.training.lr_schedule import lr_factor

COLLECTION = "layout:xla:random"


def small_cfg(**gnn: object) -> Config:
    return from_dict(
        {"gnn": {"hidden": 16, "layers": 2, "opcode_dim": 4, "config_dim": 4, "seeds": 1, **gnn}}
    )


def metrics(paths: Paths, column: str = "valid_score") -> list[dict[str, str]]:
    """The rows of metrics.csv with a `column` (by default the validations: the training-loss rows
    between them have no valid_score)."""
    with open(paths.model_dir("gnn", COLLECTION) / run_log.METRICS) as f:
        return [r for r in csv.DictReader(f) if r[column]]


@pytest.fixture
def graphs(tiny_paths: Paths):
    return load_split(tiny_paths, COLLECTION, "train", False), load_split(
        tiny_paths, COLLECTION, "valid", False
    )


@pytest.mark.parametrize(
    ("step", "share", "expected"), [(0, 0.0, 1.0), (50, 0.0, 0.5), (10, 0.5, 0.5), (10, 1.0, 0.0)]
)
def test_the_cosine_follows_the_larger_share_of_the_budget(step: int, share: float, expected: float) -> None:
    assert lr_factor(step, 100, 0, "cosine", time_share=share) == pytest.approx(
        max(expected, 0.5 * (1 + math.cos(math.pi * step / 100))) if share == 0 else expected, abs=0.02
    )


@pytest.mark.parametrize(
    ("step", "share", "expected"),
    [
        (3, 0.0, 0.4),  # over steps: linear from 1/warmup_steps
        (3, 0.05, 0.5),  # half the warm-up's share (10 of 100 steps) of the time spent: half the rate
        (3, 0.1, 1.0),  # the warm-up's share of the time spent: the peak, whatever the step
        (3, 0.55, 0.5),  # the cosine over the rest of the time: half-way
        (3, 1.0, 0.0),
    ],
)
def test_the_warm_up_follows_the_larger_share_of_the_budget(step: int, share: float, expected: float) -> None:
    assert lr_factor(step, 100, 10, "cosine", time_share=share) == pytest.approx(expected, abs=1e-9)


def test_a_time_budgeted_run_ends_near_a_zero_rate(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 3 s budget at 0.1 s a step with a one-step warm-up: the first validation shows the peak rate,
    the last one a rate near zero: the decay follows the budget's time, not max_steps."""
    fake_clock(monkeypatch, step_s=0.1, validation_s=0.1)
    paths = Paths(tiny_paths.data, tmp_path)
    cfg = small_cfg(max_steps=1_000_000, eval_every=5, time_budget_min=0.05, warmup_steps=1, patience=10**6)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    rows = metrics(paths)
    assert summary["stopped_by"] == "time budget" and len(rows) == summary["evals_run"] >= 3
    assert float(rows[-1]["lr"]) <= 0.05 * cfg.gnn.lr
    assert float(rows[0]["lr"]) > 0.5 * cfg.gnn.lr  # the peak was reached: the decay is the budget's
    assert [int(r["step"]) for r in rows] == sorted(int(r["step"]) for r in rows)


def test_a_time_budget_holds_its_closing_validation(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a clock where a step takes 0.1 s and a validation 1 s, a 3 s budget validating every 5 steps:
    the steps end a validation's length before the budget, so the validation that closes the run
    fits in it (3.0 s; spent after it, the run took 4.1 s)."""
    fake_clock(monkeypatch, step_s=0.1, validation_s=1.0)
    # no estimate before the first validation: what is reserved is the last validation's length
    monkeypatch.setattr(loop, "closing_estimate", lambda work, trained, seconds: 0.0)
    cfg = small_cfg(max_steps=1_000_000, eval_every=5, time_budget_min=0.05, warmup_steps=1, patience=10**6)
    paths = Paths(tiny_paths.data, tmp_path)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    assert summary["stopped_by"] == "time budget" and summary["steps_run"] == 10
    assert summary["seconds"] == pytest.approx(3.0)


@pytest.mark.parametrize(("guess", "steps"), [(0.0, 30), (1.0, 20), (5.0, 1)])
def test_a_run_validated_only_at_its_end_reserves_the_estimate(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, guess: float, steps: int
) -> None:
    """No validation before the end (eval_every past the budget): the steps stop the estimated closing
    validation's length before the 3 s budget (0.1 s a step): with no estimate, at the budget, and the
    1 s validation overruns it; a guess longer than the budget leaves one step."""
    fake_clock(monkeypatch, step_s=0.1, validation_s=1.0)
    monkeypatch.setattr(loop, "closing_estimate", lambda work, trained, seconds: guess)
    cfg = small_cfg(max_steps=1_000_000, eval_every=10**5, time_budget_min=0.05, warmup_steps=1)
    paths = Paths(tiny_paths.data, tmp_path)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    assert summary["stopped_by"] == "time budget" and summary["steps_run"] == steps


def test_a_slow_first_step_leaves_the_closing_estimate_alone(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first step of a process pays one-time costs (16 s here, 1 s the next ones): the rate that
    sizes the closing validation comes from the steps after it, so a 30 s share still trains
    about ten steps instead of stopping after the first."""
    fake_clock(monkeypatch, step_s=1.0, validation_s=1.0, first_step_s=16.0)
    rates = []
    real = loop.closing_estimate

    def recorded(work: int, trained: int, seconds: float) -> float:
        rates.append(seconds)
        return real(work, trained, seconds)

    monkeypatch.setattr(loop, "closing_estimate", recorded)
    cfg = small_cfg(max_steps=1_000_000, eval_every=10**5, time_budget_min=0.5, warmup_steps=1)
    paths = Paths(tiny_paths.data, tmp_path)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    assert summary["stopped_by"] == "time budget" and summary["steps_run"] >= 8
    assert rates[0] == 0.0 and max(rates) < 16.0  # the first step's seconds never entered the rate


def test_the_closing_estimate_counts_the_validation_at_the_training_rate(graphs) -> None:
    """The configs x nodes a validation scores (each graph's unique scored configs times its nodes), at
    the rate training went, times the forward pass's share."""
    _, valid = graphs
    r = gnn_model.SPEC.recipe(small_cfg(eval_max_configs=7), "layout")
    work = pacing.validation_work(valid, r)
    by_hand = sum(
        len(set(g.inverse[eval_configs(g, 7)].tolist())) * len(g.opcode) for g in valid if g.rankable
    )
    assert work == by_hand > 0
    assert pacing.closing_estimate(work, trained=work, seconds=10.0) == pytest.approx(
        10 * pacing.FORWARD_SHARE
    )
    assert pacing.closing_estimate(work, trained=0, seconds=10.0) == 0.0


@pytest.mark.parametrize(
    ("share", "steps", "why"), [(0.0, 2, "patience"), (0.5, 10, "patience"), (1.0, 20, "max_steps")]
)
def test_patience_never_stops_before_the_minimum_share(
    tiny_paths: Paths,
    graphs,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    share: float,
    steps: int,
    why: str,
) -> None:
    """Every validation is worse than the first: patience 1 stops at the first validation past the
    share (validating every step of 20); at share 1 the run spends its budget, and says so."""
    scores = iter(range(1000, 0, -1))
    monkeypatch.setattr(loop, "score_valid", lambda run, valid, losses: float(next(scores)))
    paths = Paths(tiny_paths.data, tmp_path)
    cfg = small_cfg(max_steps=20, eval_every=1, patience=1, min_train_share=share)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    assert summary["steps_run"] == steps
    assert summary["stopped_by"] == why
    assert len(metrics(paths)) == summary["evals_run"] == steps


def test_the_best_checkpoint_is_what_predict_loads(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    scores = iter([0.1, 0.2, 0.9, 0.3, 0.4, 0.5])
    monkeypatch.setattr(loop, "score_valid", lambda run, valid, losses: next(scores))
    paths = Paths(tiny_paths.data, tmp_path)
    cfg = small_cfg(max_steps=12, eval_every=2, patience=100)
    train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    _, ckpt = load_model(gnn_model.SPEC, paths.model_dir("gnn", COLLECTION) / CHECKPOINT, COLLECTION)
    assert ckpt["complete"] and ckpt["step"] == 6 and ckpt["best"] == 0.9
    assert [float(r["valid_score"]) for r in metrics(paths)] == [0.1, 0.2, 0.9, 0.3, 0.4, 0.5]


def test_validate_reads_every_models_metrics_for_its_curves(tmp_path: Path) -> None:
    from tpurank.report.curves import read_curves

    paths = Paths(tmp_path / "data", tmp_path / "out")
    for rel in ("gnn/layout-xla-random", "gnn/layout-xla-random/seed-1", "gnn/.next-tile-xla"):
        (paths.models / rel).mkdir(parents=True)
        run_log.write_metrics(
            paths.models / rel / run_log.METRICS,
            [
                {"step": 5, "elapsed": 1.0, "lr": 1e-3, "train_loss": 0.5, "valid_score": 0.2},
                {"step": 10, "elapsed": 2.0, "lr": 1e-5, "train_loss": 0.4, "valid_score": 0.3},
            ],
        )
    curves = read_curves(paths.models)
    assert list(curves) == ["layout:xla:random"]  # not a retrain in progress
    assert sorted(curves["layout:xla:random"]) == ["gnn", "gnn seed-1"]
    assert curves["layout:xla:random"]["gnn"] == {
        "step": [5.0, 10.0],
        "train_loss": [0.5, 0.4],
        "valid_step": [5.0, 10.0],
        "valid_score": [0.2, 0.3],
    }


def test_tensorboard_gets_the_rows_of_metrics_csv(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    monkeypatch.setenv(run_log.TENSORBOARD_ENV, str(tmp_path / "tb"))
    paths = Paths(tiny_paths.data, tmp_path / "out")
    train_collection(
        gnn_model.SPEC, paths, small_cfg(max_steps=6, eval_every=2), COLLECTION, *graphs, progress=False
    )
    events = EventAccumulator(str(tmp_path / "tb" / "gnn" / "layout-xla-random" / "seed-0"))
    events.Reload()
    steps = {"valid_score": [2, 4, 6], "train_loss": [1, 2, 3, 4, 5, 6], "lr": [1, 2, 3, 4, 5, 6]}
    for tag, column in (("valid/score", "valid_score"), ("train/loss", "train_loss"), ("lr", "lr")):
        got = [(e.step, e.value) for e in events.Scalars(tag)]
        want = [(int(r["step"]), float(r[column])) for r in metrics(paths, column)]
        assert [s for s, _ in got] == [s for s, _ in want] == steps[column], tag
        assert [v for _, v in got] == pytest.approx([v for _, v in want], rel=1e-6), tag  # float32 events


def test_tensorboard_costs_nothing_unset_and_says_what_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(run_log.TENSORBOARD_ENV, raising=False)
    assert run_log.tensorboard("gnn", COLLECTION, "seed-0") is None
    run_log.log_scalars(None, {"step": 1, "lr": 1.0})  # a no-op without a writer
    monkeypatch.setenv(run_log.TENSORBOARD_ENV, "tb")
    monkeypatch.setitem(sys.modules, "torch.utils.tensorboard", None)  # as if the package were absent
    with pytest.raises(TpurankError, match="TPURANK_TENSORBOARD=tb: .*pip install tensorboard"):
        run_log.tensorboard("gnn", COLLECTION, "seed-0")
