"""The GNN's tile-aware inputs (`gnn.tile_features`): hand-worked layouts against the TPU's (8, 128) tile."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank.gnn.tile_inputs import TILE_INPUTS, NodeShapes, tile_inputs


def shapes(dims: list[list[int]], own: list[list[int]]) -> NodeShapes:
    raw = np.zeros((len(dims), 140), dtype=np.float32)
    for i, (d, o) in enumerate(zip(dims, own, strict=True)):
        raw[i, 21 : 21 + len(d)] = d
        raw[i, 134 : 134 + len(o)] = o
    return NodeShapes.from_raw(raw)


def config(*layouts: list[int]) -> np.ndarray:
    """One config: the output layout of each node (the input and kernel layouts left at -1)."""
    c = np.full((1, len(layouts), 18), -1, dtype=np.int8)
    for k, lay in enumerate(layouts):
        c[0, k, : len(lay)] = lay
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
