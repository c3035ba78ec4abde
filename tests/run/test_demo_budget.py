"""The demo's `all` planned like any run: its own budget (configs/demo.toml) split over the steps and
the GNN's collections, side by side where `train` runs them so, each collection the same share of
its steps; the progress line says the plan's estimate of the time to go, never the budget's
remainder. The machine's speed is faked (the planner's processes, the training loop's clock)."""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from helpers import fake_clock

from tpurank.core.collections import COLLECTIONS, collection_dir
from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.core.profiles import DEFAULT_BUDGET, Profile, default_budget_s, format_duration, parse_duration
from tpurank.prepare.cache import INDEX_FILE
from tpurank.run import budget as run_budget
from tpurank.run import plan as planning
from tpurank.run.plan import MARGIN, make_plan
from tpurank.run.shares import span_s, split_minutes, split_span

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "configs" / "demo.toml"
# the demo's typical train graphs: nodes as the header estimate sees them, and as pruning keeps them
NODES = {"tile:xla": 14.0, "layout:xla:default": 295.0, "layout:xla:random": 295.0}
NODES |= {"layout:nlp:default": 381.0, "layout:nlp:random": 381.0}
KEPT = {"tile:xla": 14.0, "layout:xla:default": 278.0, "layout:xla:random": 278.0}
KEPT |= {"layout:nlp:default": 257.0, "layout:nlp:random": 257.0}


def demo_config(*sets: str):
    return load_config(None, list(sets), preset=DEMO, profile=Profile("cpu", "test").file)


def demo_minutes() -> float:
    return tomllib.loads(DEMO.read_text())["budget"]["default_min"]


@pytest.fixture
def demo_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A data root of the five collections (small files: small data), the demo's graph sizes, and
    two processes side by side, biggest first, whatever this machine's cores."""
    for c in COLLECTIONS:
        folder = tmp_path / "data" / NPZ_SUBDIR / c.replace(":", "/") / "train"
        folder.mkdir(parents=True)
        (folder / "g.npz").write_bytes(b"x" * 1000)
    monkeypatch.setattr(planning, "graph_size", lambda root, c: NODES[c])
    monkeypatch.setattr(planning, "typical_kept", lambda root, c, hops: KEPT[c])
    two = lambda root, collections: (2, list(collections))  # noqa: E731
    monkeypatch.setattr(planning, "processes", two)
    monkeypatch.setattr(run_budget, "processes", two)
    return tmp_path / "data"


def test_the_demo_preset_sets_its_own_budget_and_the_profile_keeps_its_default() -> None:
    assert default_budget_s(demo_config()) == demo_minutes() * 60
    assert default_budget_s(load_config(profile=Profile("cpu", "test").file)) == parse_duration(
        DEFAULT_BUDGET["cpu"]
    )
    assert demo_config().budget.split == "steps" and load_config().budget.split == "need"
    with pytest.raises(TpurankError, match="budget.split"):
        load_config(overrides=["budget.split=evenly"])


BINDING = "budget.default_min=2.75"  # shorter than the demo's steps take on the faked machine: it binds


def test_the_demo_budget_splits_over_the_collections_side_by_side_by_their_steps(demo_tree: Path) -> None:
    cfg = demo_config(BINDING)
    budget = default_budget_s(cfg)
    plan = make_plan(budget, cfg, demo_tree, list(COLLECTIONS), ["lgbm", "gnn"])
    assert plan.at_once == 2 and plan.over_s == 0 and {s.seeds for s in plan.shares} == {1}
    left = budget * (1 - MARGIN) - plan.fixed_s
    # the two processes' span fills what the other steps leave, and they train more than it together
    assert left - 3 <= plan.training_s <= left + 3
    assert sum(s.minutes * 60 for s in plan.shares) > 1.5 * plan.training_s
    # too short for every collection's steps: each gets the same share of its expected time, so a
    # slower machine trains each collection fewer steps
    ratios = [s.minutes / s.expected_min for s in plan.shares if s.minutes < s.expected_min]
    assert len(ratios) == 4 and max(ratios) == pytest.approx(min(ratios), rel=0.05)
    # but tile, whose steps take less than the least share: it gets its steps' time, and no more
    tile = next(s for s in plan.shares if s.collection == "tile:xla")
    assert tile.expected_min < cfg.budget.min_share_min
    assert tile.minutes == pytest.approx(tile.expected_min, abs=0.01)


def test_a_long_budget_leaves_every_collection_ending_on_its_steps(demo_tree: Path) -> None:
    """`--budget 2h` on the demo: every share holds its steps (a fast machine stops on steps, as the
    demo's step counts say), and the time expected is theirs, not two hours."""
    cfg = demo_config()
    plan = make_plan(7200, cfg, demo_tree, list(COLLECTIONS), ["lgbm", "gnn"])
    assert all(s.minutes > 10 * s.expected_min > 0 for s in plan.shares)
    expected = span_s([s.expected_min * 60 for s in plan.shares], 2)
    assert plan.training_wall_s(likely=True) == pytest.approx(expected)
    assert plan.training_wall_s(likely=True) < plan.training_s / 20


