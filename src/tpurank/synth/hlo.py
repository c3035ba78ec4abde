"""HLO-like program graphs: the vocabulary (real opcode ids, element types, node_feat columns) and
the built graph's records.

Graphs are built block by block in topological (proto) order (tpurank.synth.hlo_builder), so every
edge `[user, operand]` has user > operand, as in the real files; the graph families (convolutional
`xla` networks, transformer `nlp` layers, single fused `tile` kernels) are tpurank.synth.graph_families.

Opcode ids were read from the real sample (the unet_3d protobuf aligned with its npz), e.g.
26 convolution, 34 dot, 41 fusion, 63 parameter, 75 reshape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

# HLO opcode ids of the TpuGraphs vocabulary (checked against the real unet_3d protobuf + npz).
OP = {
    "add": 2,
    "all-reduce": 5,
    "broadcast": 13,
    "compare": 20,
    "concatenate": 22,
    "constant": 24,
    "convert": 25,
    "convolution": 26,
    "copy": 27,
    "divide": 32,
    "dot": 34,
    "dynamic-slice": 35,
    "exponential": 37,
    "fusion": 41,
    "get-tuple-element": 45,
    "iota": 48,
    "maximum": 57,
    "minimum": 58,
    "multiply": 59,
    "negate": 60,
    "parameter": 63,
    "power": 66,
    "reduce": 70,
    "reduce-window": 72,
    "reshape": 75,
    "rsqrt": 81,
    "select": 83,
    "slice": 92,
    "sqrt": 94,
    "subtract": 95,
    "tanh": 96,
    "transpose": 98,
    "tuple": 100,
    "while": 102,
}
CONFIGURABLE_OPS = (OP["convolution"], OP["dot"], OP["reshape"])
ELEMENTWISE = ("add", "multiply", "maximum", "subtract", "convert", "exponential", "tanh", "select", "divide")

# XLA PrimitiveType -> one-hot position among node_feat columns 2..20 (checked on the real sample).
ETYPE_COL = {"pred": 1, "s32": 4, "s64": 5, "u32": 8, "f32": 11, "bf16": 13, "tuple": 16}
ETYPE_BYTES = {"pred": 1, "s32": 4, "s64": 8, "u32": 4, "f32": 4, "bf16": 2, "tuple": 0}

# Feature columns (see the spec): window groups start at 37, each 6 values + sum + product.
COL_ROOT, COL_ETYPE0, COL_DIMS0, COL_DIM_SUM, COL_DIM_PROD = 0, 2, 21, 27, 28
COL_TUPLE, COL_PARAM, COL_DIMENSIONS0 = 29, 30, 31
WINDOW_GROUPS0 = 37  # size, stride, pad low, pad high, window dilation, base dilation
COL_CONV_DIMS0, COL_FEATURE_GROUPS, COL_BATCH_GROUPS = 93, 107, 108
SLICE_PRODUCT_COLS = (112, 116, 120, 124, 128, 132)  # products of empty slice/pad groups are 1
COL_LAYOUT0 = 134


@dataclass
class Node:
    """A node of a graph being built (tpurank.synth.hlo_builder): its op, shape and attributes."""

    op: int
    shape: tuple[int, ...]
    etype: str
    operands: list[int]
    feats: dict[int, float] = field(default_factory=dict)
    perm: tuple[int, ...] = ()  # transposes: output dim d is operand dim perm[d]


@dataclass
class ConfigurableNode:
    """What the cost model needs to know about one conv/dot/reshape node.

    Args:
        node: index in the graph.
        kind: "conv", "dot" or "reshape".
        out_shape, in_shape, k_shape: output, main input and kernel (rhs) shapes (k_shape () for reshape).
        flops: multiply-adds x 2 of the op (0 for reshape).
        contract_in, contract_k: the input / kernel dimension the MXU contracts over (conv: features).
        src: index (among configurable nodes) whose output reaches this node's input through
            layout-preserving ops and transposes, or -1 when it comes from a parameter (default layout).
        src_perm: input dim d is dim src_perm[d] of the producer's output (not the identity when
            a transpose lies between them: a layout propagates through it with its dims renamed).
        k_src, k_perm: the same for the kernel operand when it is an activation (attention dots),
            else -1 (a parameter: its layout is chosen freely, see the cost model).
        chain: elementwise ops applied to this node's output before the next consumer (they run
            in whatever layout the output has).
        to_root: the output (after its chain) also feeds the program's result, which wants the
            default layout.
        etype_bytes: bytes per element.
    """

    node: int
    kind: str
    out_shape: tuple[int, ...]
    in_shape: tuple[int, ...]
    k_shape: tuple[int, ...]
    flops: float
    contract_in: int
    contract_k: int
    src: int = -1
    chain: int = 0
    src_perm: tuple[int, ...] = ()
    k_src: int = -1
    k_perm: tuple[int, ...] = ()
    to_root: bool = False
    etype_bytes: int = 4


class Merge(NamedTuple):
    """An op combining the outputs of two configurable nodes: it needs both in one layout, so a
    mismatch costs a copy of `nbytes`."""

    a: int  # index among the configurable nodes
    b: int
    nbytes: float


@dataclass
class HloGraph:
    """A built graph: arrays in the real file's format plus the cost model's view of it."""

    node_feat: np.ndarray  # float32 (n, 140)
    node_opcode: np.ndarray  # uint8 (n,)
    edge_index: np.ndarray  # int64 (m, 2): [user, operand]
    node_splits: np.ndarray  # int64 (1, k)
    configurable: list[ConfigurableNode]
    other_cost_ns: float  # time of everything that does not depend on layouts
    root_shape: tuple[int, ...] = ()
    root_etype_bytes: int = 4
    flops_per_output: float = 1.0  # tile kernels: arithmetic per output element
    merges: list[Merge] = field(default_factory=list)

    @property
    def node_config_ids(self) -> np.ndarray:
        return np.array([c.node for c in self.configurable], dtype=np.int64)


BYTES_PER_NS = 800.0  # ~800 GB/s HBM bandwidth (TPU v4-class), used for every memory-bound cost
