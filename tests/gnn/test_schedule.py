"""The training schedule is a function of the planned steps (a time budget only caps them, and the
rate follows time only for a caller without a plan); early stopping cannot fire before a minimum
share of the steps; the best checkpoint is what predict loads; metrics.csv has a row per validation (and rows of
training loss between them: tests/report/test_curves.py)."""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path

import pytest
import torch
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
from tpurank.gnn.training.lr_schedule import lr_factor, make_scheduler

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
def test_without_a_plan_the_cosine_follows_the_larger_share_of_the_budget(
    step: int, share: float, expected: float
) -> None:
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
def test_without_a_plan_the_warm_up_follows_the_larger_share_of_the_budget(
    step: int, share: float, expected: float
) -> None:
    assert lr_factor(step, 100, 10, "cosine", time_share=share) == pytest.approx(expected, abs=1e-9)


def test_a_planned_trainings_rate_is_a_function_of_its_step() -> None:
    """With a time budget in the recipe, the scheduler of a planned training reads no clock: the
    rate at step k is the plan's (warm-up, then the cosine over `max_steps`) and nothing else."""
    r = gnn_model.SPEC.recipe(small_cfg(max_steps=20, warmup_steps=4, time_budget_min=0.01), "layout")
    opt = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=r.lr)
    sched = make_scheduler(opt, r)
    rates = []
    for _ in range(20):
        rates.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert rates == pytest.approx([r.lr * lr_factor(k, 20, 4) for k in range(20)], rel=1e-12)
    assert (
        rates[3] == pytest.approx(r.lr) and rates[-1] < 0.01 * r.lr
    )  # the peak after the warm-up; ~0 at the end


def test_the_same_plan_trains_the_same_model_at_any_speed(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One plan (12 steps, a 4-step warm-up, a one-minute cap it never reaches) trained on a fast
    clock and on one a hundred times slower whose first step takes a third of the cap (a process's
    one-time costs): the same rates, losses and weights, to the bit. A rate that followed the time
    spent would have reached its peak after that first step."""
    cfg = small_cfg(max_steps=12, eval_every=4, warmup_steps=4, time_budget_min=1.0, patience=100)
    runs = []
    for step_s, first_s in ((0.01, 0.01), (1.0, 20.0)):
        fake_clock(monkeypatch, step_s=step_s, validation_s=step_s, first_step_s=first_s)
        paths = Paths(tiny_paths.data, tmp_path / str(step_s))
        summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
        assert summary["stopped_by"] == "max_steps" and summary["steps_run"] == 12
        _, ckpt = load_model(gnn_model.SPEC, paths.model_dir("gnn", COLLECTION) / CHECKPOINT, COLLECTION)
        curve = [(r["step"], r["lr"], r["train_loss"]) for r in metrics(paths, "step")]
        runs.append((curve, ckpt["state_dict"], summary["plan"]))
    (fast, fast_w, plan), (slow, slow_w, slow_plan) = runs
    assert fast == slow and plan == slow_plan == {
        "steps": 12,
        "warmup_steps": 4,
        "schedule": "cosine",
        "time_cap_min": 1.0,
    }
    assert fast_w.keys() == slow_w.keys() and all(torch.equal(fast_w[k], slow_w[k]) for k in fast_w)
    step, rate = int(slow[0][0]), float(slow[0][1])  # the first row, after that slow first step
    assert step < 3 and rate == pytest.approx(cfg.gnn.lr * lr_factor(step, 12, 4))
    assert rate < cfg.gnn.lr  # still warming up


def test_a_time_cap_cuts_the_plan_short_and_says_so(
    tiny_paths: Paths, graphs, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """A machine slower than planned: 100 planned steps at 0.1 s a step against a 3 s cap. The cap
    ends the run (the budget is kept), its rates are still the plan's at each step (cut off before
    the decay), and its one line says the model depends on the timing."""
    fake_clock(monkeypatch, step_s=0.1, validation_s=0.1)
    paths = Paths(tiny_paths.data, tmp_path)
    cfg = small_cfg(max_steps=100, eval_every=5, time_budget_min=0.05, warmup_steps=4, patience=10**6)
    summary = train_collection(gnn_model.SPEC, paths, cfg, COLLECTION, *graphs, progress=False)
    rows = metrics(paths)
    assert summary["stopped_by"] == "time budget" and 0 < summary["steps_run"] < 100
    assert [float(r["lr"]) for r in rows] == pytest.approx(
        [cfg.gnn.lr * lr_factor(int(r["step"]), 100, 4) for r in rows], rel=1e-9
    )
    line = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith(f"[gnn {COLLECTION}] ")]
    assert len(line) == 1 and "stopped: time budget; best " in line[0]
    assert "plan: 100 steps (warm-up 4, cosine), time cap 0.05 min, cut short by its time budget" in line[0]


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
