"""Profiles picked by the device (faked GPUs: no GPU is at hand), their layering under the user's config,
and the whole run's budget: its split over collections and seeds, and a run that stops within it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
from helpers import fake_clock

from tpurank.core import profiles
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config_files import config_layers, from_layers, load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.run import plan as planning
from tpurank.run import shares, step_costs
from tpurank.run.plan import MARGIN, apply_plan, make_plan
from tpurank.run.steps import StepName
from tpurank.train import pace

ROOT = Path(__file__).resolve().parents[2]


def fake_cuda(
    monkeypatch: pytest.MonkeyPatch, name: str, gb: float, capability=(7, 5), archs=("sm_75",)
) -> None:
    """A CUDA device as torch would report it, without one."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(profiles, "nvidia_device_files", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: capability)
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: list(archs))
    props = types.SimpleNamespace(name=name, total_memory=int(gb * 2**30))  # torch reports bytes
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)


@pytest.mark.parametrize(
    ("name", "gb", "capability", "archs", "want"),
    [
        ("Tesla T4", 14.7, (7, 5), ("sm_75", "sm_80"), "kaggle-t4"),
        ("Tesla P100-PCIE-16GB", 15.9, (6, 0), ("sm_60",), "kaggle-t4"),
        ("NVIDIA A10G", 22.0, (8, 6), ("sm_80", "sm_86"), "gpu"),
        ("NVIDIA H100 80GB HBM3", 79.1, (9, 0), ("sm_80", "sm_90"), "gpu"),
        ("Tesla P100-PCIE-16GB", 15.9, (6, 0), ("sm_75", "sm_80"), "cpu"),  # torch has no kernels for sm_60
    ],
)
def test_auto_picks_the_profile_the_device_fits(monkeypatch, name, gb, capability, archs, want) -> None:
    fake_cuda(monkeypatch, name, gb, capability, archs)
    monkeypatch.delenv(profiles.ENV, raising=False)
    p = profiles.resolve_profile("auto")
    assert p.name == want
    assert (name in p.reason) == (want != "cpu")


def test_a_device_that_errors_is_no_gpu(monkeypatch) -> None:
    torch = pytest.importorskip("torch")
    fake_cuda(monkeypatch, "busy", 15.0)

    def busy(i=0):
        raise RuntimeError("CUDA error: all CUDA-capable devices are busy or unavailable")

    monkeypatch.setattr(torch.cuda, "get_device_properties", busy)
    assert profiles.resolve_profile("auto").name == "cpu"


def test_no_gpu_is_the_cpu_profile_and_names_win(monkeypatch) -> None:
    monkeypatch.setattr(profiles, "nvidia_device_files", lambda: False)
    monkeypatch.delenv(profiles.ENV, raising=False)
    assert profiles.resolve_profile(None).name == "cpu"
    assert profiles.resolve_profile("gpu") == profiles.Profile("gpu", "chosen with --profile")
    monkeypatch.setenv(profiles.ENV, "kaggle-t4")
    assert profiles.resolve_profile(None).name == "kaggle-t4"
    monkeypatch.setenv(profiles.ENV, "h100")
    with pytest.raises(TpurankError, match=r"\$TPURANK_PROFILE must be one of"):
        profiles.resolve_profile(None)


@pytest.mark.parametrize("name", profiles.PROFILES)
def test_each_profile_file_loads_and_names_itself(name: str) -> None:
    p = profiles.Profile(name, "test")
    assert p.file.exists()
    assert load_config(profile=p.file).profile == name


def test_the_profile_sits_under_the_preset_the_file_and_set(tmp_path: Path) -> None:
    cpu = profiles.Profile("cpu", "test").file
    mine = tmp_path / "mine.toml"
    mine.write_text("[gnn]\nlr = 0.005\n")
    layers = config_layers(mine, ["gnn.hidden=48"], ROOT / "configs" / "demo.toml", cpu)
    assert [x.source.split()[0] for x in layers] == ["profile", "preset", "file", "--set"]
    cfg = from_layers(layers)
    assert (cfg.profile, cfg.gnn.hidden, cfg.gnn.lr, cfg.gnn.max_steps) == ("cpu", 48, 0.005, 240)
    assert cfg.gnn.time_budget_min == 3.5  # from the profile: the demo preset does not set it
    # the cpu profile has no MXU columns anywhere (lower on every real seed) and the tile-aware GNN
    # inputs on every layout collection (higher on every real seed)
    for c in COLLECTIONS:
        one = cfg.for_collection(c)
        assert not one.features.mxu_columns
        assert one.gnn.tile_features == c.startswith("layout:")