def test_a_slower_machine_trains_fewer_steps_in_the_same_time(demo_tree: Path) -> None:
    """The second look scales the trainings' expected times by how much slower the steps so far ran:
    the same time left buys each collection a smaller share of its steps."""
    cfg = demo_config()
    fast = make_plan(400, cfg, demo_tree, list(COLLECTIONS), ["gnn"], spent_s=30, fixed_left_s=20)
    slow = make_plan(400, cfg, demo_tree, list(COLLECTIONS), ["gnn"], spent_s=30, fixed_left_s=20, slowdown=2)
    assert fast.training_s == pytest.approx(slow.training_s, abs=3)
    for f, s in zip(fast.shares, slow.shares, strict=True):
        assert s.expected_min == pytest.approx(2 * f.expected_min, abs=0.02)  # rounded to 0.01 min
        assert s.minutes / s.expected_min < f.minutes / f.expected_min


def test_the_span_of_a_schedule_and_one_process_is_the_plain_split() -> None:
    assert span_s([3, 2, 2, 1], 2) == 4 and span_s([3, 2, 2, 1], 1) == 8 and span_s([], 2) == 0
    weights, seeds = {"a": 1.0, "b": 3.0}, {"a": 1, "b": 2}
    assert split_span(10, weights, seeds, 0.5, ["a", "b"], 1) == split_minutes(10, weights, seeds, 0.5)
    minutes, kept = split_span(
        10, {"a": 1.0, "b": 1.0, "c": 2.0}, {"a": 1, "b": 1, "c": 1}, 0.5, ["c", "a", "b"], 2
    )
    assert span_s([minutes[c] * kept[c] for c in ("c", "a", "b")], 2) == pytest.approx(10, abs=0.05)


def test_the_progress_line_says_the_plans_estimate_not_the_budgets_remainder(demo_tree: Path) -> None:
    from tpurank.run.pipeline import plan as all_steps

    plan = make_plan(7200, demo_config(), demo_tree, list(COLLECTIONS), ["lgbm", "gnn"])
    steps = all_steps(["lgbm", "gnn"], 1)
    for s in steps:
        s.estimate = s.planned = 0.0 if s.name.neural_training else 5.0
    run_budget.estimate_training(steps, plan)
    gnn = next(s for s in steps if s.name.neural_training)
    assert gnn.estimate == pytest.approx(plan.training_wall_s("gnn", likely=True))
    to_go = sum(s.estimate for s in steps)
    line = run_budget.progress_line(1, steps, steps[0], 12.0, 7200)
    assert f"12s elapsed, about {format_duration(to_go)} to go by the plan (budget 2h00m)" in line
    assert to_go < 600 and "1h" not in line.split("(budget")[0] and "budget left" not in line


