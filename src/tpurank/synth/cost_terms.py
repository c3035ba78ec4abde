"""The formulas of the layout cost model (`cost_model.py` describes what they charge), written
once for two shapes of input: (configs, n) arrays with the per-node constants of every node
broadcast over them, or (pairs,) arrays with the constants gathered per (config, node) pair
(`NodeView.take`). A full evaluation and an incremental one (`LayoutCostModel.child_state`) thus
do the same floating-point operations per number, and agree bit for bit.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tpurank.synth.cost_state import NodeView
from tpurank.synth.physics import Physics

PEAK_FLOPS_PER_NS = 137_500.0  # ~137 TFLOP/s bf16 MXU throughput of one TPU v4 core
NONE = 6  # "no such dimension" index in the layout tables (rank-1 tensors have no second-minor)


class CostTerms:
    """The per-config formulas of `LayoutCostModel` (a base class: the model sets these tables)."""

    ph: Physics
    bw: float
    hidden: bool
    affinity: np.ndarray | None
    role_cost: np.ndarray
    neighbour: np.ndarray
    feed_in: np.ndarray
    _row: np.ndarray
    _flat: dict[str, np.ndarray]
    _powed: dict[str, np.ndarray]
    _src_dim_flat: np.ndarray
    _k_dim_flat: np.ndarray
    _feeds: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]

    def _pad(self, nv: NodeView, t: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._flat[t][nv.row + a * (NONE + 1) + b]

    def _resolve(
        self,
        nv: NodeView,
        own: tuple[np.ndarray, ...],
        out: tuple[np.ndarray, np.ndarray],
        src_out: tuple[np.ndarray, np.ndarray],
        k_out: tuple[np.ndarray, np.ndarray] | None,
    ) -> dict[str, np.ndarray]:
        """`effective` from the input and kernel slots (`own`: their first two slots), the
        tensor's own output layout, and its producers' (`src_out`, `k_out`: None when no node
        has an activation kernel)."""
        out_a, out_b = out
        in_a, in_b, in_set = slot_layout(own[0], own[1], *nv.defaults["in"])
        k_a, k_b, k_set = slot_layout(own[2], own[3], *nv.defaults["k"])
        # a default input takes the producer's layout (its dims renamed through any transposes
        # between them: then the transpose is a free bitcast); an explicit one may force a copy
        src_a, src_b = self._propagate(nv, src_out, self._src_dim_flat, nv.has_src, "in")
        in_a = np.where(in_set, in_a, src_a)
        in_b = np.where(in_set, in_b, src_b)
        if k_out is not None:  # an activation kernel: likewise
            ks_a, ks_b = self._propagate(nv, k_out, self._k_dim_flat, nv.has_k_src, "k")
            k_a = np.where(k_set | ~nv.has_k_src, k_a, ks_a)
            k_b = np.where(k_set | ~nv.has_k_src, k_b, ks_b)
        else:
            ks_a, ks_b = k_a, k_b
        return {
            "out_a": out_a,
            "out_b": out_b,
            "in_a": in_a,
            "in_b": in_b,
            "k_a": k_a,
            "k_b": k_b,
            "src_a": src_a,
            "src_b": src_b,
            "ks_a": ks_a,
            "ks_b": ks_b,
            "in_set": in_set,
            "k_set": k_set,
        }

    def _propagate(self, nv: NodeView, src_out: tuple, dim: np.ndarray, has: np.ndarray, t: str) -> tuple:
        """The producer's output layout as seen at the consumer's operand (default where none)."""
        a = dim[nv.dim_row + src_out[0]]
        b = dim[nv.dim_row + src_out[1]]
        d = nv.defaults[t]
        return np.where(has, a, d[0]), np.where(has, b, d[1])

    def _terms(self, nv: NodeView, e: dict) -> dict[str, Any]:
        """The per-node terms that do not depend on fusion: the op itself, its chain unfused,
        the forced copies (`adds`, in the order they are added) and what fusion and the
        neighbour effect read."""
        out_a, out_b, in_a, in_b, k_a, k_b = (e[k] for k in ("out_a", "out_b", "in_a", "in_b", "k_a", "k_b"))
        src_a, src_b, in_set, k_set = e["src_a"], e["src_b"], e["in_set"], e["k_set"]
        copy_in = in_set & ((in_a != src_a) | (in_b != src_b))
        copy_k = nv.has_k_src & k_set & ((k_a != e["ks_a"]) | (k_b != e["ks_b"]))
        i_out, i_in, i_k = (
            nv.row + a * (NONE + 1) + b for a, b in ((out_a, out_b), (in_a, in_b), (k_a, k_b))
        )
        p_out, p_in, p_k = self._flat["out"][i_out], self._flat["in"][i_in], self._flat["k"][i_k]
        p_src = self._pad(nv, "in", src_a, src_b)
        bo, bi, bk = nv.nbytes["out"], nv.nbytes["in"], nv.nbytes["k"]
        op, role = self._op_time(nv, e, i_in, i_k, (p_out, p_in, p_k))
        chain = nv.chain * 2.0 * bo * self._powed["out"][i_out] / self.bw
        cw = self.ph.copy_weight / self.bw  # forced copies: a pass over the tensor in both layouts
        d_out, d_k = nv.defaults["out"], nv.defaults["k"]
        k_moved = ~nv.has_k_src & k_set & ((k_a != d_k[0]) | (k_b != d_k[1]))
        out_moved = (out_a != d_out[0]) | (out_b != d_out[1])
        adds = (
            copy_in * bi * (p_in + p_src) * cw,
            copy_k * bk * (p_k + self._pad(nv, "k", e["ks_a"], e["ks_b"])) * cw,
            k_moved * bk * (p_k + self._pad(nv, "k", *d_k)) * cw,
            (nv.to_root & out_moved) * bo * (p_out + self._pad(nv, "out", *d_out)) * cw,
        )
        return {
            "op": op,
            "chain": chain,
            "adds": adds,
            "copy_in": copy_in,
            "copy_k": copy_k,
            "role": role,
            "p_in": p_in,
        }

    def _combine(
        self, nv: NodeView, terms: dict, fused: np.ndarray, role_src: np.ndarray | None
    ) -> np.ndarray:
        """Each node's time: the op, its chain (mostly gone when it fuses into a consumer that
        reads its layout as written; a forced copy breaks fusion), the copies, and the extra
        traffic of its and its producer's output layouts together (`role_src`: the producer's)."""
        t = terms["op"] + terms["chain"] * np.where(fused, self.ph.fused_share, 1.0)
        for add in terms["adds"]:
            t += add
        if self.hidden and len(self.feed_in):  # neighbours' output layouts together: extra traffic
            extra = self.neighbour[role_src, terms["role"]] * nv.nbytes["in"] * terms["p_in"] / self.bw
            t += np.where(nv.has_src, extra, 0.0)  # + 0.0 leaves a time (>= 0) bit for bit as it was
        return t

    def _merge_terms(
        self, a: tuple, b: tuple, ma: np.ndarray, mb: np.ndarray, nbytes: np.ndarray
    ) -> np.ndarray:
        """Two branches meeting in one op must share a layout: the copy of one where they differ.
        `a`, `b`: the (minor, second-minor) output layouts of nodes `ma` and `mb`."""
        differ = (a[0] != b[0]) | (a[1] != b[1])
        pa = self._flat["out"][self._row[ma] + a[0] * (NONE + 1) + a[1]]
        pb = self._flat["out"][self._row[mb] + b[0] * (NONE + 1) + b[1]]
        return differ * nbytes * (pa + pb) * (self.ph.copy_weight / self.bw)

    def _op_time(
        self, nv: NodeView, e: dict, i_in: np.ndarray, i_k: np.ndarray, pads: tuple
    ) -> tuple[np.ndarray, np.ndarray]:
        """(configs, n) time of each conv/dot/reshape itself, and its output's minor role.

        Args:
            nv: the nodes' constants (all, or gathered per (config, node) pair).
            e: `effective` layouts.
            i_in, i_k: flat indices of the input and kernel layouts into the padding tables.
            pads: the output's, input's and kernel's padding factors.
        """
        ph, bw = self.ph, self.bw
        p_out, p_in, p_k = pads
        out_a, out_b, in_a, in_b, k_a = e["out_a"], e["out_b"], e["in_a"], e["in_b"], e["k_a"]
        bo, bi, bk = nv.nbytes["out"], nv.nbytes["in"], nv.nbytes["k"]
        orient = np.where(in_a == nv.contract_in, 1.0, ph.mxu_input_penalty)
        orient *= np.where((k_a == nv.contract_k) | (bk == 0), 1.0, ph.mxu_kernel_penalty)
        # padding to a power, read from tables raised once (a power per config is the slow part)
        compute = nv.flops / PEAK_FLOPS_PER_NS * self._powed["in"][i_in] * self._powed["k"][i_k]
        compute *= orient * nv.kind_eff
        traffic = bi * p_in + bk * p_k + bo * p_out  # padded bytes the op moves
        memory = traffic / bw
        # the MXU writes results feature-minor when it streams the input contraction-minor (and
        # the other way round); an output layout against that order costs an on-chip transpose
        natural = (in_a == nv.contract_in) == (out_a == nv.out_feature)
        memory += np.where(nv.is_mxu & ~natural, ph.result_transpose * bo * p_out / bw, 0.0)
        role = output_role(out_a, nv.rank_out)
        mem_mult = self.role_cost[nv.kind, role] if self.hidden else 1.0
        if np.isfinite(ph.cache_bytes) and ph.cache_cliff != 1.0:
            mem_mult = mem_mult * np.where(traffic > ph.cache_bytes, ph.cache_cliff, 1.0)
        memory = memory * mem_mult
        op = np.maximum(compute, memory) + ph.overlap * np.minimum(compute, memory)
        d_out, d_in = nv.defaults["out"], nv.defaults["in"]
        row_major = (out_a == d_out[0]) & (out_b == d_out[1]) & (in_a == d_in[0]) & (in_b == d_in[1])
        reshape = np.where(row_major, 0.0, (bi * p_in + bo * p_out) / bw * mem_mult)
        op = np.where(nv.is_reshape, reshape, op)
        if self.affinity is not None:
            op = op * self.affinity[nv.dim_row + np.minimum(out_a, NONE)]
        return op, role

    def _fused(self, in_ok: np.ndarray, k_ok: np.ndarray) -> np.ndarray:
        """(configs, n): whether some consumer reads the node's output without a copy."""
        fused = np.zeros(in_ok.shape, dtype=bool)
        for consumers, producers, starts, which in self._feeds:
            ok = (in_ok, k_ok)[which]
            fused[:, producers] |= np.logical_or.reduceat(ok[:, consumers], starts, axis=1)
        return fused


def slot_layout(s0: np.ndarray, s1: np.ndarray, d0: np.ndarray, d1: np.ndarray) -> tuple:
    """(minor, second-minor, explicitly set?) of a tensor from its first two slots and its
    default (d0, d1)."""
    s0 = s0.astype(np.int8, copy=False)  # layout values -1..6: small integers, exact in int8
    s1 = s1.astype(np.int8, copy=False)
    set_ = s0 >= 0
    a = np.where(set_, s0, d0)
    b = np.where(set_, np.where(s1 >= 0, s1, NONE), d1)
    return a, b, set_


def output_role(out_a: np.ndarray, rank: np.ndarray) -> np.ndarray:
    """The output's minor role: 0 its last dimension, 1 second-to-last, 2 other."""
    return np.where(out_a == rank - 1, 0, np.where(out_a == rank - 2, 1, 2))
