"""Whether a layout config feeds the TPU's matrix unit (MXU) the way it reads fastest.

A convolution or dot contracts one dimension of each operand. The MXU streams an operand fastest with
that dimension minor-most (an input laid out otherwise needs a transpose on the fly), and it writes
its result feature-minor. Which dimension is minor is what the config's input (values 6-11), kernel
(12-17) and output (0-5) layouts choose, so these flags change from config to config.

Where the contracted dimensions come from: a convolution's are in its node features (convolution
dimension numbers: input feature 94, kernel input feature 99, output feature 106). The dataset keeps no
dot dimension numbers, so a dot is read in XLA's canonical form (lhs [batch, m, k] x rhs [batch, k, n]):
the input contracts its last dimension, the kernel its second-to-last, the output's feature dimension
is its last. The operands' ranks come from the configured layouts themselves (a set layout lists
every dimension), so no operand has to be found in the graph. The 3rd place fed the conv/dot operand
shapes and dot dimension numbers (from the raw protobufs) to its GNN; these flags are that knowledge
with the configured layout applied.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tpurank.features.common import node_shapes

CONVOLUTION, DOT = 26, 34  # opcodes
CONV_INPUT_FEATURE, CONV_KERNEL_INPUT_FEATURE, CONV_OUTPUT_FEATURE = 94, 99, 106  # node feature columns
NONE, CONV, DOTS = 0, 1, 2  # MxuDims.kind
MXU_COLUMNS = (
    "mxu_in_contract_minor",
    "mxu_in_other_minor",
    "mxu_k_contract_minor",
    "mxu_k_other_minor",
    "mxu_out_feature_minor",
    "mxu_other_minor_bytes_log",
)


@dataclass(frozen=True)
class MxuDims:
    """The MXU dimensions of k configurable nodes (-1 where a config decides them, or not an MXU op).

    Args:
        kind: (k,) NONE, CONV or DOTS.
        contract_in: (k,) the input's contracted dimension (convolutions).
        contract_k: (k,) the kernel's contracted dimension (convolutions).
        out_feature: (k,) the output's feature dimension (convolutions and dots).
    """

    kind: np.ndarray
    contract_in: np.ndarray
    contract_k: np.ndarray
    out_feature: np.ndarray

    @classmethod
    def from_raw(cls, raw: np.ndarray, opcode: np.ndarray) -> MxuDims:
        """From the nodes' raw features (k, 140) and opcodes (k,)."""
        op = np.asarray(opcode, dtype=np.int64)
        kind = np.where(op == CONVOLUTION, CONV, np.where(op == DOT, DOTS, NONE))
        conv = kind == CONV
        rank = node_shapes(raw)[1]

        def conv_col(col: int) -> np.ndarray:
            return np.where(conv, raw[:, col], -1).astype(np.int64)

        out_feature = np.where(kind == DOTS, rank - 1, conv_col(CONV_OUTPUT_FEATURE))
        return cls(kind, conv_col(CONV_INPUT_FEATURE), conv_col(CONV_KERNEL_INPUT_FEATURE), out_feature)


@dataclass(frozen=True)
class MxuFlags:
    """Per config and node (u, k) booleans, False away from convolutions and dots.

    Args:
        in_set, kernel_set: the config sets the input / kernel layout.
        in_contract_minor, kernel_contract_minor: ... and puts the contracted dimension minor-most.
        out_feature_minor: the output (configured, else the node's own layout) is feature-minor.
    """

    in_set: np.ndarray
    kernel_set: np.ndarray
    in_contract_minor: np.ndarray
    kernel_contract_minor: np.ndarray
    out_feature_minor: np.ndarray


def mxu_flags(configs: np.ndarray, eff: np.ndarray, dims: MxuDims) -> MxuFlags:
    """The flags of configs (u, k, 18) whose effective output layouts are `eff` (u, k, 6).

    Args:
        configs: int8 layouts (output, input, kernel; -1 = default).
        eff: the output layout each node gets (`features.layout.effective_layout`).
        dims: the nodes' MXU dimensions.
    """
    inp, ker = configs[..., 6:12], configs[..., 12:18]
    mxu = (dims.kind != NONE)[None, :]
    dot = (dims.kind == DOTS)[None, :]
    in_set = mxu & (inp != -1).any(-1)
    k_set = mxu & (ker != -1).any(-1)
    contract_in = np.where(dot, (inp != -1).sum(-1) - 1, dims.contract_in[None, :])
    # a rank-1 kernel (a matrix-vector dot) contracts its only dimension
    contract_k = np.where(dot, np.maximum((ker != -1).sum(-1) - 2, 0), dims.contract_k[None, :])
    return MxuFlags(
        in_set=in_set,
        kernel_set=k_set,
        in_contract_minor=in_set & (inp[..., 0] == contract_in),
        kernel_contract_minor=k_set & (ker[..., 0] == contract_k),
        out_feature_minor=mxu & (eff[..., 0] >= 0) & (eff[..., 0] == dims.out_feature[None, :]),
    )


def mxu_columns(flags: MxuFlags, nbytes: np.ndarray) -> dict[str, np.ndarray]:
    """LightGBM's per-config counts of MXU_COLUMNS (u,) float64.

    Args:
        flags: the configs' flags (u, k).
        nbytes: (k,) output bytes of each node, weighting operands read the slow way.
    """
    in_other = flags.in_set & ~flags.in_contract_minor
    k_other = flags.kernel_set & ~flags.kernel_contract_minor
    slow = in_other.astype(np.float64) + k_other
    return {
        "mxu_in_contract_minor": flags.in_contract_minor.sum(1).astype(np.float64),
        "mxu_in_other_minor": in_other.sum(1).astype(np.float64),
        "mxu_k_contract_minor": flags.kernel_contract_minor.sum(1).astype(np.float64),
        "mxu_k_other_minor": k_other.sum(1).astype(np.float64),
        "mxu_out_feature_minor": flags.out_feature_minor.sum(1).astype(np.float64),
        "mxu_other_minor_bytes_log": np.log1p(slow @ nbytes),
    }