def test_a_default_budget_that_cannot_pay_an_added_model_grows_and_a_named_one_is_refused(
    demo_tree: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from tpurank.run.pipeline import plan as all_steps

    cfg, models = demo_config(BINDING), ["lgbm", "gnn", "baseline"]
    args = SimpleNamespace(cfg=cfg, force=False, layers=[])
    paths = Paths(data=demo_tree, out=tmp_path / "out")
    subset = list(COLLECTIONS)
    grown = run_budget.first_budget(args, paths, None, subset, models, all_steps(models, 1))
    least = planning.minimum_budget_s(cfg, subset, models, grown.plan.fixed_s, 2, demo_tree)
    assert grown.seconds == run_budget.round_up(least) > default_budget_s(cfg)
    err = capsys.readouterr().err
    assert (
        f"the default budget {format_duration(default_budget_s(cfg))} (budget.default_min) cannot pay" in err
    )
    with pytest.raises(TpurankError, match=r"--budget 2m30s cannot be kept.*smallest budget that fits"):
        run_budget.first_budget(args, paths, 150.0, subset, models, all_steps(models, 1))


def test_all_on_demo_data_without_a_budget_keeps_the_demos(
    tiny_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`all` on the tiny synthetic data (the demo preset applies) with no --budget: planned on the
    demo's budget, its progress lines the plan's estimate, and a GNN whose steps the budget cannot
    pay stopped by its share of time. The training loop's clock advances 6 seconds a step (a slow
    machine: a few dozen steps fill the share)."""
    from tpurank.cli import main

    fake_clock(monkeypatch, step_s=6.0, validation_s=6.0)
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", os.environ.get("THP_MEM_ALLOC_ENABLE", "0"))  # main() sets it
    out = tmp_path / "run"
    sets = ["gnn.max_steps=100000", "gnn.hidden=16", "gnn.eval_every=10", "gnn.min_train_share=1"]
    sets += ["lgbm.num_boost_round=20", "lgbm.threads=1"]
    cmd = ["all", "--data-dir", str(tiny_root), "--out-dir", str(out), "--profile", "cpu"]
    cmd += ["--collections", "layout:xla:default", *[x for s in sets for x in ("--set", s)]]
    assert main(cmd) == 0
    r = capsys.readouterr()
    budget = format_duration(demo_minutes() * 60)
    assert f"[all] budget {budget}:" in r.err and "the plan again" in r.err
    progress = [line for line in r.err.splitlines() if line.startswith("[all] step ")]
    assert progress and all(f"to go by the plan (budget {budget})" in line for line in progress)
    model = json.loads((out / "models" / "gnn" / "layout-xla-default" / "model.json").read_text())
    assert model["stopped_by"] == "time budget"
    assert any(f"the budget of {budget}" in line and "under" in line for line in r.out.splitlines())


def test_the_plan_counts_the_processes_train_will_run(
    tiny_root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The plan asks `train`'s own rule (tpurank.train.collection_processes), without torch."""
    from tpurank.data.dataset import npz_bytes
    from tpurank.run.shares import side_by_side
    from tpurank.train import collection_processes

    every = list(COLLECTIONS)
    monkeypatch.setattr(collection_processes, "affinity_cores", lambda: 2)
    biggest_first = sorted(every, key=lambda c: npz_bytes(tiny_root, [c]), reverse=True)
    assert side_by_side("gnn", tiny_root, every, gpu=False) == (2, biggest_first)
    assert side_by_side("gnn", tiny_root, every, gpu=True) == (1, every)  # a GPU: one process
    assert side_by_side("gnn", tiny_root, ["tile:xla"], gpu=False) == (1, ["tile:xla"])
    monkeypatch.setattr(collection_processes, "affinity_cores", lambda: 1)
    assert side_by_side("baseline", tiny_root, every, gpu=False) == (1, every)


def test_the_nodes_a_step_costs_are_those_prepare_keeps(tiny_paths: Paths) -> None:
    """The cost model counts each layout graph's pruned nodes from its edges, as `prepare` keeps them
    (the prepared index's `nodes_kept`); a tile graph whole."""
    import pandas as pd

    from tpurank.train.pace import kept_nodes

    index = pd.read_parquet(tiny_paths.prepared / INDEX_FILE)
    rows = index[index["split"] == "train"].groupby("collection").head(3)
    assert set(rows["collection"]) == set(COLLECTIONS)
    for row in rows.itertuples():
        f = tiny_paths.npz / collection_dir(row.collection) / "train" / f"{row.stem}.npz"
        assert kept_nodes([f], 1) == row.nodes_kept, row.stem
        assert kept_nodes([f], -1) == row.nodes
    assert kept_nodes([tiny_paths.data / "missing.npz"], 1) == 0.0  # nothing read: no estimate


def test_what_small_data_costs_is_spread_as_a_demo_run_spends_it(demo_tree: Path) -> None:
    """On the demo's few MB the steps the budget cannot shorten cost their floor, spread as a demo run
    spends it: the GNN's predictions most of what follows training, and more than half as long as
    the steps before it, so a machine slower in those is expected slower in the predictions (the
    second look scales them)."""
    from tpurank.run import step_costs
    from tpurank.run.steps import StepName

    estimates = step_costs.step_estimates_s(
        step_costs.DEFAULT_STEPS, demo_config(), demo_tree, list(COLLECTIONS)
    )
    assert sum(estimates.values()) == pytest.approx(step_costs.FIXED_S_MIN, rel=0.01)
    small = {
        s: step_costs.SMALL_STEP_S.get(s, step_costs.OTHER_SMALL_STEP_S) for s in step_costs.DEFAULT_STEPS
    }
    for step, seconds in estimates.items():
        assert seconds == pytest.approx(step_costs.FIXED_S_MIN * small[step] / sum(small.values()), rel=0.01)
    gnn = estimates[StepName("predict", "gnn", "valid")] + estimates[StepName("predict", "gnn", "test")]
    before = [StepName("prepare"), StepName("features"), StepName("train", "lgbm")]
    after = sum(estimates.values()) - sum(estimates[s] for s in before)
    assert gnn > after / 2 and gnn > 0.5 * sum(estimates[s] for s in before)


def test_the_demo_budget_fits_one_core(demo_tree: Path, tmp_path: Path, monkeypatch, capsys) -> None:
    """On one usable core the collections train one after another: the demo's budget still pays each
    its least share (tile's steps take less than one, so it is not asked more), so it keeps the
    budget and says nothing of it."""
    from tpurank.run.pipeline import plan as all_steps

    one = lambda root, collections: (1, list(collections))  # noqa: E731
    monkeypatch.setattr(planning, "processes", one)
    monkeypatch.setattr(run_budget, "processes", one)
    cfg, models = demo_config(BINDING), ["lgbm", "gnn"]
    args = SimpleNamespace(cfg=cfg, force=False, layers=[])
    paths = Paths(data=demo_tree, out=tmp_path / "out")
    kept = run_budget.first_budget(args, paths, None, list(COLLECTIONS), models, all_steps(models, 1))
    assert kept.seconds == default_budget_s(cfg) and kept.plan.at_once == 1
    assert "cannot pay" not in capsys.readouterr().err
    assert planning.minimum_budget_s(cfg, list(COLLECTIONS), models, kept.plan.fixed_s, 1) > kept.seconds
