"""The 140 per-node features of the dataset, computed from one HloInstructionProto.

This follows the tpu_graphs featurizer (`process_data/xla/featurizers.h`, feature bits
FEATURE_WINDOW | FEATURE_OP_NON_ZERO, which give 113 + 27 = 140 columns) value for value:
every feature is an int64 in C++ that is cast to float32 last, so the columns are built as int64
here (sums and products wrap like C++ int64) and converted once, which makes them bit-identical.

Column groups (first column): 0 is_root, 1 element size (always 0), 2 element type one-hot (19),
21 shape dims (6 + sum + product), 29 tuple size, 30 parameter number, 31 dimensions (6),
37 window (6 x (6 + sum + product) for size, stride, padding low/high, window and base dilation,
then reversal 6 + true count + false count), 93 convolution dimension numbers (14),
107 feature group count, 108 batch group count, 109 slice start/stride/limit (3 x (2 + sum +
product)), 121 dynamic slice sizes (2 + sum + product), 125 padding low/high (2 x (2 + sum +
product)), 133 is_stable, 134 layout minor-to-major (6, padded with `layout_pad`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

NODE_FEAT_DIM = 140
LAYOUT_COLUMNS = slice(134, 140)  # the node's own layout, minor to major
DEFAULT_LAYOUT_PAD = 0  # what the dataset pads short layouts with (ambiguous with dimension 0)

# xla.PrimitiveType values in the featurizer's one-hot order (INVALID, PRED, S8, S16, S32, S64, U8,
# U16, U32, U64, F16, F32, F64, BF16, C64, C128, TUPLE, OPAQUE_TYPE, TOKEN); other types: all zero.
ELEMENT_TYPES: tuple[int, ...] = (0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 16, 15, 18, 13, 14, 17)
_TYPE_SLOT = {t: i for i, t in enumerate(ELEMENT_TYPES)}

_I64 = 1 << 64


def _wrap(x: int) -> int:
    """Python int -> the value C++ int64 arithmetic would hold (two's complement wrap-around)."""
    x %= _I64
    return x - _I64 if x >= 1 << 63 else x


def _leading(values: Sequence[int], n: int) -> list[int]:
    """The first n values, zero-padded (FixedNumericSequenceFeaturesNoAggregate)."""
    head = [int(v) for v in values[:n]]
    return head + [0] * (n - len(head))


def sequence_features(values: Sequence[int], n: int, zero_product_on_empty: bool = False) -> list[int]:
    """The first n values zero-padded, then their sum and product (FixedNumericSequenceFeatures).

    Args:
        values: the integers (a list or a protobuf repeated field).
        n: how many leading values get a column of their own.
        zero_product_on_empty: give product 0 instead of 1 for an empty list (tile configs).
    """
    total, product = 0, 1
    for v in values:
        total += int(v)
        product *= int(v)
    if not values and zero_product_on_empty:
        product = 0
    return _leading(values, n) + [_wrap(total), _wrap(product)]


def _bools(values: Iterable[bool], n: int) -> list[int]:
    """The first n booleans as 0/1 zero-padded, then the true and false counts."""
    flags = [1 if v else 0 for v in values]
    return _leading(flags, n) + [sum(flags), len(flags) - sum(flags)]


def _window(window: Any) -> list[int]:
    dims = list(window.dimensions)
    out: list[int] = []
    for field in ("size", "stride", "padding_low", "padding_high", "window_dilation", "base_dilation"):
        out += sequence_features([getattr(d, field) for d in dims], 6)
    return out + _bools([d.window_reversal for d in dims], 6)


def _convolution(c: Any) -> list[int]:
    return [
        c.input_batch_dimension,
        c.input_feature_dimension,
        *_leading(c.input_spatial_dimensions, 4),
        c.kernel_input_feature_dimension,
        c.kernel_output_feature_dimension,
        *_leading(c.kernel_spatial_dimensions, 4),
        c.output_batch_dimension,
        c.output_feature_dimension,
    ]


def _slices(slices: Sequence[Any]) -> list[int]:
    out: list[int] = []
    for field in ("start", "stride", "limit"):
        out += sequence_features([getattr(s, field) for s in slices], 2)
    return out


def _padding(padding: Any) -> list[int]:
    dims = list(padding.dimensions)
    return sequence_features([d.edge_padding_low for d in dims], 2) + sequence_features(
        [d.edge_padding_high for d in dims], 2
    )


def instruction_features(inst: Any, root_id: int, layout_pad: int = DEFAULT_LAYOUT_PAD) -> list[int]:
    """The 140 integer features of one instruction, in column order.

    Args:
        inst: an HloInstructionProto.
        root_id: the id of the root instruction of the instruction's computation.
        layout_pad: value for layout columns beyond the layout's rank (the dataset uses 0).
    """
    shape = inst.shape
    one_hot = [0] * len(ELEMENT_TYPES)
    slot = _TYPE_SLOT.get(shape.element_type)
    if slot is not None:
        one_hot[slot] = 1
    layout = [int(d) for d in shape.layout.minor_to_major[:6]]
    row = [
        1 if inst.id == root_id else 0,
        0,  # element_size_in_bits: always 0 in the dataset
        *one_hot,
        *sequence_features(shape.dimensions, 6),
        len(shape.tuple_shapes),
        inst.parameter_number,
        *_leading(inst.dimensions, 6),
        *_window(inst.window),
        *_convolution(inst.convolution_dimension_numbers),
        inst.feature_group_count,
        inst.batch_group_count,
        *_slices(inst.slice_dimensions),
        *sequence_features(inst.dynamic_slice_sizes, 2),
        *_padding(inst.padding_config),
        1 if inst.is_stable else 0,
        *(layout + [layout_pad] * (6 - len(layout))),
    ]
    assert len(row) == NODE_FEAT_DIM, len(row)
    return row


def to_float32(rows: list[list[int]]) -> np.ndarray:
    """int64 feature rows -> float32, rounding exactly as C++ static_cast<float>(int64_t) does."""
    if not rows:
        return np.zeros((0, NODE_FEAT_DIM), np.float32)
    return np.asarray(rows, dtype=np.int64).astype(np.float32)
