"""`tpurank rank` and `Ranker`: a user's own files ranked by trained models, exactly as `predict`
ranks the same graph placed as a test file, scored where runtimes were measured."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from helpers import SAMPLE_ROOT, TWO_COLLECTIONS, layout_pb, one_error, snapshot, two_collection_all

from tpurank.cli import main
from tpurank.core.collections import collection_dir
from tpurank.core.metrics import order_from_costs
from tpurank.core.paths import Paths
from tpurank.models.predictions import load_predictions
from tpurank.pb.schema import ModuleTuningData, TuningData
from tpurank.rank import Ranker

PB = SAMPLE_ROOT / "pb"
LAYOUT = next(c for c in TWO_COLLECTIONS if c.startswith("layout:"))  # the small tree's (and tile:xla)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Paths:
    return two_collection_all(tmp_path_factory)


def _test_file(paths: Paths, collection: str) -> Path:
    return sorted((paths.npz / collection_dir(collection) / "test").glob("*.npz"))[0]


@pytest.mark.parametrize("model", ["ensemble", "lgbm", "gnn"])
def test_an_npz_is_ranked_as_predict_ranks_it_as_a_test_file(
    small: Paths, model: str, tmp_path: Path
) -> None:
    files = [_test_file(small, c) for c in ("tile:xla", LAYOUT)]
    with Ranker.load(small.out, tmp_path / "work") as ranker:
        rankings = ranker.rank_files(files, collection=LAYOUT, model=model)
    predicted = load_predictions(small.prediction_file(model, "test"))
    for f, r, collection in zip(files, rankings, ("tile:xla", LAYOUT), strict=True):
        costs = predicted[f"{collection}:{f.stem}"]
        assert r.collection == collection and r.kind == ("tile" if collection == "tile:xla" else "layout")
        np.testing.assert_array_equal(r.order, order_from_costs(costs))
        np.testing.assert_array_equal(r.cost, costs[r.order])
        assert r.relative[0] == 0 and (np.diff(r.relative) >= 0).all()


def _configs_of(pb: Path) -> list[int]:
    """The candidate count of each graph of a raw file: its runs with a config and no error."""
    layout = ModuleTuningData.FromString(pb.read_bytes()) if "layout" in pb.name else None
    if layout is not None:
        return [sum(r.HasField("module_config") and not r.error for r in layout.runs)]
    tile = TuningData.FromString(pb.read_bytes())
    counts = [
        sum(r.op_config.HasField("tile_size_config") and not r.error for r in m.runs) for m in tile.modules
    ]
    return [n for m, n in zip(tile.modules, counts, strict=True) if m.HasField("module") and n]


def test_the_real_protobufs_are_ranked_whole_and_scored(small: Paths, tmp_path: Path, capsys) -> None:
    if not PB.is_dir():
        pytest.skip(f"real protobufs not found at {PB} (../shared is absent on a fresh clone)")
    pbs = sorted(PB.glob("*.pb"))
    before_inputs = {p: p.read_bytes() for p in pbs}
    before_models = snapshot(small.out)
    out = tmp_path / "ranking.json"
    argv = ["rank", *map(str, pbs), "--models", str(small.out), "--collection", LAYOUT, "--out", str(out)]
    assert main([*argv, "--work", str(tmp_path / "work")]) == 0
    printed = capsys.readouterr().out
    doc = json.loads(out.read_text())
    expected = [n for p in pbs for n in _configs_of(p)]
    assert [g["configs"] for g in doc] == expected  # every config of every graph, none dropped
    for g in doc:
        assert g["measured"] == g["configs"] and g["scores"] is not None  # the sample's runs are measured
        assert sorted(row["config"] for row in g["ranking"]) == sorted(
            {row["config"] for row in g["ranking"]}
        )
        assert [row["rank"] for row in g["ranking"]] == list(range(1, g["configs"] + 1))
    layout = next(g for g in doc if g["kind"] == "layout")
    assert -1 <= layout["scores"]["score"] <= 1 and layout["scores"]["slowdown@1"] >= 1
    assert f"against {layout['measured']} measured of {layout['configs']} configs: Kendall tau" in printed
    assert {p: p.read_bytes() for p in pbs} == before_inputs  # the user's files are only read
    assert snapshot(small.out) == before_models  # the models are only read
    assert set(p.name for p in tmp_path.iterdir()) == {"ranking.json", "work"}


def _no_runs(path: Path) -> Path:
    m = ModuleTuningData.FromString(layout_pb(path).read_bytes())
    del m.runs[:]
    path.write_bytes(m.SerializeToString())
    return path


def _narrow_npz(path: Path) -> Path:
    np.savez(
        path,
        node_feat=np.zeros((3, 100), np.float32),
        node_opcode=np.zeros(3, np.uint8),
        edge_index=np.zeros((0, 2), np.int64),
        node_config_feat=np.zeros((2, 1, 18), np.float32),
        node_config_ids=np.array([0]),
        config_runtime=np.array([1, 2]),
        node_splits=np.zeros((1, 2), np.int64),
    )
    return path


BAD = {
    "a protobuf without configs": (lambda d: [str(_no_runs(d / "empty.pb"))], "no configs to rank"),
    "a collection the models were not trained for": (
        lambda d: [str(layout_pb(d / "m.pb")), "--collection", "layout:xla:default"],
        "no models trained for layout:xla:default",
    ),
    "node features other than the dataset's": (
        lambda d: [str(_narrow_npz(d / "narrow.npz"))],
        "node_feat: shape (3, 100), expected (nodes, 140)",
    ),
    "neither npz nor pb": (lambda d: [str(d / "notes.txt")], "not a .npz or .pb file"),
    "an output that is neither csv nor json": (
        lambda d: [str(layout_pb(d / "m.pb")), "--out", str(d / "r.txt")],
        "--out must end in .csv or .json",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_what_cannot_be_ranked_says_so_in_one_line(small: Paths, case: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    make, message = BAD[case]
    assert main(["rank", *make(tmp_path), "--models", str(small.out)]) == 1
    assert message in one_error(capsys, "rank")


def test_a_folder_without_models_is_refused(tmp_path: Path, capsys) -> None:
    assert main(["rank", str(layout_pb(tmp_path / "m.pb")), "--models", str(tmp_path)]) == 1
    assert "neither a trained out folder (with models/) nor a models dataset" in one_error(capsys, "rank")


def test_a_work_folder_holding_other_files_is_refused_untouched(small: Paths, tmp_path: Path, capsys) -> None:
    work = tmp_path / "mine"
    (work / "data").mkdir(parents=True)
    (work / "data" / "keep.txt").write_text("a user's file")
    pb = str(layout_pb(tmp_path / "m.pb"))
    assert main(["rank", pb, "--models", str(small.out), "--collection", LAYOUT, "--work", str(work)]) == 1
    assert "not a work folder of `rank` and not empty" in one_error(capsys, "rank")
    assert (work / "data" / "keep.txt").read_text() == "a user's file"


def test_a_work_folder_linked_to_an_out_folder_never_unpacks_into_it(small: Paths, tmp_path: Path) -> None:
    """A kept work folder links an out folder's models; a models dataset named next must not be
    unpacked through that link into the user's models."""
    from tpurank.core.errors import TpurankError

    work, before = tmp_path / "work", snapshot(small.out)
    Ranker.load(small.out, work).close()
    dataset = tmp_path / "dataset"
    dataset.mkdir()
    (dataset / "tpurank-models.json").write_text("{}")
    with pytest.raises(TpurankError, match="holds other models"):
        Ranker.load(dataset, work)
    assert snapshot(small.out) == before


