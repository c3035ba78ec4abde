"""HLO opcode name -> the dataset's opcode id (0 = unknown).

The ids are the tpu_graphs featurizer's own frozen list (`process_data/xla/hlo_opcode.h`), not
XLA's enum order: ids 97 (trace) and 101 (tuple-select) are removed ops that are still reserved.
"""

from __future__ import annotations

UNKNOWN_OPCODE = 0  # any opcode missing from the list below

# In id order starting at 1 (includes the removed trace = 97 and tuple-select = 101).
_NAMES: tuple[str, ...] = (
    "abs", "add", "add-dependency", "after-all", "all-reduce", "all-to-all", "atan2",
    "batch-norm-grad", "batch-norm-inference", "batch-norm-training", "bitcast", "bitcast-convert",
    "broadcast", "call", "ceil", "cholesky", "clamp", "collective-permute", "count-leading-zeros",
    "compare", "complex", "concatenate", "conditional", "constant", "convert", "convolution", "copy",
    "copy-done", "copy-start", "cosine", "custom-call", "divide", "domain", "dot", "dynamic-slice",
    "dynamic-update-slice", "exponential", "exponential-minus-one", "fft", "floor", "fusion", "gather",
    "get-dimension-size", "set-dimension-size", "get-tuple-element", "imag", "infeed", "iota",
    "is-finite", "log", "log-plus-one", "and", "not", "or", "xor", "map", "maximum", "minimum",
    "multiply", "negate", "outfeed", "pad", "parameter", "partition-id", "popcnt", "power", "real",
    "recv", "recv-done", "reduce", "reduce-precision", "reduce-window", "remainder", "replica-id",
    "reshape", "reverse", "rng", "rng-get-and-update-state", "rng-bit-generator", "round-nearest-afz",
    "rsqrt", "scatter", "select", "select-and-scatter", "send", "send-done", "shift-left",
    "shift-right-arithmetic", "shift-right-logical", "sign", "sine", "slice", "sort", "sqrt",
    "subtract", "tanh", "trace", "transpose", "triangular-solve", "tuple", "tuple-select", "while",
    "cbrt", "all-gather", "collective-permute-start", "collective-permute-done", "logistic",
    "dynamic-reshape", "all-reduce-start", "all-reduce-done", "reduce-scatter", "all-gather-start",
    "all-gather-done", "opt-barrier", "async-start", "async-update", "async-done",
    "round-nearest-even", "stochastic-convert", "tan",
)  # fmt: skip

OPCODE_IDS: dict[str, int] = {name: i for i, name in enumerate(_NAMES, start=1)}


def opcode_id(name: str) -> int:
    """The dataset's id of an HLO opcode name such as "fusion" (41); 0 when unknown.

    Args:
        name: the opcode as spelled in HloInstructionProto.opcode.
    """
    return OPCODE_IDS.get(name, UNKNOWN_OPCODE)
