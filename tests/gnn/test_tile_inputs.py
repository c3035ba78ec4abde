"""The GNN's tile-aware inputs (`gnn.tile_features`, `gnn.dim_features`) and the MXU flags they share with
LightGBM: hand-worked layouts against the TPU's (8, 128) tile and its matrix unit."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tpurank.core.paths import NPZ_SUBDIR
from tpurank.features.layout import effective_layout
from tpurank.features.mxu import CONVOLUTION, DOT, MxuDims, mxu_columns, mxu_flags
from tpurank.gnn.nets.tile_inputs import (
    DIM_COLUMNS,
    NODE_TILE_INPUTS,
    TILE_INPUTS,
    NodeShapes,
    node_tile_inputs,
    tile_inputs,
)

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
