"""Facts about node features shared by the tile and layout feature builders.

Node feature columns follow the TpuGraphs npz format (docs/data.md): 21-26 shape dims, 28 element count,
2-20 one-hot element type. The element-type order is XLA's PrimitiveType enum (column 2 + enum
value), inferred from the real sample (F32 dominates, TUPLE marks tuple nodes).
"""

from __future__ import annotations

import numpy as np

SHAPE_COLS = slice(21, 27)  # shape dims 0-5, padded with 0
NUMEL_COL = 28  # product of the shape dims
TYPE_COLS = slice(2, 21)  # one-hot element type
OWN_LAYOUT_COLS = slice(134, 140)  # the node's own minor-to-major layout, padded with 0
ROOT_COL = 0
NUM_OPCODES = 122  # 121 real opcodes plus SUMMARY_OPCODE (121)

# Bytes per element of XLA PrimitiveType 0..18 (INVALID, PRED, S8, S16, S32, S64, U8, U16, U32, U64,
# F16, F32, F64, TUPLE, OPAQUE, C64, BF16, TOKEN, C128); 0 for non-array types.
ELEMENT_BYTES = np.array([0, 1, 1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8, 0, 0, 8, 2, 0, 16], dtype=np.float64)
DEFAULT_ELEMENT_BYTES = 4.0  # when no type bit is set (summary nodes)


def node_shapes(raw: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shape dims (n, 6) int64, rank (n,) and element count (n,) float64 of each node.

    Args:
        raw: node_feat_raw (n, 140).
    """
    dims = np.maximum(raw[:, SHAPE_COLS], 0).astype(np.int64)
    rank = (dims > 0).sum(axis=1)
    numel = np.maximum(raw[:, NUMEL_COL].astype(np.float64), 0.0)
    return dims, rank, numel


def element_bytes(raw: np.ndarray) -> np.ndarray:
    """Bytes per element of each node (n,) float64, from the one-hot element type."""
    onehot = raw[:, TYPE_COLS] > 0.5
    has = onehot.any(axis=1)
    return np.where(has, ELEMENT_BYTES[onehot.argmax(axis=1)], DEFAULT_ELEMENT_BYTES)


def padded(size: np.ndarray, multiple: int) -> np.ndarray:
    """`size` rounded up to a multiple of `multiple` (0 stays 0)."""
    return np.ceil(size / multiple) * multiple


def log1p(x: np.ndarray | float) -> np.ndarray:
    return np.log1p(np.maximum(x, 0.0))
