"""`validate` says how many configs each capped layout graph was scored on, once for all models,
and `--all-configs` scores every config (a model whose valid predictions left some unscored is
skipped: its CSV lists those in index order, not in its own)."""

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
from tpurank.models.predictions import save_predictions
from tpurank.submission.format import expected_for_split, render

XLA = "layout:xla:default"
N = 1_500


def _tree(tmp_path: Path) -> tuple[Paths, float]:
    """One valid layout graph of N configs; `random` ranks it exactly on its 1,000 spread configs and
    at random elsewhere; `gnn` predicted only the spread ones (NaN elsewhere). Returns the paths and
    random's tau over all N configs, computed apart from tpurank's metric."""
    rng = np.random.default_rng(5)
    runtime = rng.permutation(N) + 100
    save_graph(
        tmp_path / "data" / NPZ_SUBDIR / "layout/xla/default/valid/big.npz", chain_layout_graph(runtime, rng)
    )
    paths = Paths(data=tmp_path / "data", out=tmp_path / "out")
    expected = expected_for_split(paths, "valid")
    spread = spread_configs(N)
    cost = rng.random(N) * N
    cost[spread] = runtime[spread]
    gnn = np.full(N, np.nan)
    gnn[spread] = runtime[spread]
    paths.submissions.mkdir(parents=True)
    paths.submission_file("random", "valid").write_text(render({f"{XLA}:big": cost}, expected, "r"))
    paths.submission_file("gnn", "valid").write_text(
        render({f"{XLA}:big": gnn}, expected, "g", unscored=True)
    )
    save_predictions(paths.prediction_file("gnn", "valid"), {f"{XLA}:big": gnn})
    tau = float(kendalltau(rank_from_order(order_from_costs(cost)), runtime).statistic)
    return paths, tau


def _validate(paths: Paths, capsys: pytest.CaptureFixture, *extra: str) -> tuple[dict, list[str], str]:
    """(validation.json's scores, validate's stderr lines, the report)."""
    capsys.readouterr()
    args = ["validate", "--data-dir", str(paths.data), "--out-dir", str(paths.out), *extra]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err
    sidecar = json.loads((paths.reports / "validation.json").read_text())
    return sidecar["scores"], err.splitlines(), (paths.reports / "validation.md").read_text()


def test_validate_names_the_capped_graph_and_all_configs_scores_every_one(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    paths, tau = _tree(tmp_path)
    scores, lines, report = _validate(paths, capsys)
    assert [ln for ln in lines if "scored on" in ln] == [
        f"validate: {XLA}:big: scored on 1000 of its 1500 configs (1000 spread evenly over them, the size "
        "of an official validation subset; --all-configs scores them all)"
    ]  # one line for the graph, though two models scored it
    assert scores["random"][XLA] == pytest.approx(1.0) and scores["gnn"][XLA] == pytest.approx(1.0)
    assert "on 1,000 spread evenly): the figures of `tpurank runs`" in report
    scores, lines, report = _validate(paths, capsys, "--all-configs")
    assert not [ln for ln in lines if "scored on" in ln]
    assert scores["random"][XLA] == pytest.approx(tau) and tau < 0.8
    skipped = [ln for ln in lines if ln.startswith("validate: skipped gnn: ")]
    assert len(skipped) == 1 and "500 of its 1500 configs were not predicted" in skipped[0], lines
    assert "gnn" not in scores and "Every config of every graph scored (--all-configs)" in report
