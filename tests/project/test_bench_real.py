"""The cheap pieces of bench/runs/bench_real.py (its data roots, kernel folds, scoring); the
benchmark itself is not run here (minutes of training)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest
from helpers import bench_on_path

from tpurank.core.config_files import load_config
from tpurank.core.metrics import graph_metrics, order_from_costs
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.dataset import discover

bench_on_path()
import bench_real  # noqa: E402
import real_data as rd  # noqa: E402


@pytest.mark.parametrize("folds", [2, 3, 5, 15])
def test_kernel_folds_hold_out_every_kernel_once(folds: int) -> None:
    held = rd.kernel_folds(15, folds)
    assert len(held) == folds
    flat = np.concatenate(held)
    assert sorted(flat.tolist()) == list(range(15))  # each kernel held out exactly once
    assert {len(h) for h in held} <= {15 // folds, -(-15 // folds)}  # balanced
    assert all(len(h) == 1 for h in rd.kernel_folds(15, 15))  # leave-one-kernel-out
    for bad in (1, 16):
        with pytest.raises(ValueError, match="folds must be in 2..15"):
            rd.kernel_folds(15, bad)


def test_kernel_folds_are_scikit_learns() -> None:
    """The folds scikit-learn's `KFold(shuffle=True, random_state=seed)` drew for the results measured
    with it (written out when it was installed): the same seed still holds out the same kernels."""
    assert [h.tolist() for h in rd.kernel_folds(15, 5, seed=0)] == [
        [1, 6, 8],
        [4, 9, 14],
        [2, 10, 13],
        [3, 7, 11],
        [0, 5, 12],
    ]
    assert [h.tolist() for h in rd.kernel_folds(7, 3, seed=1)] == [[1, 2, 6], [0, 4], [3, 5]]


def test_tile_root_never_trains_on_a_held_out_kernel(tmp_path: Path) -> None:
    kernels = []
    for i in range(7):
        k = tmp_path / "kernels" / f"k{i}.npz"
        k.parent.mkdir(exist_ok=True)
        k.write_bytes(b"x")
        kernels.append(k)
    for held in rd.kernel_folds(7, 3):
        root = rd.tile_root(tmp_path / "root", kernels, held)  # rebuilt in place for every fold
        npz = root / NPZ_SUBDIR / "tile/xla"
        names = {s: sorted(p.name for p in (npz / s).glob("*.npz")) for s in ("train", "valid", "test")}
        assert names["test"] == sorted(f"k{i}.npz" for i in held)
        assert names["train"] == sorted(f"k{i}.npz" for i in range(7) if i not in held)
        assert names["valid"] == [rd.FIT_PREFIX + n for n in names["train"]]  # selection on train graphs only
        assert all((npz / "test" / n).resolve() == kernels[int(n[1])].resolve() for n in names["test"])


def test_missing_sample_names_what_is_absent(tmp_path: Path) -> None:
    reason = rd.missing_sample(tmp_path)
    assert reason is not None and str(tmp_path / rd.TILE_PB) in reason


def test_layout_root_resolves_to_the_real_files(sample_root: Path, tmp_path: Path) -> None:
    assert rd.missing_sample(sample_root) is None
    root = rd.layout_root(tmp_path / "data", shared=sample_root)
    found = {(f.split, f.stem): f.path.resolve() for f in discover(root / NPZ_SUBDIR)}
    train = (sample_root / NPZ_SUBDIR / rd.LAYOUT_TRAIN).resolve()
    scored = (sample_root / NPZ_SUBDIR / rd.LAYOUT_SCORED).resolve()
    assert found == {
        ("train", "unet3d"): train,
        ("valid", "fit_unet3d"): train,
        ("test", "unet_3d.4x4.bf16"): scored,
    }
    files = rd.scored_graphs(root, rd.LAYOUT)
    assert list(files) == ["layout:xla:default:unet_3d.4x4.bf16"]
    with np.load(scored) as z:
        runtime = z["config_runtime"].astype(np.float64)
    assert len(runtime) == 1965
    subsets = bench_real.load_subsets(sample_root / "eval_indices")[rd.LAYOUT]
    gid = next(iter(files))
    for sub in (None, subsets):
        assert rd.score_costs({gid: runtime}, files, rd.LAYOUT, sub)[gid] > 0.99  # the truth ranks ~perfectly
        assert rd.score_costs({gid: -runtime}, files, rd.LAYOUT, sub)[gid] < -0.99
    # on the subset only its 1000 configs count: scrambling every other config changes nothing
    other = np.setdiff1d(np.arange(1965), subsets["unet_3d.4x4.bf16"])
    scrambled = runtime.copy()
    scrambled[other] = np.random.default_rng(0).random(len(other))
    assert rd.score_costs({gid: scrambled}, files, rd.LAYOUT, subsets)[gid] == pytest.approx(
        rd.score_costs({gid: runtime}, files, rd.LAYOUT, subsets)[gid]
    )
    assert rd.score_costs({gid: scrambled}, files, rd.LAYOUT)[gid] < 0.99


def test_equal_weight_ensemble_is_the_mean_rank() -> None:
    a = {"g": np.array([3.0, 1.0, 2.0])}
    b = {"g": np.array([10.0, 30.0, 20.0])}
    np.testing.assert_allclose(rd.equal_weight([a, b], "rank")["g"], [0.5, 0.5, 0.5])
    c = {"g": np.array([1.0, 2.0, 3.0])}
    np.testing.assert_allclose(rd.equal_weight([a, c], "rank")["g"], [0.5, 0.25, 0.75])


def test_budget_sets_are_valid_config_and_reach_tile() -> None:
    b = bench_real.BUDGETS["full"]
    cfg = load_config(None, bench_real.budget_sets(b))
    assert cfg.gnn.max_steps == cfg.gnn.eval_every == b["gnn"]  # one validation, at the end
    assert cfg.lgbm.num_boost_round == cfg.lgbm.early_stopping_rounds == b["lgbm"]
    tile = cfg.for_collection("tile:xla")
    assert tile.gnn.max_steps == tile.gnn.eval_every == b["tile_gnn"]
    assert tile.baseline.max_steps == b["tile_baseline"]
    assert (cfg.gnn.hidden, cfg.gnn.dropout) == (64, 0.0)  # a short run's scale, not the GPU profile's
    assert load_config(None, [*bench_real.budget_sets(b), "gnn.hidden=128"]).gnn.hidden == 128  # --set wins


def test_fold_fitted_ensemble_never_sees_a_folds_own_runtimes() -> None:
    """Member A ranks fold 1 perfectly and fold 0 backwards, member B the other way round. Fold 0's
    weights come from fold 1 (A-leaning, 0.6/0.4: the most even perfect ones) and so rank fold 0
    backwards, and vice versa: every graph scores -1, where weights fitted on all graphs (circular)
    would look better."""
    runtime = np.array([5.0, 4.0, 3.0, 2.0, 1.0])  # equal weights (constant cost, index order) score -1
    folds = [["g0", "g1"], ["g2", "g3"]]
    truth = {g: runtime for f in folds for g in f}
    a = {g: (-runtime if g in folds[0] else runtime) for g in truth}
    b = {g: (runtime if g in folds[0] else -runtime) for g in truth}
    costs, weights = rd.fold_fitted([a, b], truth, folds, rd.LAYOUT, "rank")
    assert weights == [pytest.approx([0.6, 0.4]), pytest.approx([0.4, 0.6])]
    scores = [graph_metrics(rd.LAYOUT, order_from_costs(costs[g]), truth[g])["score"] for g in truth]
    assert scores == pytest.approx([-1.0] * 4)
    with pytest.raises(ValueError, match="two folds"):
        rd.fold_fitted([a, b], truth, [list(truth)], rd.LAYOUT, "rank")


def test_summary_and_format_of_seed_spreads() -> None:
    s = bench_real.summary([0.1, 0.3, 0.2])
    assert s["mean"] == pytest.approx(0.2) and s["min"] == 0.1 and s["max"] == 0.3 and s["n"] == 3
    assert s["std"] == pytest.approx(np.std([0.1, 0.3, 0.2]))
    assert bench_real.fmt(s) == "0.2000 ± 0.0816 [0.1000, 0.3000]"
    assert bench_real.fmt(bench_real.summary([0.5, 0.5])) == "0.5000 (x2, no spread)"
    assert bench_real.summary([]) is None and bench_real.fmt(None) == "-"


def test_merge_joins_a_layout_and_a_tile_half(tmp_path: Path) -> None:
    common = {"seeds": [0, 1], "budget": {"gnn": 3}, "sets": ["x=1"], "models": ["random"], "commit": "abc"}
    layout = {
        **common,
        "command": "L",
        "seconds": 2.0,
        "tile_folds": 5,
        "layout": {
            "per_seed": {"all": {"random": [0.1, 0.3]}, "subset": {"random": [0.2, 0.2]}},
            "circular_ensemble": {"all": [], "subset": []},
        },
    }
    tile = {
        **common,
        "command": "T",
        "seconds": 3.0,
        "tile_folds": 3,
        "tile": {"per_seed": {"random": [0.9, 0.8]}, "circular_ensemble": []},
    }
    (tmp_path / "l.json").write_text(json.dumps(layout))
    (tmp_path / "t.json").write_text(json.dumps(tile))
    out = tmp_path / "merged.json"
    assert bench_real.merge(tmp_path / "l.json", tmp_path / "t.json", out) == 0
    res = json.loads(out.read_text())
    assert res["tile_folds"] == 3 and res["seconds"] == 5.0 and res["command"].startswith("L ; T ; ")
    assert (
        "| random | 0.2000 ± 0.1000 [0.1000, 0.3000] | 0.2000 (x2, no spread) | 0.8500 ± 0.0500"
        in res["table"]
    )
    tile["budget"] = {"gnn": 4}
    (tmp_path / "t.json").write_text(json.dumps(tile))
    with pytest.raises(SystemExit, match="differ in budget"):
        bench_real.merge(tmp_path / "l.json", tmp_path / "t.json", out)


def test_bench_exits_0_with_the_reason_without_the_sample(monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setattr(rd, "SHARED", tmp_path)
    monkeypatch.setattr(sys, "argv", ["bench_real.py", "--work", str(tmp_path / "w")])
    assert bench_real.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("bench_real: skipped: real sample files not found") and str(tmp_path) in out
    assert not (tmp_path / "w").exists()  # nothing run, nothing written
