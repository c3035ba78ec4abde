"""`rank`, `Ranker` and `Tuner` on an out folder holding any subset of the members, with or without a
fitted ensemble: the ensemble where fitted, else the member with the best valid score, said in one
line; a model that is not there is named with what is."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from helpers import FAST, TWO_COLLECTIONS, built_once, copy_tree, one_error, two_collection_all

from tpurank.cli import main
from tpurank.core.collections import collection_dir
from tpurank.core.metrics import order_from_costs
from tpurank.core.paths import Paths
from tpurank.models.predictions import load_predictions
from tpurank.rank import Ranker
from tpurank.rank.models import valid_score
from tpurank.tune import Tuner

LAYOUT = next(c for c in TWO_COLLECTIONS if c.startswith("layout:"))
MEMBERS = ("lgbm", "gnn", "baseline")
SUBSETS = [("lgbm",), ("gnn",), ("baseline",), ("lgbm", "gnn"), ("gnn", "baseline"), MEMBERS]


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    """The small tree with the baseline trained too, and its test predictions beside the others'."""
    small = two_collection_all(tmp_path_factory)

    def build(folder: Path) -> None:
        paths = copy_tree(small, folder)
        common = ["--data-dir", str(paths.data), "--out-dir", str(paths.out), *FAST]
        only = ["--collections", *TWO_COLLECTIONS]
        assert main(["train", "--model", "baseline", *only, *common]) == 0
        for split in ("valid", "test"):
            assert main(["predict", "--model", "baseline", "--split", split, *only, *common]) == 0

    root = built_once(tmp_path_factory, "three-members", {"fast": FAST}, build)
    return Paths(data=root / "data", out=root / "out")


def _keep(three: Paths, members: tuple[str, ...], dst: Path, ensemble: bool = False) -> Paths:
    """A copy of the tree whose models are `members` only (and the ensemble's weights if asked)."""
    paths = copy_tree(three, dst)
    for m in [*MEMBERS, "ensemble"]:
        if m not in members and not (m == "ensemble" and ensemble):
            shutil.rmtree(paths.models / m, ignore_errors=True)
    return paths


def _test_file(paths: Paths) -> Path:
    return sorted((paths.npz / collection_dir(LAYOUT) / "test").glob("*.npz"))[0]


@pytest.mark.parametrize("members", SUBSETS, ids=["+".join(s) for s in SUBSETS])
def test_a_subset_ranks_with_its_best_member_and_says_so(
    three: Paths, members: tuple[str, ...], tmp_path: Path
) -> None:
    paths = _keep(three, members, tmp_path / "tree")
    scores = {m: valid_score(paths, m, LAYOUT) for m in members}
    assert all(s is not None for s in scores.values()), scores  # every member records one
    best = max(members, key=lambda m: scores[m])
    with Ranker.load(paths.out, tmp_path / "work") as ranker:
        ranking = ranker.rank(_test_file(paths), collection=LAYOUT)[0]
    assert ranking.model == best
    costs = load_predictions(paths.prediction_file(best, "test"))[f"{LAYOUT}:{_test_file(paths).stem}"]
    np.testing.assert_array_equal(ranking.order, order_from_costs(costs))
    (note,) = ranking.notes
    assert note.startswith(f"{LAYOUT}: no fitted ensemble: ranked by {best}, ")
    assert ("the only trained model" in note) == (len(members) == 1)
    if len(members) > 1:
        assert all(f"{m} {scores[m]:.4f}" in note for m in members)


@pytest.mark.parametrize("members", SUBSETS, ids=["+".join(s) for s in SUBSETS])
def test_a_subset_tunes_and_names_what_is_there(
    three: Paths, members: tuple[str, ...], tmp_path: Path, capsys
) -> None:
    paths = _keep(three, members, tmp_path / "tree")
    test = _test_file(paths)
    with Tuner.load(paths.out, tmp_path / "work") as tuner:
        tuning = tuner.start(test, collection=LAYOUT)
        first = tuning.propose(3)
        assert len(first) == 3 and tuning.program.model in members
    argv = ["rank", str(test), "--models", str(paths.out), "--collection", LAYOUT, "--model"]
    for absent in [m for m in MEMBERS if m not in members]:
        assert main([*argv, absent]) == 1
        line = one_error(capsys, "rank")
        assert f"no {absent} model for {LAYOUT}" in line and f"(there: {', '.join(members)})" in line
    assert main([*argv, "ensemble"]) == 1
    assert f"no fitted ensemble for {LAYOUT} (there: {', '.join(members)})" in one_error(capsys, "rank")


def test_the_fitted_ensemble_is_the_default_and_a_member_ranks_by_name(three: Paths, tmp_path: Path) -> None:
    paths = _keep(three, ("lgbm", "gnn"), tmp_path / "tree", ensemble=True)
    with Ranker.load(paths.out, tmp_path / "work") as ranker:
        default, gnn = (ranker.rank(_test_file(paths), collection=LAYOUT, model=m)[0] for m in (None, "gnn"))
    assert (default.model, default.notes) == ("ensemble", ())
    assert (gnn.model, gnn.notes) == ("gnn", ())


def test_no_trained_model_at_all_is_one_line(three: Paths, tmp_path: Path, capsys) -> None:
    paths = _keep(three, (), tmp_path / "tree")
    assert main(["rank", str(_test_file(paths)), "--models", str(paths.out)]) == 1
    assert one_error(capsys, "rank").endswith(f"{paths.out}: no trained models (train them: `tpurank all`)")