def test_a_key_set_at_top_level_above_beats_a_collection_table_below(tmp_path: Path) -> None:
    """The cpu profile's xla:random table sets eval_every = 100; the demo preset above it sets
    eval_every = 0 at top level, which then holds for every collection (as over the GPU scale)."""
    cpu = profiles.Profile("cpu", "test").file
    cfg = load_config(None, [], preset=ROOT / "configs" / "demo.toml", profile=cpu)
    assert {cfg.for_collection(c).gnn.eval_every for c in COLLECTIONS} == {0}
    assert cfg.for_collection("layout:xla:random").gnn.dim_features  # a key the demo leaves alone
    off = load_config(None, ["gnn.tile_features=false"], profile=cpu)
    assert not any(off.for_collection(c).gnn.tile_features for c in COLLECTIONS)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("2h", 7200), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("1.5h", 5400)],
)
def test_durations(text: str, seconds: float) -> None:
    assert profiles.parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "2 hours", "0", "-5", "h", "inf", "nan", "1e400", "15", "2"])
def test_bad_durations_are_one_line(text: str) -> None:
    with pytest.raises(TpurankError, match="--budget"):
        profiles.parse_duration(text)


def _tree(root: Path, sizes: dict[str, int]) -> Path:
    """A data root whose train files of each collection have the given size (bytes), two files each."""
    for c, size in sizes.items():
        folder = root / NPZ_SUBDIR / c.replace(":", "/") / "train"
        folder.mkdir(parents=True)
        for i in range(2):
            (folder / f"g{i}.npz").write_bytes(b"x" * size)
    return root


def test_graph_size_reads_the_pruned_size_from_the_headers(sample_root: Path) -> None:
    """The typical train graph of a collection, from array headers: layout keeps the configurable
    nodes and their neighbours (never more than the graph), tile the whole kernel."""
    from tpurank.data.npz import load_graph

    g = load_graph(sample_root / NPZ_SUBDIR / "layout/xla/default/train/unet3d.npz", config_dtype=None)
    want = min(len(g.node_opcode), planning.NEIGHBOURHOOD * len(g.node_config_ids))
    assert planning.graph_size(sample_root, "layout:xla:default") == want
    t = load_graph(sample_root / NPZ_SUBDIR / "tile/xla/train/retinanet.2x2.fp32_-342c949e14733d96.npz")
    assert planning.graph_size(sample_root, "tile:xla") == len(t.node_opcode)


def test_the_plan_splits_by_need_and_seeds(tmp_path: Path, monkeypatch) -> None:
    cfg = load_config(overrides=['collections."layout:nlp:default".gnn.seeds=2'])
    sizes = {"tile:xla": 1000, "layout:xla:default": 50_000, "layout:nlp:default": 50_000}
    root = _tree(tmp_path, sizes)
    monkeypatch.setattr(planning, "graph_size", lambda root, c: sizes[c] / 10)
    plan = make_plan(3600, cfg, root, list(sizes), ["lgbm", "gnn"])
    by = {s.collection: s for s in plan.shares}
    assert set(by) == set(sizes) and all(s.model == "gnn" for s in plan.shares)
    # the whole plan fits: fixed estimate + training + margin <= the budget
    assert plan.fixed_s + plan.training_s <= 3600 * (1 - MARGIN) + 0.01 * len(plan.shares) * 60
    # need = the 1st place's steps x configs per step x file size: nlp:default 50k steps, xla:default 11.5k
    total = {c: s.minutes * s.seeds for c, s in by.items()}
    assert total["layout:nlp:default"] / total["layout:xla:default"] == pytest.approx(
        50_000 / 11_500, rel=0.01
    )
    assert by["layout:nlp:default"].seeds == 2 and by["tile:xla"].minutes < by["layout:xla:default"].minutes
    assert make_plan(3600, cfg, root, list(sizes), ["lgbm", "gnn"]) == plan  # no clock in it
    planned = apply_plan(cfg, plan, [])
    for c, s in by.items():
        assert planned.for_collection(c).gnn.time_budget_min == s.minutes
    # the user's own time budget wins over the plan's
    layers = config_layers(overrides=["gnn.time_budget_min=3"])
    mine = apply_plan(from_layers(layers), plan, layers)
    assert {mine.for_collection(c).gnn.time_budget_min for c in sizes} == {3.0}


