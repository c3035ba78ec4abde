"""`score` says how many configs each capped layout graph was scored on, and `--all-configs` scores
them all: on hand-made graphs (always) and on the real sample's valid layout graph (1,965 configs)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import chain_layout_graph
from scipy.stats import kendalltau

from tpurank.cli import main
from tpurank.core.metrics import order_from_costs, rank_from_order
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.npz import save_graph
from tpurank.data.subsets import spread_configs
from tpurank.submission.format import expected_for_split, render

XLA = "layout:xla:default"
BIG, SMALL = 1_500, 800  # configs of the two hand-made valid graphs: one over the cap, one under
CAPPED = "scored on 1000 of its 1500 configs (1000 spread evenly over them, the size of an official "
CAPPED += "validation subset; --all-configs scores them all)"


def _tau(costs: np.ndarray, runtime: np.ndarray) -> float:
    """Kendall tau-b of a ranking over every config, computed apart from tpurank's metric."""
    return float(kendalltau(rank_from_order(order_from_costs(costs)), runtime).statistic)


def hand_made(root: Path) -> tuple[Path, dict[str, float]]:
    """A data root with a big and a small valid layout graph and a CSV ranking them: exact on the
    big graph's 1,000 spread configs, at random elsewhere. Returns the CSV and, per graph, its tau
    over all its configs."""
    rng = np.random.default_rng(7)
    folder = root / "data" / NPZ_SUBDIR / "layout" / "xla" / "default" / "valid"
    costs, taus = {}, {}
    for name, n in (("big", BIG), ("small", SMALL)):
        runtime = rng.permutation(n) + 100
        save_graph(folder / f"{name}.npz", chain_layout_graph(runtime, rng))
        cost = rng.random(n) * n
        if name == "big":
            cost[spread_configs(n)] = runtime[spread_configs(n)]
        costs[f"{XLA}:{name}"], taus[f"{XLA}:{name}"] = cost, _tau(cost, runtime)
    expected = expected_for_split(Paths(data=root / "data", out=root), "valid")
    csv = root / "valid.csv"
    csv.write_text(render(costs, expected, str(csv)))
    return csv, taus


def _score(csv: Path, data: Path, capsys: pytest.CaptureFixture, *extra: str) -> tuple[float, list[str]]:
    """The collection's score (`--json`) and the stderr lines of `score`."""
    out = csv.with_name(f"scores{len(extra)}.json")
    capsys.readouterr()
    assert main(["score", "--submission", str(csv), "--data-dir", str(data), "--json", str(out), *extra]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return json.loads(out.read_text())[XLA], err.splitlines()


def test_a_capped_graph_is_named_and_all_configs_scores_every_one(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    csv, taus = hand_made(tmp_path)
    capped, lines = _score(csv, tmp_path / "data", capsys)
    assert [ln for ln in lines if "scored on" in ln] == [f"note: {XLA}:big: {CAPPED}"]  # not the small one
    assert capped == pytest.approx((1.0 + taus[f"{XLA}:small"]) / 2)  # exact on the big graph's 1,000
    whole, lines = _score(csv, tmp_path / "data", capsys, "--all-configs")
    assert not [ln for ln in lines if "scored on" in ln]
    assert whole == pytest.approx(np.mean(list(taus.values())))
    assert taus[f"{XLA}:big"] < 0.8  # so the two scores really differ


def test_all_configs_and_official_subsets_are_one_or_the_other(tmp_path: Path, capsys) -> None:
    csv, _ = hand_made(tmp_path)
    with pytest.raises(SystemExit) as exited:
        main(["score", "--submission", str(csv), "--all-configs", "--official-subsets", str(tmp_path)])
    assert exited.value.code == 2
    assert "argument --official-subsets: not allowed with argument --all-configs" in capsys.readouterr().err


def test_on_the_real_sample(sample_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """A CSV that ranks all 1,965 configs of the sample's valid layout graph: scored on 1,000 by
    default (said in a line), on the official subset with --official-subsets, on all with --all-configs."""
    expected = expected_for_split(Paths(data=sample_root, out=tmp_path), "valid")
    graph = f"{XLA}:unet_3d.4x4.bf16"
    assert {e.id: e.num_configs for e in expected}[graph] == 1965
    rng = np.random.default_rng(0)
    costs, runtimes = {}, {}
    for e in expected:
        stem = e.id.rsplit(":", 1)[-1]
        with np.load(next(sample_root.rglob(f"valid/{stem}.npz"))) as z:
            runtimes[e.id] = z["config_runtime"].astype(np.float64)
        costs[e.id] = runtimes[e.id] * rng.lognormal(0, 0.01, len(runtimes[e.id]))  # near the truth
    csv = tmp_path / "valid.csv"
    csv.write_text(render(costs, expected, str(csv)))
    spread, lines = _score(csv, sample_root, capsys)
    line = f"note: {graph}: scored on 1000 of its 1965 configs (1000 spread evenly over them"
    assert [ln for ln in lines if "scored on" in ln][0].startswith(line)
    official, lines = _score(
        csv, sample_root, capsys, "--official-subsets", str(sample_root / "eval_indices")
    )
    assert (
        f"note: {graph}: scored on 1000 of its 1965 configs (the official validation subset; --all-configs scores them all)"
        in lines
    )
    whole, lines = _score(csv, sample_root, capsys, "--all-configs")
    assert not [ln for ln in lines if "scored on" in ln]
    assert whole == pytest.approx(_tau(costs[graph], runtimes[graph]), abs=1e-12)
    assert len({round(spread, 6), round(official, 6), round(whole, 6)}) == 3  # three sets of configs
    paths = Paths(data=sample_root, out=tmp_path / "out")  # validate on the same CSV as a model's
    paths.submissions.mkdir(parents=True)
    paths.submission_file("random", "valid").write_bytes(csv.read_bytes())
    capped = f"validate: {graph}: scored on 1000 of its 1965 configs (1000 spread evenly over them"
    for extra, score in (([], spread), (["--all-configs"], whole)):
        capsys.readouterr()
        assert main(["validate", "--data-dir", str(sample_root), "--out-dir", str(paths.out), *extra]) == 0
        said = [ln for ln in capsys.readouterr().err.splitlines() if "scored on" in ln]
        assert len(said) == (0 if extra else 1) and all(ln.startswith(capped) for ln in said), said
        sidecar = json.loads((paths.reports / "validation.json").read_text())
        assert sidecar["scores"]["random"][XLA] == pytest.approx(score) and sidecar["all_configs"] == bool(
            extra
        )
