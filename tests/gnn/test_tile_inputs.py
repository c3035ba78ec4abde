"""The GNN's tile-aware inputs (`gnn.tile_features`, `gnn.dim_features`) and the MXU flags they share with
LightGBM: hand-worked layouts against the TPU's (8, 128) tile and its matrix unit."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_cfg, small_gnn

from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.features.layout import effective_layout
from tpurank.features.mxu import CONVOLUTION, DOT, MxuDims, mxu_columns, mxu_flags
from tpurank.gnn.data import from_prepared, load_split, make_batch
from tpurank.gnn.device import Runtime
from tpurank.gnn.entry import GNN
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.gst.segments import segment_batch, split_graph
from tpurank.gnn.nets.tile_inputs import (
    DIM_COLUMNS,
    NODE_TILE_INPUTS,
    TILE_INPUTS,
    NodeShapes,
    node_tile_inputs,
    tile_inputs,
)
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.scoring import score_rows
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_model
from tpurank.gnn.training.loop import fit
from tpurank.prepare.cache import PreparedGraph

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py

RESHAPE = 75


def shapes(
    dims: list[list[int]],
    own: list[list[int]],
    opcode: list[int] | None = None,
    conv: list[tuple[int, int, int]] | None = None,
) -> NodeShapes:
    """Nodes of these shapes and own layouts; `conv`: (input feature, kernel input feature, output
    feature) dimension numbers of each node (convolutions read them)."""
    raw = np.zeros((len(dims), 140), dtype=np.float32)
    for i, (d, o) in enumerate(zip(dims, own, strict=True)):
        raw[i, 21 : 21 + len(d)] = d
        raw[i, 134 : 134 + len(o)] = o
        if conv:
            raw[i, [94, 99, 106]] = conv[i]
    return NodeShapes.from_raw(raw, np.asarray(opcode or [RESHAPE] * len(dims)))


def config(
    *layouts: list[int], inputs: list[list[int]] | None = None, kernels: list[list[int]] | None = None
) -> np.ndarray:
    """One config: each node's output layout, and its input and kernel layouts where given (-1: default)."""
    c = np.full((1, len(layouts), 18), -1, dtype=np.int8)
    for k, lay in enumerate(layouts):
        c[0, k, : len(lay)] = lay
        for start, given in ((6, inputs), (12, kernels)):
            if given:
                c[0, k, start : start + len(given[k])] = given[k]
    return c