def test_a_spent_budget_trains_each_model_its_least_share_and_says_how_far_over(tmp_path: Path) -> None:
    """A time budget of 0 means none: when nothing is left, every seed still gets the floor
    (budget.min_share_min), never less, and the plan says how far past the budget that reaches."""
    root = _tree(tmp_path, {"layout:xla:default": 10_000, "tile:xla": 100})
    cfg = load_config(overrides=["gnn.seeds=3"])
    plan = make_plan(60, cfg, root, ["tile:xla", "layout:xla:default"], ["gnn"], spent_s=600)
    assert plan.shares and all(s.minutes == cfg.budget.min_share_min and s.seeds == 1 for s in plan.shares)
    # past the budget by all it spent and still plans, margin included
    assert plan.over_s == pytest.approx(plan.fixed_s + plan.training_s - 60, abs=0.1) and plan.over_s > 600
    planned = apply_plan(cfg, plan, [])
    assert all(planned.for_collection(s.collection).gnn.time_budget_min > 0 for s in plan.shares)
    assert {planned.for_collection(s.collection).gnn.seeds for s in plan.shares} == {1}


@pytest.mark.parametrize(
    ("total", "seeds", "want_seeds"),
    [
        (10.0, {"a": 3, "b": 3}, {"a": 3, "b": 3}),
        (4.0, {"a": 3, "b": 3}, {"a": 2, "b": 2}),
        (2.5, {"a": 3, "b": 1}, {"a": 1, "b": 1}),
        (1.0, {"a": 2, "b": 2}, {"a": 1, "b": 1}),
    ],
)
def test_fewer_seeds_rather_than_shares_below_the_floor(total: float, seeds: dict, want_seeds: dict) -> None:
    minutes, got = shares.split_minutes(total, {"a": 1.0, "b": 1.0}, seeds, floor=1.0)
    assert got == want_seeds and all(m >= 1.0 for m in minutes.values())
    if sum(got.values()) <= total:  # it fits: the shares add up to the total
        assert sum(minutes[c] * got[c] for c in got) == pytest.approx(total, abs=0.02)


def test_the_smallest_budget_counts_the_fixed_steps_every_collection_and_the_baseline() -> None:
    cfg = load_config(overrides=["budget.min_share_min=2"])
    two = ["tile:xla", "layout:xla:default"]
    assert planning.minimum_budget_s(cfg, two, ["lgbm"], 100) == pytest.approx(100 / (1 - MARGIN))
    assert planning.minimum_budget_s(cfg, two, ["gnn"], 100) == pytest.approx((100 + 240) / (1 - MARGIN))
    # the baseline gets a fifth of the neural time: that fifth must pay its floor
    both = planning.minimum_budget_s(cfg, two, ["gnn", "baseline"], 100)
    assert both == pytest.approx((100 + 240 / planning.BASELINE_SHARE) / (1 - MARGIN))


@pytest.mark.parametrize(
    "edit",
    [
        {"minutes": "5m"},
        {"minutes": -1},
        {"seeds": 1.5},
        {"seeds": True},
        {"model": "lgbm"},
        {"collection": "layout:xla"},
        {"minutes": float("nan")},
    ],
)
def test_a_hand_edited_plan_is_refused_in_one_line_and_planned_again(tmp_path: Path, capsys, edit) -> None:
    root = _tree(tmp_path / "data", {"tile:xla": 100})
    cfg, f = load_config(), tmp_path / "budget-plan.json"
    key = planning.plan_key(600, cfg, Paths(root, tmp_path / "out"), ["tile:xla"], ["gnn"])
    planning.save_plan(f, key, make_plan(600, cfg, root, ["tile:xla"], ["gnn"]))
    assert planning.saved_plan(f, key) is not None
    data = json.loads(f.read_text())
    data["plans"][key]["shares"][0].update(edit)
    f.write_text(json.dumps(data))
    assert planning.saved_plan(f, key) is None
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the saved plan is not valid" in err[0] and str(f) in err[0]


