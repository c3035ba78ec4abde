"""A training's steps are fixed when its plan is made: the steps its time pays at the planned pace,
never what the clock says while it trains (tpurank.train.pace)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpurank.core.config_build import from_dict
from tpurank.core.paths import Paths
from tpurank.train import pace


@pytest.mark.parametrize(
    ("budget_s", "expected", "steps"),
    [
        (0.0, 1000.0, 4000),  # no time budget: the config's steps
        (600.0, 0.0, 4000),  # no estimate (no train file read): the config's steps, the time a cap
        (2000.0, 1000.0, 4000),  # the time pays them all
        (1112.0, 1000.0, 4000),  # with a tenth of it to spare
        (1000.0, 1000.0, 3600),  # without: 90% of the time's steps
        (300.0, 1000.0, 1000),  # 1,080: two significant digits, rounded down
        (123.4, 1000.0, 440),  # 444.2
        (0.001, 1000.0, 1),  # at least one
    ],
)
def test_the_planned_steps_are_what_the_time_pays_at_the_planned_pace(
    budget_s: float, expected: float, steps: int
) -> None:
    assert pace.planned_steps(4000, budget_s, expected) == steps


def test_nearby_plans_plan_the_same_steps() -> None:
    """A share a second longer or shorter (a plan made again after a slightly different time spent)
    mostly plans the same steps: so the same model."""
    assert {pace.planned_steps(4000, s, 1000.0) for s in (280.0, 285.0, 290.0, 300.0, 305.0)} == {1000}


def test_the_warm_up_keeps_its_share_of_the_planned_steps() -> None:
    section = from_dict({"gnn": {"max_steps": 4000, "warmup_steps": 100}}).gnn
    assert pace.planned_section(section, 1000) == {"max_steps": 1000, "warmup_steps": 25}
    assert pace.planned_section(section, 4000) == {"max_steps": 4000}
    baseline = from_dict({}).baseline  # no warm-up of its own
    assert pace.planned_section(baseline, 100) == {"max_steps": 100}


def test_train_by_hand_plans_its_steps_from_its_time_budget(tiny_root: Path) -> None:
    """`train` with a time budget its steps do not fit in: fewer steps, fixed before it starts, the
    warm-up scaled; planned again, the same config (a config `all` planned is left as it is); no
    time budget, or LightGBM: the config as it was."""
    c = "layout:xla:random"
    cfg = from_dict({"gnn": {"max_steps": 100_000, "warmup_steps": 1000, "time_budget_min": 0.05}})
    one = cfg.for_collection(c)
    planned = pace.planned_config(one, "gnn", c, tiny_root)
    nodes = pace.typical_kept(tiny_root, c, one.prepare.hops)
    expected = pace.expected_s("gnn", one, c, nodes) * pace.neural_predict_scale(one.profile)
    assert nodes > 0 and planned.gnn.max_steps == pace.planned_steps(100_000, 3.0, expected) < 100_000
    assert planned.gnn.warmup_steps == -(-1000 * planned.gnn.max_steps // 100_000)
    assert planned.gnn.time_budget_min == 0.05  # still the cap
    assert pace.planned_config(planned, "gnn", c, tiny_root) == planned
    unbounded = from_dict({"gnn": {"max_steps": 100_000}}).for_collection(c)
    assert pace.planned_config(unbounded, "gnn", c, tiny_root) == unbounded
    assert pace.planned_config(one, "lgbm", c, tiny_root) == one
    nowhere = pace.planned_config(one, "gnn", c, tiny_root.parent / "no-such-root")
    assert nowhere == one  # no train file to size a step from: the config's steps, capped by the time


def test_the_plan_writes_its_steps_into_each_collections_config(tiny_paths: Paths) -> None:
    """`all`'s plan: each share's steps (those its minutes pay at the planned pace) become the
    collection's `max_steps` beside its minutes, read back the same from the saved plan; where the
    user set a time budget of their own, neither (train plans from theirs)."""
    from tpurank.core.config_files import config_layers
    from tpurank.run import plan as planning

    cfg = from_dict({"gnn": {"max_steps": 100_000, "warmup_steps": 1000, "seeds": 1}})
    collections = ["layout:xla:random", "tile:xla"]
    plan = planning.make_plan(40.0, cfg, tiny_paths.data, collections, ["gnn"], fixed_left_s=0.0)
    assert all(0 < s.steps < 100_000 for s in plan.shares)
    applied = planning.apply_plan(cfg, plan, [])
    for s in plan.shares:
        section = applied.for_collection(s.collection).gnn
        assert (section.max_steps, section.time_budget_min) == (s.steps, s.minutes)
        assert section.warmup_steps == -(-1000 * s.steps // 100_000)
    saved = tiny_paths.out / "plans.json"
    planning.save_plan(saved, "k", plan)
    assert planning.saved_plan(saved, "k") == plan
    mine = planning.apply_plan(cfg, plan, config_layers(overrides=["gnn.time_budget_min=3"]))
    assert {mine.for_collection(c).gnn.max_steps for c in collections} == {100_000}