@pytest.mark.parametrize(
    ("layout", "minor", "second"),
    [([0, 1], 130, 64), ([1, 0], 64, 130), ([-1, -1], 64, 130)],  # -1: the node's own layout [1, 0]
)
def test_the_configured_layout_decides_which_dims_meet_the_tile(
    layout: list[int], minor: int, second: int
) -> None:
    """A (130, 64) array: dim 0 minor-most pads 130 to 256 lanes; dim 1 minor-most fills half a lane."""
    s = shapes([[130, 64]], [[1, 0]])
    x = tile_inputs(config(layout), s)[0, 0]
    assert x.shape == (TILE_INPUTS,)
    lanes = -(-minor // 128) * 128
    sublanes = -(-second // 8) * 8
    assert x[0] == pytest.approx((minor % 128) / 128)
    assert x[1] == pytest.approx(np.log1p(lanes / 128))
    assert x[2] == pytest.approx(minor / lanes)
    assert x[3] == pytest.approx((second % 8) / 8)
    assert x[4] == pytest.approx(second / sublanes)
    assert x[5] == pytest.approx(np.log(lanes * sublanes / (minor * second)), rel=1e-5)
    assert x[6] == (1.0 if layout == [0, 1] else 0.0)  # moved away from the node's own minor dim


def test_a_scalar_or_vector_node_gets_zeros_where_it_has_no_such_dimension() -> None:
    s = shapes([[], [300]], [[], [0]])
    x = tile_inputs(config([], [0]), s)[0]
    assert not x[0].any()  # rank 0: nothing is tiled
    assert x[1, 2] == pytest.approx(300 / 384) and x[1, 3] == 0 and x[1, 4] == 0  # rank 1: lanes only
    assert x[1, 5] == pytest.approx(np.log(384 / 300), rel=1e-5)


def test_many_configs_at_once_match_one_at_a_time() -> None:
    rng = np.random.default_rng(0)
    s = shapes([[7, 300, 129], [1024, 8], [5, 6, 7]], [[2, 1, 0], [1, 0], [0, 1, 2]])
    perms = [rng.permutation(3).tolist() for _ in range(5)]
    configs = np.concatenate([config(p, [0, 1] if p[0] < p[1] else [1, 0], p) for p in perms])
    together = tile_inputs(configs, s)
    alone = np.concatenate([tile_inputs(configs[i : i + 1], s) for i in range(len(configs))])
    np.testing.assert_array_equal(together, alone)
    assert together.dtype == np.float32 and np.isfinite(together).all()


# a convolution NHWC (8, 14, 14, 256) from an NHWC input and an HWIO kernel: input feature dim 3,
# kernel input feature dim 2, output feature dim 3; a dot (512, 1024) = (512, K) x (K, 1024)
CONV_DIMS = (3, 2, 3)


@pytest.mark.parametrize(
    ("inp", "ker", "want_in", "want_k"),
    [
        ([3, 2, 1, 0], [2, 3, 1, 0], True, True),  # features minor-most in both: as the MXU reads them
        ([1, 2, 3, 0], [3, 2, 1, 0], False, False),  # width / output features minor: a transpose each
        ([], [], False, False),  # defaults: the compiler decides (the config embedding sees the -1s)
    ],
)
def test_a_convolution_reads_its_operands_contraction_minor(inp, ker, want_in, want_k) -> None:
    s = shapes([[8, 14, 14, 256]], [[3, 2, 1, 0]], opcode=[CONVOLUTION], conv=[CONV_DIMS])
    x = tile_inputs(config([], inputs=[inp], kernels=[ker]), s)[0, 0]
    assert x.shape == (TILE_INPUTS,)
    assert (x[7], x[8]) == (float(want_in), float(want_k))
    assert x[9] == 1.0  # its own layout [3, 2, 1, 0] keeps the output feature-minor


@pytest.mark.parametrize(
    ("inp", "ker", "out", "want"),
    [
        ([1, 0], [0, 1], [1, 0], (True, True, True)),  # lhs contracts its last dim, rhs its first
        ([0, 1], [1, 0], [0, 1], (False, False, False)),
        ([2, 1, 0], [1, 2, 0], [], (True, True, False)),  # batched: rank 3 operands; own output [0, 1]
    ],
)
def test_a_dot_is_read_in_xlas_canonical_form(inp, ker, out, want) -> None:
    """No dot dimension numbers in the data: lhs [batch, m, k] contracts its last dim, rhs [batch, k, n]
    its second-to-last; the operands' ranks are those of their configured layouts."""
    s = shapes([[512, 1024]], [[0, 1]], opcode=[DOT])
    x = tile_inputs(config(out, inputs=[inp], kernels=[ker]), s)[0, 0]
    assert tuple(bool(v) for v in x[7:10]) == want


def test_only_convolutions_and_dots_get_mxu_flags() -> None:
    s = shapes([[8, 256], [8, 256]], [[1, 0], [1, 0]], opcode=[RESHAPE, DOT])
    x = tile_inputs(config([1, 0], [1, 0], inputs=[[1, 0], [1, 0]]), s)[0]
    assert not x[0, 7:10].any() and x[1, 7:10].tolist() == [1.0, 0.0, 1.0]


def test_lightgbm_counts_the_mxu_flags_of_each_config() -> None:
    """Two convolutions: config 0 reads both inputs contraction-minor, config 1 one of them
    width-minor; the bytes of the slow operand are the node's output bytes (its tensor size proxy)."""
    s = shapes([[8, 14, 14, 256]] * 2, [[3, 2, 1, 0]] * 2, opcode=[CONVOLUTION] * 2, conv=[CONV_DIMS] * 2)
    configs = np.concatenate(
        [
            config([], [], inputs=[[3, 2, 1, 0], [3, 2, 1, 0]]),
            config([], [], inputs=[[3, 2, 1, 0], [2, 3, 1, 0]]),
        ]
    )
    eff, _ = effective_layout(configs, s.own)
    cols = mxu_columns(mxu_flags(configs, eff, s.mxu), nbytes=np.array([100.0, 300.0]))
    assert cols["mxu_in_contract_minor"].tolist() == [2, 1]
    assert cols["mxu_in_other_minor"].tolist() == [0, 1]
    assert cols["mxu_k_contract_minor"].tolist() == [0, 0] and cols["mxu_k_other_minor"].tolist() == [0, 0]
    assert cols["mxu_out_feature_minor"].tolist() == [2, 2]
    assert cols["mxu_other_minor_bytes_log"] == pytest.approx([0.0, np.log1p(300.0)])


def test_mxu_dims_of_real_convolutions_come_from_their_dimension_numbers(sample_root: Path) -> None:
    """The real unet3d graph trains: beside its forward convolutions (input feature dim 4) its backward
    pass has weight-gradient ones contracting over dim 0, and kernels contract over dim 3 or 4, so no
    fixed dimension would do: each convolution's own dimension numbers are read."""
    d = np.load(sample_root / NPZ_SUBDIR / "layout/xla/default/train/unet3d.npz")
    ids = d["node_config_ids"]
    raw = d["node_feat"][ids]
    dims = MxuDims.from_raw(raw, d["node_opcode"][ids])
    conv = d["node_opcode"][ids] == CONVOLUTION
    assert conv.sum() == 53
    np.testing.assert_array_equal(dims.contract_in[conv], raw[conv, 94])
    np.testing.assert_array_equal(dims.contract_k[conv], raw[conv, 99])
    np.testing.assert_array_equal(dims.out_feature[conv], raw[conv, 106])
    assert set(dims.contract_in[conv]) == {0, 4} and set(dims.contract_k[conv]) == {0, 3, 4}
    assert (dims.contract_in[~conv] == -1).all() and (dims.kind[~conv] == 0).all()


@pytest.mark.parametrize(
    ("size", "occupancy", "tiles"),
    [(130, 2 / 128, 2), (128, 1.0, 1), (256, 1.0, 2), (3, 3 / 128, 1), (0, 0.0, 0)],
)
def test_each_dimension_column_meets_the_128_lane_tile(size: int, occupancy: float, tiles: int) -> None:
    """The 3rd place's mod/div 128 of the 24 size columns: how full the last tile is, and how many."""
    raw = np.zeros((1, 140), dtype=np.float32)
    raw[0, DIM_COLUMNS] = size
    x = node_tile_inputs(raw)[0]
    assert x.shape == (NODE_TILE_INPUTS,) == (48,)
    assert x[:24] == pytest.approx([occupancy] * 24)
    assert x[24:] == pytest.approx([np.log1p(tiles)] * 24)


def test_dimension_columns_are_the_shape_dimensions_window_and_padding() -> None:
    raw = np.zeros((1, 140), dtype=np.float32)
    raw[0, 21] = 130  # shape dim 0
    raw[0, 27:29] = [1e6, 1e9]  # sum and product: not a dimension
    raw[0, 31:37] = [3, 2, 1, 0, 0, 0]  # 'dimensions': indices of dimensions, not sizes
    raw[0, 45] = 2  # window stride: not among them
    raw[0, 53] = -3  # a negative padding pads nothing
    x = node_tile_inputs(raw)[0]
    assert x[0] == pytest.approx(2 / 128) and np.count_nonzero(x[:24]) == 1 and np.count_nonzero(x) == 2


def test_a_matrix_vector_dot_contracts_its_vectors_only_dimension() -> None:
    """A rank-1 kernel (its layout [0]) is read contraction-minor; a rank-0 output is never feature-minor."""
    s = shapes([[512], []], [[0], []], opcode=[DOT, DOT])
    x = tile_inputs(config([0], [], inputs=[[1, 0], [0]], kernels=[[0], [0]]), s)[0]
    assert x[0, 7:10].tolist() == [1.0, 1.0, 1.0]
    assert x[1, 9] == 0.0


def shaped_graph(seed: int) -> PreparedGraph:
    """`prepared_graph` with real shape dims and own layouts at its nodes (the tile-aware inputs read them)."""
    p = prepared_graph("layout", seed=seed)
    r = np.random.default_rng(seed)
    raw = np.zeros((len(p.node_opcode), 140), np.float32)
    raw[:, 21:24] = r.integers(1, 300, size=(len(raw), 3))
    raw[:, 134:137] = [2, 1, 0]
    return replace(p, node_feat_raw=raw, configs=r.integers(-1, 3, size=p.configs.shape).astype(np.int8))


def test_tile_features_feed_the_configured_layout_to_the_model() -> None:
    """A model with `tile_features` reads `make_batch(..., tile=True)`'s inputs: they change its scores,
    configs scored together or alone still get the same costs, and gradients reach the new layer."""
    g = from_prepared(shaped_graph(seed=5))
    torch.manual_seed(0)
    m = small_gnn("layout", FEAT, hidden=16, layers=2, tile_features=True).eval()
    rows = np.arange(8)
    with pytest.raises(ValueError, match="tile=True"):
        m(make_batch([g], [rows]))
    batch = make_batch([g], [rows], tile=True)
    assert batch.config_tile.shape == (8, len(g.config_nodes), TILE_INPUTS)
    together = score_rows(m, g, rows, chunk=8, device=torch.device("cpu"), precision="fp32")
    alone = score_rows(m, g, rows, chunk=1, device=torch.device("cpu"), precision="fp32")
    np.testing.assert_allclose(together, alone, atol=1e-5)
    with torch.no_grad():
        m.tile_in.weight.zero_()
    blind = score_rows(m, g, rows, chunk=8, device=torch.device("cpu"), precision="fp32")
    assert not np.allclose(blind, together)  # the inputs mattered
    m.train()
    m(make_batch([g], [rows], tile=True)).sum().backward()
    assert m.tile_in.weight.grad.abs().sum() > 0


def test_segments_carry_their_nodes_tile_inputs() -> None:
    g = from_prepared(shaped_graph(seed=6))
    full = make_batch([g], [np.arange(6)], tile=True)
    segs = split_graph(g, 10)
    part = segment_batch(full, segs)
    cols = np.concatenate([s.config_cols for s in segs])
    np.testing.assert_array_equal(part.config_tile.numpy(), full.config_tile.numpy()[:, cols])


def test_a_model_with_tile_features_trains_saves_and_predicts(tiny_paths: Paths, tmp_path) -> None:
    paths = Paths(data=tiny_paths.data, out=tmp_path)
    collection = "layout:xla:random"
    train = load_split(tiny_paths, collection, "train", progress=False)
    valid = load_split(tiny_paths, collection, "valid", progress=False)
    cfg = small_cfg(max_steps=3, eval_every=3, graphs_per_batch=2, configs_per_graph=8, tile_features=True)
    model, _ = fit(
        gnn_model.SPEC, paths, cfg, collection, train, valid, Runtime(torch.device("cpu")), progress=False
    )
    reloaded, ckpt = load_model(gnn_model.SPEC, paths.model_dir("gnn", collection) / CHECKPOINT)
    assert ckpt["model_args"]["tile_features"] is True and reloaded.tile_in is not None
    preds = predict_collection(gnn_model.SPEC, paths, cfg, collection, "valid", graphs=valid, progress=False)
    for g in valid:
        again = score_rows(reloaded, g, np.arange(g.num_unique), 64, torch.device("cpu"), "fp32")
        np.testing.assert_array_equal(preds[g.id], again[g.inverse])


@pytest.mark.parametrize("seeds", [1, 2])
def test_dim_features_widen_the_node_inputs_and_predict_reads_them_as_trained(
    tiny_paths: Paths, tmp_path, seeds: int
) -> None:
    """`gnn.dim_features` adds NODE_TILE_INPUTS node columns; `predict` (one model or a seed average)
    loads the graphs as the checkpoint's recipe says, whatever the predicting config says."""
    paths = Paths(data=tiny_paths.data, out=tmp_path, work=tiny_paths.work or tiny_paths.out)
    collection = "layout:xla:random"
    cfg = small_cfg(
        max_steps=2, eval_every=2, graphs_per_batch=2, configs_per_graph=8, dim_features=True, seeds=seeds
    )
    GNN.train(paths, cfg, collection)
    plain = load_split(tiny_paths, collection, "valid", progress=False)
    wide = load_split(tiny_paths, collection, "valid", progress=False, dim_features=True)
    assert wide[0].node_feat.shape[1] == plain[0].node_feat.shape[1] + NODE_TILE_INPUTS
    np.testing.assert_array_equal(wide[0].node_feat[:, : plain[0].node_feat.shape[1]], plain[0].node_feat)
    model, ckpt = load_model(gnn_model.SPEC, paths.model_dir("gnn", collection) / CHECKPOINT)
    assert ckpt["recipe"]["dim_features"] is True
    assert ckpt["model_args"]["node_feat_dim"] == wide[0].node_feat.shape[1]
    preds = GNN.predict(paths, small_cfg(), collection, "valid")  # the default config: no dim_features
    assert set(preds) == {g.id for g in wide}
    if seeds == 1:
        for g in wide:
            again = score_rows(model, g, np.arange(g.num_unique), 64, torch.device("cpu"), "fp32")
            np.testing.assert_array_equal(preds[g.id], again[g.inverse])


def test_a_checkpoint_from_before_the_mxu_inputs_names_what_differs(tmp_path) -> None:
    """A model trained with 7 tile inputs (before the MXU flags) is one line naming the layer, not
    torch's header line."""
    from tpurank.gnn.training.checkpoints import CHECKPOINT_FORMAT, save_checkpoint

    m = small_gnn("layout", FEAT, hidden=16, layers=2, tile_features=True)
    state = m.state_dict()
    state["tile_in.weight"] = state["tile_in.weight"][:, :7]
    args = m.saved_args()
    path = tmp_path / CHECKPOINT
    save_checkpoint(
        path,
        {
            "format": CHECKPOINT_FORMAT,
            "model": "gnn",
            "collection": "layout:xla:random",
            "model_args": args,
            "state_dict": state,
        },
    )
    with pytest.raises(TpurankError, match=r"size mismatch for tile_in.weight.*; retrain this model$"):
        load_model(gnn_model.SPEC, path, "layout:xla:random")