def test_a_tile_kernel_whose_runs_all_failed_is_left_out(small: Paths, tmp_path: Path) -> None:
    if not PB.is_dir():
        pytest.skip(f"real protobufs not found at {PB} (../shared is absent on a fresh clone)")
    msg = TuningData.FromString((PB / "op_tuning_data.pb").read_bytes())
    for run in msg.modules[0].runs:
        run.error = True
    f = tmp_path / "op_tuning_data.pb"
    f.write_bytes(msg.SerializeToString())
    with Ranker.load(small.out, tmp_path / "work") as ranker:
        rankings = ranker.rank(f)
    assert len(rankings) == len(_configs_of(f)) == len(_configs_of(PB / "op_tuning_data.pb")) - 1


def test_a_file_whose_name_holds_a_comma_and_a_space_is_ranked(small: Paths, tmp_path: Path, capsys) -> None:
    """`rank` writes its own sample_submission.csv: a name that needs quoting stays one field, as in
    every CSV tpurank writes, and the ranking names the file as it is."""
    import csv

    src = _test_file(small, "tile:xla")
    f = tmp_path / "run 1,final.npz"
    f.write_bytes(src.read_bytes())
    out = tmp_path / "ranking.csv"
    argv = ["rank", str(f), "--models", str(small.out), "--out", str(out), "--work", str(tmp_path / "work")]
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    assert f"{f.name} [" in capsys.readouterr().out
    with out.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert rows and {r["file"] for r in rows} == {str(f)}
    sample = (tmp_path / "work").rglob("sample_submission.csv")
    assert [line for s in sample for line in s.read_text().splitlines()[1:]] == ['"tile:xla:run 1,final",0']
    with Ranker.load(small.out, tmp_path / "work2") as ranker:
        (same,) = ranker.rank(src)
    np.testing.assert_array_equal([int(r["config"]) for r in rows], same.order)  # the same graph, same order
