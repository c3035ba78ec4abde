"""The score stage: perfect and reversed rankings, ties, official subsets, JSON and bad input."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from helpers import chain_layout_graph

from tpurank import cli
from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.npz import TileGraph, save_graph
from tpurank.data.subsets import EVAL_MAX_CONFIGS, spread_configs
from tpurank.submission.score import load_runtimes, score_csv

# Distinct runtimes (no ties), so a perfect ranking has tau exactly 1.
TILE_RT = {"t1": ([40, 10, 30, 20, 50, 60, 70], 10), "t2": ([9, 3, 6], 3)}
LAYOUT_RT = {
    "layout:xla:random": {"g1": [50, 10, 40, 20, 30, 60]},
    "layout:nlp:default": {"g2": [7, 5, 9, 8, 6]},
}


def make_mini_dataset(root):
    """A valid split with 2 tile and 2 layout graphs in the real file format (tiny graphs)."""
    npz = root / NPZ_SUBDIR
    rng = np.random.default_rng(0)
    for stem, (rt, norm) in TILE_RT.items():
        c = len(rt)
        g = TileGraph(
            node_feat=rng.random((3, 140), dtype=np.float32),
            node_opcode=np.array([1, 2, 3], np.uint8),
            edge_index=np.array([[1, 0], [2, 1]], np.int64),
            config_feat=rng.random((c, 24), dtype=np.float32),
            config_runtime=np.array(rt, np.int64),
            config_runtime_normalizers=np.full(c, norm, np.int64),
        )
        save_graph(npz / "tile" / "xla" / "valid" / f"{stem}.npz", g)
    for collection, graphs in LAYOUT_RT.items():
        for stem, rt in graphs.items():
            g = chain_layout_graph(np.array(rt), rng)
            save_graph(npz.joinpath(*collection.split(":"), "valid", f"{stem}.npz"), g)
    return root


@pytest.fixture()
def mini(tmp_path):
    return Paths(data=make_mini_dataset(tmp_path / "data"), out=tmp_path / "out")


def write_ranking(path, reverse: bool = False, swap_layout_top: bool = False):
    """A CSV that ranks every mini graph by its true runtime (or the reverse)."""
    lines = ["ID,TopConfigs"]
    for stem, (rt, _) in TILE_RT.items():
        order = np.argsort(rt)[::-1] if reverse else np.argsort(rt)
        lines.append(f"tile:xla:{stem}," + ";".join(map(str, order[:5])))
    for collection, graphs in LAYOUT_RT.items():
        for stem, rt in graphs.items():
            order = list(np.argsort(rt)[::-1] if reverse else np.argsort(rt))
            if swap_layout_top:
                order[0], order[1] = order[1], order[0]
            lines.append(f"{collection}:{stem}," + ";".join(map(str, order)))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_true_runtime_ranking_scores_one(mini, tmp_path):
    rows, summary = score_csv(write_ranking(tmp_path / "v.csv"), mini, "valid")
    assert len(rows) == 4
    for c in ("tile:xla", "layout:xla:random", "layout:nlp:default"):
        assert summary[c]["score"] == pytest.approx(1.0)
    assert summary["layout:xla:random"]["pair_accuracy"] == pytest.approx(1.0)


def test_reversed_ranking(mini, tmp_path):
    _, summary = score_csv(write_ranking(tmp_path / "v.csv", reverse=True), mini, "valid")
    assert summary["layout:xla:random"]["score"] == pytest.approx(-1.0)
    assert summary["layout:nlp:default"]["score"] == pytest.approx(-1.0)
    # t1: top 5 of the reverse are 70, 60, 50, 40, 30 -> 2 - 30/10 = -1; t2: all 3 -> 1.0
    assert summary["tile:xla"]["score"] == pytest.approx((-1.0 + 1.0) / 2)


def test_score_cli_table_and_json(mini, tmp_path, capsys):
    csv = write_ranking(tmp_path / "v.csv", swap_layout_top=True)
    out_json = tmp_path / "s.json"
    common = ["--data-dir", str(mini.data)]  # score writes nothing to an out folder: --out-dir is refused
    assert cli.main(["score", "--submission", str(csv), "--json", str(out_json), *common]) == 0
    table = capsys.readouterr().out
    assert "layout:xla:random" in table and "overall (3 of 5)" in table
    scores = json.loads(out_json.read_text())
    # one swapped pair out of 15 (6 configs) and out of 10 (5 configs)
    assert scores["layout:xla:random"] == pytest.approx(13 / 15)
    assert scores["layout:nlp:default"] == pytest.approx(8 / 10)
    assert scores["tile:xla"] == pytest.approx(1.0)
    assert scores["overall"] == pytest.approx((1.0 + 13 / 15 + 0.8) / 3)
    assert set(scores) == {"tile:xla", "layout:xla:random", "layout:nlp:default", "overall"}


def test_official_subsets_restrict_the_permutation(mini, tmp_path):
    # g1 runtimes [50, 10, 40, 20, 30, 60]; the subset {1, 3, 5} has runtimes 10, 20, 60
    csv = tmp_path / "v.csv"
    write_ranking(csv)
    lines = csv.read_text().splitlines()
    lines = [
        "layout:xla:random:g1,0;1;2;3;4;5" if line.startswith("layout:xla:random:g1") else line
        for line in lines
    ]
    csv.write_text("\n".join(lines) + "\n")
    subsets = tmp_path / "eval_indices"
    subsets.mkdir()
    (subsets / "xla_random.json").write_text(json.dumps({"g1": [5, 3, 1]}))
    _, full = score_csv(csv, mini, "valid")
    rows, sub = score_csv(csv, mini, "valid", subsets)
    assert full["layout:xla:random"]["score"] < 0.5
    assert sub["layout:xla:random"]["score"] == pytest.approx(1.0)  # 1, 3, 5 are in runtime order
    g1 = next(r for r in rows if r["id"] == "layout:xla:random:g1")
    assert g1["subset"] and g1["configs"] == 3
    g2 = next(r for r in rows if r["id"] == "layout:nlp:default:g2")
    assert not g2["subset"] and g2["configs"] == 5


def test_real_sample_true_ranking_with_ties(sample_root, tmp_path):
    """unet_3d has runtimes measured equal: tau-b of the true order is then sqrt(untied/all) < 1."""
    paths = Paths(data=sample_root, out=tmp_path)
    npz = sample_root / NPZ_SUBDIR
    tile = npz / "tile/xla/valid/inception_v3_batch_128_train_426e203f19335d17.npz"
    unet = npz / "layout/xla/default/valid/unet_3d.4x4.bf16.npz"
    y_tile = load_runtimes(tile, "tile:xla")
    rt = load_runtimes(unet, "layout:xla:default")
    csv = tmp_path / "v.csv"
    csv.write_text(
        "ID,TopConfigs\n"
        f"tile:xla:{tile.stem}," + ";".join(map(str, np.argsort(y_tile, kind="stable")[:5])) + "\n"
        f"layout:xla:default:{unet.stem}," + ";".join(map(str, np.argsort(rt, kind="stable"))) + "\n"
    )
    rows, summary = score_csv(csv, paths, "valid", sample_root / "eval_indices")
    assert summary["tile:xla"]["score"] == pytest.approx(1.0)
    assert len(rt) > EVAL_MAX_CONFIGS  # without the official subset: 1,000 configs spread evenly
    scored = rt[spread_configs(len(rt))]
    _, counts = np.unique(scored, return_counts=True)
    n = len(scored)
    n0, n1 = n * (n - 1) / 2, float((counts * (counts - 1) / 2).sum())
    assert n1 > 0
    spread_rows, spread = score_csv(csv, paths, "valid")
    assert spread["layout:xla:default"]["score"] == pytest.approx(math.sqrt((n0 - n1) / n0))
    assert spread["layout:xla:default"]["pair_accuracy"] == pytest.approx(1.0)
    assert not spread_rows[1]["subset"] and spread_rows[1]["configs"] == EVAL_MAX_CONFIGS
    assert rows[1]["subset"] and rows[1]["configs"] == 1000


def test_score_refuses_invalid_csv(mini, tmp_path, capsys):
    csv = write_ranking(tmp_path / "v.csv")
    csv.write_text(csv.read_text().replace("tile:xla:t2,", "tile:xla:t9,"))
    with pytest.raises(TpurankError, match="cannot score: .*unknown ID 'tile:xla:t9'.*and 1 more"):
        score_csv(csv, mini, "valid")
    common = ["--data-dir", str(mini.data)]  # score writes nothing to an out folder: --out-dir is refused
    assert cli.main(["score", "--submission", str(csv), *common]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("tpurank score: error: cannot score")


def test_csv_for_some_collections_is_scored_on_those(mini, tmp_path):
    csv = write_ranking(tmp_path / "v.csv")
    lines = [line for line in csv.read_text().splitlines() if not line.startswith("tile:")]
    csv.write_text("\n".join(lines) + "\n")
    _, summary = score_csv(csv, mini, "valid")
    assert list(summary) == ["layout:xla:random", "layout:nlp:default"]
    csv.write_text("\n".join(lines[:-1]) + "\n")  # drops g2: its collection is then absent too
    _, summary = score_csv(csv, mini, "valid")
    assert list(summary) == ["layout:xla:random"]
    csv.write_text(
        "\n".join(line for line in write_ranking(csv).read_text().splitlines() if "t2," not in line)
    )
    with pytest.raises(TpurankError, match="missing ID tile:xla:t2"):  # a graph of a present collection
        score_csv(csv, mini, "valid")
    csv.write_text("ID,TopConfigs\n")
    with pytest.raises(TpurankError, match="no row names a valid graph"):
        score_csv(csv, mini, "valid")
