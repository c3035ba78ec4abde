"""Tile-aware GNN inputs: sizes against the TPU's memory tile and the MXU's operand order.

TPU memory tiles the two most minor dimensions of an array by (8, 128), and the matrix unit (MXU)
reads an operand fastest with its contracted dimension minor-most. Which dimensions are minor is what
a layout config chooses: a config that puts a dimension of 130 minor-most pads it to 256. The GNN sees
each config's values only as categories (`layers.ConfigEmbedding`) and each node's sizes only
log-scaled, so two kinds of numbers are computed here:

- per node (`gnn.dim_features`, `node_tile_inputs`): each of the 24 size columns (shape, window
  size, padding) against the 128-lane tile, the 3rd place's mod/div-128 features;
- per config and configurable node (`gnn.tile_features`, `tile_inputs`): the sizes the configured
  output layout puts in the tile (the 5th place's per-dimension facts with the layout applied), and
  whether a convolution's or dot's operands and output put the MXU's dimensions minor-most.
  LightGBM's padding and MXU columns (`features/layout.py`, `features/mxu.py`) use the same arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import nn

from tpurank.features.common import padded
from tpurank.features.layout import LANE, SUBLANE, effective_layout, minor_sizes, node_layout_facts
from tpurank.features.mxu import MxuDims, mxu_flags

TILE_INPUTS = 10  # numbers per (config, configurable node), in the order of `tile_inputs`
# the 3rd place's dimension columns but for 'dimensions' (31-36), which hold dimension indices, not sizes:
# shape dims, window size, padding low and high
DIM_COLUMNS = np.r_[21:27, 37:43, 53:59, 61:67]
NODE_TILE_INPUTS = 2 * len(DIM_COLUMNS)  # node input columns added by `gnn.dim_features`


@dataclass(frozen=True)
class NodeShapes:
    """The configurable nodes' shapes, own layouts and MXU dimensions, kept with a graph (a few bytes
    per node).

    Args:
        dims: (k, 7) int64 shape dims with a trailing 1.
        rank: (k,) int64.
        own: (k, 6) int8 the node's own minor-to-major layout, -1 beyond its rank.
        mxu: the contracted and feature dimensions of the convolutions and dots among them.
    """

    dims: np.ndarray
    rank: np.ndarray
    own: np.ndarray
    mxu: MxuDims

    @classmethod
    def from_raw(cls, raw: np.ndarray, opcode: np.ndarray) -> NodeShapes:
        """From the configurable nodes' raw features (k, 140) and opcodes (k,)."""
        raw = np.asarray(raw, dtype=np.float32)
        return cls(*node_layout_facts(raw), mxu=MxuDims.from_raw(raw, opcode))


def tile_inputs(configs: np.ndarray, shapes: NodeShapes) -> np.ndarray:
    """(u, k, TILE_INPUTS) float32 for configs (u, k, 18); 0 where a node has too few dimensions.

    The columns: minor size mod 128 / 128; log1p(lane tiles); lane occupancy (size / padded size);
    second-minor size mod 8 / 8; sublane occupancy; log of the padded / real element count of the tile
    pair; whether the config moves the minor-most dimension away from the node's own; then, at
    convolutions and dots only, whether the configured input and kernel layouts put the contracted
    dimension minor-most and whether the output is feature-minor (`features/mxu.py`).
    """
    eff, out_set = effective_layout(configs, shapes.own)
    m0, s0, s1 = minor_sizes(eff, shapes.dims, shapes.rank)
    has0 = (shapes.rank >= 1)[None, :]
    has1 = (shapes.rank >= 2)[None, :]
    pad0, pad1 = padded(s0, LANE), padded(s1, SUBLANE)
    moved = out_set & (m0 != shapes.own[None, :, 0])
    flags = mxu_flags(configs, eff, shapes.mxu)
    cols = [
        np.where(has0, (s0 % LANE) / LANE, 0.0),
        np.where(has0, np.log1p(pad0 / LANE), 0.0),
        np.where(has0, s0 / pad0, 0.0),
        np.where(has1, (s1 % SUBLANE) / SUBLANE, 0.0),
        np.where(has1, s1 / pad1, 0.0),
        np.where(has0, np.log(pad0 * np.where(has1, pad1, s1) / (s0 * s1)), 0.0),
        moved & has0,
        flags.in_contract_minor,
        flags.kernel_contract_minor,
        flags.out_feature_minor,
    ]
    return np.stack(cols, axis=-1).astype(np.float32)


def node_tile_inputs(raw: np.ndarray) -> np.ndarray:
    """(n, NODE_TILE_INPUTS) float32: each dimension column's last-tile occupancy, then its lane-tile
    count (log1p); 0 where the dimension is absent (0) or negative padding.

    The 3rd place fed `((x - 1) mod 128) / 128` and `floor(x / 128) / 10`: a dimension of 130 fills its
    second tile to 2/128 and wastes the rest. Occupancy `((x - 1) mod 128 + 1) / 128` says the same with
    1 for a full tile; the count is log-scaled because sizes reach ~1e5.

    Args:
        raw: node_feat_raw (n, 140).
    """
    x = np.asarray(raw, dtype=np.float64)[:, DIM_COLUMNS]
    has = x > 0
    occupancy = np.where(has, (np.mod(x - 1, LANE) + 1) / LANE, 0.0)
    tiles = np.where(has, np.log1p(np.ceil(x / LANE)), 0.0)
    return np.concatenate([occupancy, tiles], axis=1).astype(np.float32)


def wanted(model: nn.Module) -> bool:
    """Whether `model` (unwrapped) reads the tile-aware inputs: its batches must carry them."""
    return getattr(model, "tile_in", None) is not None