def test_the_plan_file_keeps_one_plan_per_run(tmp_path: Path) -> None:
    root = _tree(tmp_path / "data", {"tile:xla": 100, "layout:xla:default": 100})
    cfg, f = load_config(), tmp_path / "budget-plan.json"
    keys = {}
    for subset in (["tile:xla"], ["tile:xla", "layout:xla:default"]):
        keys[len(subset)] = planning.plan_key(600, cfg, Paths(root, tmp_path / "out"), subset, ["gnn"])
        planning.save_plan(f, keys[len(subset)], make_plan(600, cfg, root, subset, ["gnn"]))
    assert (
        len(planning.saved_plan(f, keys[1]).shares) == 1 and len(planning.saved_plan(f, keys[2]).shares) == 2
    )
    # a change the split does not read keeps the key; one it reads changes it
    other = load_config(overrides=["lgbm.num_boost_round=7"])
    assert planning.plan_key(600, other, Paths(root, tmp_path / "out"), ["tile:xla"], ["gnn"]) == keys[1]
    wider = load_config(overrides=["gnn.seeds=2"])
    assert planning.plan_key(600, wider, Paths(root, tmp_path / "out"), ["tile:xla"], ["gnn"]) != keys[1]


def test_a_baseline_takes_a_fifth_of_the_neural_time(tmp_path: Path) -> None:
    root = _tree(tmp_path, {"layout:xla:default": 10_000})  # sizes do not matter with one collection
    plan = make_plan(1800, load_config(), root, ["layout:xla:default"], ["gnn", "baseline"])
    minutes = {s.model: s.minutes * s.seeds for s in plan.shares}
    assert minutes["baseline"] / (minutes["gnn"] + minutes["baseline"]) == pytest.approx(0.2, rel=0.01)


def test_config_show_names_the_profile_as_the_source(tmp_path: Path, monkeypatch) -> None:
    env = {"PATH": "/usr/bin:/bin", "TPURANK_HOME": str(tmp_path), "TPURANK_PROFILE": "cpu"}
    cmd = [sys.executable, "-m", "tpurank", "config", "show", "--data-dir", str(tmp_path)]
    cpu = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    gpu = subprocess.run([*cmd, "--profile", "gpu"], capture_output=True, text=True, env=env, cwd=ROOT)
    assert cpu.returncode == gpu.returncode == 0, cpu.stderr + gpu.stderr
    row = {r.split()[0]: r for r in cpu.stdout.splitlines() if r.strip()}
    assert "32" in row["gnn.hidden"] and "profile cpu" in row["gnn.hidden"]
    assert "3.5" in row["gnn.time_budget_min"] and "profile cpu" in row["gnn.time_budget_min"]
    row = {r.split()[0]: r for r in gpu.stdout.splitlines() if r.strip()}
    assert "256" in row["gnn.hidden"] and "profile" not in row["gnn.hidden"].split("256", 1)[1].split()[0:1]


