"""Tabular features: hand-made graphs with hand-computed values, and the `features` stage on tiny data."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from tpurank.features.layout import configurable_pairs, layout_features
from tpurank.features.mxu import MXU_COLUMNS
from tpurank.features.tile import tile_features
from tpurank.prepare.cache import PreparedGraph

F32, BF16 = 2 + 11, 2 + 16  # one-hot element-type columns (XLA PrimitiveType + 2)


def node_row(shape: tuple[int, ...], type_col: int, own_layout: tuple[int, ...] = (), root: bool = False):
    raw = np.zeros(140, dtype=np.float32)
    raw[0] = float(root)
    raw[21 : 21 + len(shape)] = shape
    raw[27] = sum(shape)
    raw[28] = math.prod(shape)
    raw[type_col] = 1.0
    raw[134 : 134 + len(own_layout)] = own_layout
    return raw


def graph(kind: str, raw, opcode, edges, config_nodes, configs, runtime, count) -> PreparedGraph:
    raw = np.stack(raw)
    u = len(configs)
    return PreparedGraph(
        id=f"{kind}:xla:g" if kind == "tile" else "layout:xla:random:g",
        collection="tile:xla" if kind == "tile" else "layout:xla:random",
        split="train",
        stem="g",
        node_feat=raw.copy(),
        node_feat_raw=raw,
        node_opcode=np.asarray(opcode, dtype=np.uint8),
        edge_index=np.asarray(edges, dtype=np.int32).reshape(-1, 2),
        node_map=np.arange(len(raw)),
        config_nodes=np.asarray(config_nodes, dtype=np.int32),
        configs=np.asarray(configs, dtype=np.int8 if kind == "layout" else np.float32),
        runtime_min=np.asarray(runtime, dtype=np.float64),
        runtime_mean=np.asarray(runtime, dtype=np.float64),
        count=np.asarray(count, dtype=np.int32),
        inverse=np.arange(u, dtype=np.int32),
        config_runtime=np.asarray(runtime, dtype=np.float64),
        is_test=False,
    )


def layout_cfg(out0=(), in1=(), out1=()) -> np.ndarray:
    """(2, 18) config of the two-node graph: node 0's output, node 1's input and output layouts."""
    c = np.full((2, 18), -1, dtype=np.int8)
    c[0, : len(out0)] = out0
    c[1, 6 : 6 + len(in1)] = in1
    c[1, : len(out1)] = out1
    return c


@pytest.fixture
def two_node_layout() -> PreparedGraph:
    # node 0: conv f32 (256, 100) -> node 1: reshape bf16 (256, 100); both row-major ([1, 0]) by default.
    raw = [node_row((256, 100), F32, (1, 0)), node_row((256, 100), BF16, (1, 0))]
    configs = [
        layout_cfg(),  # all default
        layout_cfg(out0=(0, 1), in1=(1, 0)),  # producer writes column-major, consumer wants row-major: copy
        layout_cfg(out0=(0, 1), in1=(0, 1), out1=(0, 1)),  # both column-major, consumer agrees: no copy
    ]
    return graph("layout", raw, [26, 75], [[1, 0]], [0, 1], configs, [1.0, 2.0, 3.0], [5, 1, 2])


def test_layout_features_of_two_node_graph_match_hand_computed_values(two_node_layout):
    df = layout_features(two_node_layout)
    assert len(df) == 3
    col = lambda name: df[name].to_numpy().tolist()  # noqa: E731
    # default layouts: minor dim 100 -> 128 lanes, second-minor 256 (multiple of 8): 32768 padded elements
    # of 25600 -> 7168 wasted (x4 bytes f32 = 28672, x2 bytes bf16 = 14336).
    # config 1: node 0 minor is 256 (aligned), second-minor 100 -> 104: 26624 - 25600 = 1024 x 4 bytes.
    # config 2: node 1 also column-major: 1024 x 2 bytes.
    waste = [28672 + 14336, 4096 + 14336, 4096 + 2048]
    np.testing.assert_allclose(col("pad_waste_log"), np.log1p(waste))
    np.testing.assert_allclose(col("pad_ratio"), [(153600 + w) / 153600 for w in waste])
    assert col("n_set") == [0, 2, 2]
    assert col("frac_default") == [1.0, 0.0, 0.0]
    assert col("n_out_set") == [0, 1, 2]
    assert col("n_in_set") == [0, 1, 1]
    assert col("n_conv_def") == [1, 0, 0]
    assert col("n_conv_second") == [0, 1, 1]  # minor dim 0 of a rank-2 tensor = the second-to-last dim
    assert col("n_reshape_def") == [1, 1, 0]
    assert col("n_reshape_second") == [0, 0, 1]
    assert col("chg_minor_aligned128") == [0, 1, 2]
    assert col("chg_second_aligned8") == [0, 0, 0]  # 100 is not a multiple of 8
    np.testing.assert_allclose(col("chg_bytes_log"), np.log1p([0, 102400, 102400 + 51200]))
    np.testing.assert_allclose(col("chg_pad_waste_log"), np.log1p([0, 4096, 4096 + 2048]))
    assert col("minor_aligned128_frac") == [0.0, 0.5, 1.0]
    # the forced copy: only config 1, costing the producer's 256 x 100 x 4 bytes
    assert col("copies_direct") == [0, 1, 0]
    np.testing.assert_allclose(col("copy_bytes_direct_log"), np.log1p([0, 102400, 0]))
    assert col("outdiff_direct") == [0, 1, 0]
    assert col("copies_2hop") == [0, 0, 0]
    assert col("pos0_mean") == [-1.0, -0.5, 0.0]
    assert col("count") == [5, 1, 2]
    assert df["g_cfg_nodes"].eq(2).all() and df["g_pairs_direct"].eq(1).all() and df["g_nodes"].eq(2).all()


def test_layout_features_do_not_depend_on_chunking(two_node_layout):
    whole = layout_features(two_node_layout)
    chunked = layout_features(two_node_layout, chunk_cells=1)  # one config per step
    pd.testing.assert_frame_equal(whole, chunked)
    subset = layout_features(two_node_layout, rows=np.array([2, 0]))
    pd.testing.assert_frame_equal(subset, whole.iloc[[2, 0]].reset_index(drop=True))


def test_configurable_pairs_direct_and_through_one_node():
    # 0 (cfg) <- 2 (not cfg) <- 1 (cfg), and 3 (cfg) uses 1 directly; edges are [user, operand]
    edges = np.array([[2, 0], [1, 2], [3, 1]])
    direct, two_hop = configurable_pairs(edges, np.array([0, 1, 3]), 4)
    assert direct.tolist() == [[1, 2]]  # producer 1 (index 1 of config_nodes) -> consumer 3 (index 2)
    assert two_hop.tolist() == [[0, 1]]


def test_tile_features_tiles_and_padding():
    raw = [node_row((1280, 320), F32), node_row((1280, 320), F32, root=True)]
    configs = np.zeros((2, 24), dtype=np.float32)
    configs[0, 8:16] = [20, 10, 0, 0, 0, 0, 30, 200]
    configs[1, 8:16] = [300, 100, 0, 0, 0, 0, 400, 30000]
    g = graph("tile", raw, [63, 27], [[1, 0]], [], configs, [1.0, 1.5], [1, 3])
    df = tile_features(g)
    assert df["o_tiles0"].tolist() == [64, 5] and df["o_tiles1"].tolist() == [32, 4]
    np.testing.assert_allclose(df["o_tiles_log"], np.log([64 * 32, 5 * 4]))
    # 5 x 300 = 1500 rows and 4 x 100 = 400 columns cover 1280 x 320
    np.testing.assert_allclose(df["o_pad_waste"], [0.0, 1500 * 400 / (1280 * 320) - 1])
    np.testing.assert_allclose(df["o_prod_log"], np.log1p([200, 30000]))
    assert df["o_ndims"].tolist() == [2, 2] and df["k_ndims"].tolist() == [0, 0]
    assert df["g_op63"].eq(1).all() and df["g_op27"].eq(1).all() and df["g_op26"].eq(0).all()
    np.testing.assert_allclose(df["g_out_numel_log"], np.log1p(1280 * 320))
    assert df["count"].tolist() == [1, 3]


# ---- the `features` stage on tiny synthetic data --------------------------------------------------


@pytest.fixture
def own_out(tiny_paths, tmp_path):
    """A fresh out folder over the shared tiny prepared cache."""
    from tpurank.core.paths import Paths

    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "prepared").symlink_to(tiny_paths.prepared, target_is_directory=True)
    return Paths(data=tiny_paths.data, out=tmp_path)


def test_features_stage_builds_every_table_and_resumes(own_out):
    from tpurank.core.config import Config
    from tpurank.features import io
    from tpurank.features.stage import build_features
    from tpurank.prepare.cache import iter_prepared, read_index

    index = read_index(own_out.prepared)
    collections = sorted(set(index["collection"]))
    first = build_features(own_out, Config(), collections, ["train", "valid", "test"])
    assert first and not any(s.get("reused") for s in first.values())
    for (collection, split), summary in first.items():
        df = io.read_table(own_out, collection, split)
        graphs = list(iter_prepared(own_out.prepared, collection, split))
        assert summary["rows"] == len(df) == sum(g.num_unique for g in graphs)
        assert set(df["graph"]) == {g.id for g in graphs}
        feats = df[io.feature_columns(df)].to_numpy()
        assert np.isfinite(feats).all(), (collection, split)
        inverse = io.read_per_graph(own_out, collection, split, "inverse")
        runtime = io.read_per_graph(own_out, collection, split, "runtime")
        assert {f"{collection}:{k}" for k in inverse} == {g.id for g in graphs}
        for g in graphs:
            np.testing.assert_array_equal(inverse[g.stem], g.inverse)
            np.testing.assert_array_equal(runtime[g.stem], g.config_runtime)
    again = build_features(own_out, Config(), collections, ["train", "valid", "test"])
    assert all(s.get("reused") for s in again.values())

    capped = Config()
    capped.features.max_configs_per_graph = 3
    redo = build_features(own_out, capped, collections[:1], ["train", "valid"])
    assert not redo[(collections[0], "train")].get("reused")  # the config changed: rebuilt
    train = io.read_table(own_out, collections[0], "train")
    assert train.groupby("graph").size().max() <= 3
    valid = io.read_table(own_out, collections[0], "valid")  # the cap applies to train graphs only
    assert len(valid) == sum(g.num_unique for g in iter_prepared(own_out.prepared, collections[0], "valid"))


def test_features_stage_without_prepared_cache_is_a_one_line_error(tmp_path, capsys):
    from tpurank.cli import main

    assert main(["features", "--out-dir", str(tmp_path), "--data-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no prepared index" in err and "prepare" in err


@pytest.mark.parametrize("share", [0.0, 0.25, 1.0])
def test_capped_sampler_keeps_each_graphs_fastest_configs(share: float) -> None:
    from tpurank.features.stage import table_rows

    runtime = np.random.default_rng(1).permutation(200).astype(np.float64) + 1.0
    g = graph("tile", [node_row((8, 128), F32)], [1], [], [], np.zeros((200, 24)), runtime, np.ones(200))
    rows = table_rows(g, 40, seed=0, fastest_share=share)
    assert len(rows) == len(set(rows.tolist())) == 40 and (np.diff(rows) > 0).all()
    fastest = np.argsort(g.runtime_mean)[: int(round(40 * share))]
    assert set(fastest.tolist()) <= set(rows.tolist())  # the fastest 40 x share are always kept
    if share < 1.0:  # the rest is a draw from the slower configs, not the next-fastest ones
        rest = np.setdiff1d(rows, fastest)
        assert g.runtime_mean[rest].max() > np.sort(g.runtime_mean)[39]
    valid = replace(g, split="valid")
    assert len(table_rows(valid, 40, seed=0, fastest_share=share)) == 200  # only train graphs are capped


def test_mxu_columns_are_added_where_asked(two_node_layout):
    """Node 0 is a convolution whose dimension numbers are all 0 (the fixture's): its output is
    feature-minor exactly where a config writes it column-major ([0, 1]); node 1 is a reshape."""
    plain = layout_features(two_node_layout)
    assert not [c for c in plain.columns if c.startswith("mxu_")]
    df = layout_features(two_node_layout, mxu=True)
    assert set(df.columns) - set(plain.columns) == set(MXU_COLUMNS)
    assert df["mxu_out_feature_minor"].tolist() == [0.0, 1.0, 1.0]
    assert df["mxu_in_other_minor"].tolist() == [0.0] * 3  # the convolution's input layout is never set
    pd.testing.assert_frame_equal(df[plain.columns], plain)


def test_a_model_reads_only_tables_features_built_for_its_config(own_out):
    """LightGBM never builds a table: a missing or unfinished one, or one built with other settings,
    is one error naming the table and the command that builds it."""
    import pytest

    from tpurank.core.config import Config
    from tpurank.core.errors import TpurankError
    from tpurank.features import io
    from tpurank.features.stage import build_features, require_tables

    collection, missing = "tile:xla", "feature table missing or unfinished; run `tpurank features"
    with pytest.raises(TpurankError, match=missing):
        require_tables(own_out, Config(), collection, ["train"])
    assert not io.table_path(own_out, collection, "train").exists()  # nothing built on the way
    build_features(own_out, Config(), [collection], ["train", "valid"])
    assert require_tables(own_out, Config(), collection, ["train", "valid"]) == ["train", "valid"]
    with pytest.raises(TpurankError, match=missing):  # the test split was not built
        require_tables(own_out, Config(), collection, ["test"])
    capped = Config()
    capped.features.max_configs_per_graph = 3
    with pytest.raises(TpurankError, match="built from other prepared graphs or settings"):
        require_tables(own_out, capped.for_collection(collection), collection, ["train"])
    io.meta_path(own_out, collection, "train").unlink()  # a build killed before its sidecar
    with pytest.raises(TpurankError, match=missing):
        require_tables(own_out, Config(), collection, ["train"])
