"""Tile-aware inputs at the configurable nodes (`gnn.tile_features`): the configured layout against the
TPU's memory tile.

TPU memory tiles the two most minor dimensions of an array by (8, 128). Which dimensions those are is
what a layout config chooses, so a config that puts a dimension of 130 minor-most pads it to 256. The
GNN sees each config's values only as categories (`layers.ConfigEmbedding`); these numbers give it, per
config and configurable node, the sizes the chosen layout puts in the tile: the 3rd and 5th places'
per-dimension features with the configured layout applied. The same arithmetic makes LightGBM's padding
columns (`features/layout.py`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from torch import nn

from tpurank.features.common import padded
from tpurank.features.layout import LANE, SUBLANE, effective_layout, minor_sizes, node_layout_facts

TILE_INPUTS = 7  # numbers per (config, configurable node), in the order of `tile_inputs`


@dataclass(frozen=True)
class NodeShapes:
    """The configurable nodes' shapes and own layouts, kept with a graph (a few bytes per node).

    Args:
        dims: (k, 7) int64 shape dims with a trailing 1.
        rank: (k,) int64.
        own: (k, 6) int8 the node's own minor-to-major layout, -1 beyond its rank.
    """

    dims: np.ndarray
    rank: np.ndarray
    own: np.ndarray

    @classmethod
    def from_raw(cls, raw: np.ndarray) -> NodeShapes:
        """From the configurable nodes' raw features (k, 140)."""
        return cls(*node_layout_facts(np.asarray(raw, dtype=np.float32)))


def tile_inputs(configs: np.ndarray, shapes: NodeShapes) -> np.ndarray:
    """(u, k, TILE_INPUTS) float32 for configs (u, k, 18); 0 where a node has too few dimensions.

    The columns: minor size mod 128 / 128; log1p(lane tiles); lane occupancy (size / padded size);
    second-minor size mod 8 / 8; sublane occupancy; log of the padded / real element count of the tile
    pair; whether the config moves the minor-most dimension away from the node's own.
    """
    eff, out_set = effective_layout(configs, shapes.own)
    m0, s0, s1 = minor_sizes(eff, shapes.dims, shapes.rank)
    has0 = (shapes.rank >= 1)[None, :]
    has1 = (shapes.rank >= 2)[None, :]
    pad0, pad1 = padded(s0, LANE), padded(s1, SUBLANE)
    moved = out_set & (m0 != shapes.own[None, :, 0])
    cols = [
        np.where(has0, (s0 % LANE) / LANE, 0.0),
        np.where(has0, np.log1p(pad0 / LANE), 0.0),
        np.where(has0, s0 / pad0, 0.0),
        np.where(has1, (s1 % SUBLANE) / SUBLANE, 0.0),
        np.where(has1, s1 / pad1, 0.0),
        np.where(has0, np.log(pad0 * np.where(has1, pad1, s1) / (s0 * s1)), 0.0),
        moved & has0,
    ]
    return np.stack(cols, axis=-1).astype(np.float32)


def wanted(model: nn.Module) -> bool:
    """Whether `model` (unwrapped) reads the tile-aware inputs: its batches must carry them."""
    return getattr(model, "tile_in", None) is not None