def test_all_within_a_tiny_budget_stops_training_on_time(
    tiny_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`all --budget 100s` on one tiny collection (50s refused up front): the plan printed, the GNN stopped by its share of
    time (its step cap is out of reach), a checked submission, and a rerun that keeps the plan. The
    other stages are estimated at about a minute and a quarter, so the GNN's share is what the tiny data leaves
    of that estimate. The training loop runs on a clock that advances a second per step, so the
    share ends after tens of steps whatever this machine's speed (whether a real run keeps its
    budget: bench/runs/bench_budget.py)."""
    from tpurank.cli import main

    fake_clock(monkeypatch, step_s=1.0, validation_s=2.0)
    monkeypatch.setenv("THP_MEM_ALLOC_ENABLE", os.environ.get("THP_MEM_ALLOC_ENABLE", "0"))  # main() sets it
    out = tmp_path / "run"
    sets = ["gnn.max_steps=100000", "gnn.hidden=16", "gnn.eval_every=20", "gnn.min_train_share=1"]
    sets += ["lgbm.num_boost_round=20", "lgbm.threads=1"]
    cmd = ["all", "--data-dir", str(tiny_root), "--out-dir", str(out)]
    cmd += ["--collections", "layout:xla:default", "--profile", "cpu", "--set", "budget.min_share_min=0.1"]
    cmd += [x for s in sets for x in ("--set", s)]
    # the data's size expects about a minute and a quarter for the other steps: 50 s cannot hold, refused before any work
    assert main([*cmd, "--budget", "50s"]) == 1
    refused = capsys.readouterr().err
    assert "step 1/" not in refused and "--budget 50s cannot be kept" in refused
    assert "the smallest budget that fits is 1m40s" in refused
    assert not (out / "models").exists() and not (out / "features").exists()
    cmd += ["--budget", "100s"]
    assert main(cmd) == 0
    r = capsys.readouterr()
    assert "[all] profile cpu: chosen with --profile" in r.err
    assert "[all] budget 1m40s:" in r.err and "step 1/" in r.err
    planned = [line for line in r.err.splitlines() if line.startswith("[all]   gnn")]
    assert len(planned) == 2 and all("layout:xla:default" in x for x in planned)  # first plan, second look
    assert "[all] the plan again" in r.err and (out / "reports" / "budget-plan.json").exists()
    model = json.loads((out / "models" / "gnn" / "layout-xla-default" / "model.json").read_text())
    assert model["stopped_by"] == "time budget"
    share = model["config"]["gnn"]["time_budget_min"]  # the collection's config, the plan applied
    assert 0.1 <= share < 1.5 and share * 60 - 5 <= model["seconds"] <= share * 60 + 2  # the clock's seconds
    assert (out / "submissions" / "submission.csv").exists()
    closing = [line for line in r.out.splitlines() if "the budget of 1m40s" in line]
    assert closing and "under" in closing[0]
    # a rerun takes the saved plan, not a new one on another clock: every step is up to date
    assert main(cmd) == 0
    again = capsys.readouterr().err
    assert "[all] the plan the last run with this budget trained with" in again
    assert again.count("up to date, skipped") == 14 and ": tpurank " not in again


@pytest.mark.parametrize("profile", ["cpu", "kaggle-t4", "gpu"])
def test_neural_predictions_are_estimated_at_the_device_that_runs_them(monkeypatch, profile: str) -> None:
    """A GPU profile's faster predictions are counted only where a GPU runs them (a GPU profile
    chosen on a CPU predicts on the CPU)."""
    monkeypatch.setattr(pace, "gpu", lambda: None)
    assert pace.neural_predict_scale(profile) == 1.0
    monkeypatch.setattr(pace, "gpu", lambda: ("Tesla T4", 14.7))
    assert pace.neural_predict_scale(profile) == pace.NEURAL_PREDICT_SCALE[profile]
    assert pace.neural_predict_scale(profile) < 1.0 or profile == "cpu"


def test_the_seed_members_closing_scoring_is_counted_outside_the_shares(tmp_path: Path) -> None:
    """With several seeds, `train gnn` scores each member on valid after training (the work of its
    valid predictions): the plan counts it among what it cannot shorten; with one seed, nothing."""
    root = _tree(tmp_path, {"layout:xla:default": 10_000, "tile:xla": 100})
    collections = ["tile:xla", "layout:xla:default"]
    one, three = load_config(overrides=["gnn.seeds=1"]), load_config(overrides=["gnn.seeds=3"])
    assert step_costs.seeds_scoring_s("gnn", one, root, collections) == 0.0
    assert step_costs.seeds_scoring_s("lgbm", three, root, collections) == 0.0
    gb = sum(step_costs.data_bytes(root, c) for c in collections) / 1e9
    want = gb * step_costs.step_s_per_gb(StepName("predict", "gnn", "valid"), three, collections)
    assert step_costs.seeds_scoring_s("gnn", three, root, collections) == pytest.approx(want) and want > 0
    base = sum(step_costs.step_estimates_s(step_costs.DEFAULT_STEPS, three, root, collections).values())
    assert step_costs.fixed_estimate_s(three, root, collections) == pytest.approx(base + want)
