"""The hidden TPU cost model that turns a graph and a layout configuration into a runtime (ns).

It is deliberately physical, so that what a ranker learns on synthetic data is the kind of thing
that matters on real TPUs, and deliberately hidden (nothing here is written into the files). Its
constants are not constants: each dataset draws them from ranges (`physics.draw_physics`), so
no feature that restates one formula is right by construction. `LayoutCostModel(graph)` without
physics uses `physics.REFERENCE` (the former fixed values, every hidden effect off).

A configurable node (convolution, dot, reshape) has three tensors: output, input and kernel. Each
tensor's layout is a minor-to-major order; what matters on a TPU is the minor dimension (mapped to
the 128 vector lanes) and the second-minor one (8 sublanes, 16 for bf16). A config value of -1
means "compiler default": the default output layout is row-major, a default input takes whatever
layout its producer wrote (renamed through any transposes between them), a default weight kernel is
laid out for the MXU (contracted dimension minor), and a default activation kernel (attention
dots) takes its producer's layout like an input.

- Padding: a tensor in layout (a, b) costs `Physics.pad(S[a], 128) * Physics.pad(S[b], 8)` times
  its real bytes: a weighted factor, linear in the padded size or in steps, per dataset.
- Compute (conv, dot): `flops / PEAK` times `(pad_in * pad_kernel) ** compute_pad_exp`, times the
  MXU input / kernel penalty when that operand's contracted dimension is not minor, times a
  per-opcode (and per-graph) efficiency. The op runs as a roofline
  `max(compute, memory) + overlap * min(compute, memory)`. An output written against the MXU's
  natural order (feature-minor when the input streams contraction-minor) adds `result_transpose`
  passes over the output.
- Memory time is scaled by a per-opcode factor of the output's minor role (last, second-to-last,
  other dimension), and jumps by `cache_cliff` when the op's padded working set exceeds the
  dataset's `cache_bytes` (a threshold that padding can push an op across).
- Neighbours: a consumer reading its producer's output pays `neighbour_cost[producer role,
  consumer role]` extra passes over its input: a traffic effect of the two nodes' output layouts
  together, which no per-node count sees.
- Every (graph, node, output minor dimension) has a hidden multiplier (`affinity_sigma`), and each
  graph its own bandwidth and efficiency deviations (`graph_sigma`), seeded by the graph's bytes.
- Reshape: free (a bitcast) when both its layouts are the row-major defaults, else a copy.
- Forced copies: an explicitly chosen input layout that differs from what the producing
  configurable node wrote (through layout-keeping elementwise ops and transposes, which rename
  the dimensions) costs a copy in both layouts; the same for an activation kernel; a non-default
  weight kernel layout costs a copy of the weights; an output that reaches the program result in a
  non-default layout costs a copy back; two branches meeting in one op in different layouts cost
  a copy of one branch. Every copy is scaled by the dataset's `copy_weight`.
- The elementwise ops computed only from a configurable node's output run in its layout (their
  traffic scaled by its padding to `chain_pad_exp`); the chain fuses into a consumer that reads the
  producer's layout as written, leaving `fused_share` of its traffic; a forced copy breaks that.
- Everything else in the graph costs a fixed, layout-independent time.

Tile kernels: `tile_cost.py`. Measurement noise: `noise.py`.
"""

from __future__ import annotations

import numpy as np

from tpurank.synth.hlo import BYTES_PER_NS, HloGraph
from tpurank.synth.noise import measure, program_noise
from tpurank.synth.physics import LANES, REFERENCE, SUBLANES, Physics, graph_rng
from tpurank.synth.tile_cost import tile_cost

__all__ = ["LayoutCostModel", "measure", "pad_table", "program_noise", "tile_cost"]

PEAK_FLOPS_PER_NS = 137_500.0  # ~137 TFLOP/s bf16 MXU throughput of one TPU v4 core
NONE = 6  # "no such dimension" index in the layout tables (rank-1 tensors have no second-minor)
KIND = {"conv": 0, "dot": 1, "reshape": 2}  # rows of Physics.role_cost


def pad_table(shape: tuple[int, ...], itemsize: int, physics: Physics = REFERENCE) -> np.ndarray:
    """(7, 7) padding factor of `shape` for every (minor, second-minor) pair; index 6 = none."""
    t = np.ones((NONE + 1, NONE + 1))
    dims = np.asarray(shape[:6], dtype=np.float64)
    if not len(dims):
        return t
    rows = SUBLANES * max(1, 4 // max(1, itemsize))
    lane = physics.pad(dims, LANES, lanes=True)
    sub = physics.pad(dims, rows, lanes=False)
    k = len(dims)
    t[:k, NONE] = lane
    block = lane[:, None] * sub[None, :]
    np.fill_diagonal(block, 1.0)
    t[:k, :k] = block
    return t


def default_pair(rank: int) -> tuple[int, int]:
    """Row-major (minor, second-minor) of a tensor of this rank (NONE where absent)."""
    return (rank - 1 if rank >= 1 else NONE, rank - 2 if rank >= 2 else NONE)


def mxu_kernel_pair(rank: int, contract: int) -> tuple[int, int]:
    """The compiler's layout of a weight parameter: the contracted dim minor (as the MXU reads it),
    then the other of the two last dims (the output features)."""
    if rank < 2:
        return default_pair(rank)
    other = rank - 1 if contract != rank - 1 else rank - 2
    return contract, other


class LayoutCostModel:
    """Noise-free runtime of layout configurations of one graph, vectorised over configs.

    Args:
        graph: the graph (its configurable nodes carry the shapes and wiring the model needs).
        physics: the dataset's physics (default: `REFERENCE`, no hidden effects).
    """

    def __init__(self, graph: HloGraph, physics: Physics | None = None) -> None:
        nodes = graph.configurable
        ph = self.ph = physics or REFERENCE
        self.n = len(nodes)
        self._graph_effects(graph)
        # the layout-independent rest of the program streams memory too (built at BYTES_PER_NS)
        self.base = float(graph.other_cost_ns) * BYTES_PER_NS / self.bw
        f = np.float64
        self.tables = {t: np.zeros((self.n, NONE + 1, NONE + 1)) for t in ("out", "in", "k")}
        self.defaults = {t: np.zeros((self.n, 2), dtype=np.int64) for t in ("out", "in", "k")}
        self.bytes = {t: np.zeros(self.n, dtype=f) for t in ("out", "in", "k")}
        self.flops = np.array([c.flops for c in nodes], dtype=f)
        self.contract_in = np.array([c.contract_in for c in nodes], dtype=np.int64)
        self.contract_k = np.array([c.contract_k for c in nodes], dtype=np.int64)
        self.is_reshape = np.array([c.kind == "reshape" for c in nodes])
        self.src = np.array([c.src for c in nodes], dtype=np.int64)
        self.k_src = np.array([c.k_src for c in nodes], dtype=np.int64)
        # producer dim -> consumer dim through the transposes between them (index NONE stays NONE)
        self.src_dim = np.stack([_dim_map(c.src_perm) for c in nodes]) if nodes else np.zeros((0, NONE + 1))
        self.k_dim = np.stack([_dim_map(c.k_perm) for c in nodes]) if nodes else np.zeros((0, NONE + 1))
        self.src_dim = self.src_dim.astype(np.int64)
        self.k_dim = self.k_dim.astype(np.int64)
        self.chain = np.array([c.chain for c in nodes], dtype=f)
        self.to_root = np.array([c.to_root for c in nodes])
        for j, c in enumerate(nodes):
            for t, shape in (("out", c.out_shape), ("in", c.in_shape), ("k", c.k_shape)):
                self.tables[t][j] = pad_table(shape, c.etype_bytes, ph)
                self.defaults[t][j] = default_pair(len(shape))
                self.bytes[t][j] = float(np.prod(shape, dtype=f)) * c.etype_bytes if shape else 0.0
            if c.k_shape and c.k_src < 0:  # a weight parameter: the compiler lays it out for the MXU
                self.defaults["k"][j] = mxu_kernel_pair(len(c.k_shape), c.contract_k)
        self.has_src = self.src >= 0
        self.has_k_src = self.k_src >= 0
        self.out_feature = np.array([len(c.out_shape) - 1 for c in nodes], dtype=np.int64)
        self.is_mxu = ~self.is_reshape
        # consumers of each producer's output (input or kernel operand): (consumer, producer) pairs
        self.feed_in = np.flatnonzero(self.has_src)
        self.feed_k = np.flatnonzero(self.has_k_src)
        self._feeds = [
            (*_by_producer(consumers, src[consumers]), ok)
            for consumers, src, ok in ((self.feed_in, self.src, 0), (self.feed_k, self.k_src, 1))
            if len(consumers)
        ]
        self.ranks = [
            np.array([len(getattr(c, f)) for c in nodes], dtype=np.int64)
            for f in ("out_shape", "in_shape", "k_shape")
        ]
        merges = np.array(graph.merges, dtype=np.float64).reshape(-1, 3)
        self.merge_a, self.merge_b = merges[:, 0].astype(np.int64), merges[:, 1].astype(np.int64)
        self.merge_bytes = merges[:, 2]
        self._flat = {t: v.reshape(-1) for t, v in self.tables.items()}
        self._powed = {
            "in": self._flat["in"] ** ph.compute_pad_exp,
            "k": self._flat["k"] ** ph.compute_pad_exp,
            "out": self._flat["out"] ** ph.chain_pad_exp,
        }
        self._row = np.arange(self.n) * (NONE + 1) ** 2
        self._per_opcode(nodes)

    def _per_opcode(self, nodes: list) -> None:
        """Per-node views of the per-opcode and neighbour tables (off under REFERENCE)."""
        ph = self.ph
        self.kind = np.array([KIND[c.kind] for c in nodes], dtype=np.int64)
        self.kind_eff = np.append(self.kind_eff, 0.0)[self.kind]  # reshapes do no MXU work
        self.role_cost = np.asarray(ph.role_cost, dtype=np.float64)
        self.neighbour = np.asarray(ph.neighbour_cost, dtype=np.float64) * self.neighbour_scale
        self.hidden = ph.neighbour_cost != REFERENCE.neighbour_cost or ph.role_cost != REFERENCE.role_cost

    def _graph_effects(self, graph: HloGraph) -> None:
        """This graph's hidden deviations: bandwidth, conv/dot efficiency, the neighbour effect's
        strength, and a multiplier per (node, output minor dimension). None under REFERENCE."""
        ph = self.ph
        self.bw = ph.bytes_per_ns
        self.kind_eff = np.asarray(ph.kind_compute, dtype=np.float64)
        self.neighbour_scale = 1.0
        self.affinity = None
        if ph.seed < 0:
            return
        rng = graph_rng(ph, graph.node_opcode, graph.edge_index, graph.node_feat)
        dev = np.exp(rng.normal(0.0, ph.graph_sigma, 4))
        self.bw *= dev[0]
        self.kind_eff = self.kind_eff * dev[1:3]
        self.neighbour_scale = float(dev[3] ** 2)
        if ph.affinity_sigma > 0 and self.n:
            self.affinity = np.exp(rng.normal(0.0, ph.affinity_sigma, self.n * (NONE + 1)))  # flat (n, 7)

    def _pad(self, t: str, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self._flat[t][self._row + a * (NONE + 1) + b]

    def _pair(self, cfg: np.ndarray, t: str, first: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(minor, second-minor, explicitly set?) of one tensor per (config, node)."""
        s0 = cfg[:, :, first].astype(np.int64)
        s1 = cfg[:, :, first + 1].astype(np.int64)
        set_ = s0 >= 0
        d = self.defaults[t]
        a = np.where(set_, s0, d[:, 0])
        b = np.where(set_, np.where(s1 >= 0, s1, NONE), d[:, 1])
        return a, b, set_

    def effective(self, cfg: np.ndarray) -> dict[str, np.ndarray]:
        """The layout each tensor really gets: (minor, second-minor) per (config, node) for out,
        in and k, the producer's layout `src` reaching the input, and which slots were set."""
        out_a, out_b, out_set = self._pair(cfg, "out", 0)
        in_a, in_b, in_set = self._pair(cfg, "in", 6)
        k_a, k_b, k_set = self._pair(cfg, "k", 12)
        # a default input takes the producer's layout (its dims renamed through any transposes
        # between them: then the transpose is a free bitcast); an explicit one may force a copy
        src_a, src_b = self._propagate(out_a, out_b, self.src, dim=self.src_dim, has=self.has_src, t="in")
        in_a = np.where(in_set, in_a, src_a)
        in_b = np.where(in_set, in_b, src_b)
        if self.has_k_src.any():  # an activation kernel: likewise
            ks_a, ks_b = self._propagate(out_a, out_b, self.k_src, dim=self.k_dim, has=self.has_k_src, t="k")
            k_a = np.where(k_set | ~self.has_k_src, k_a, ks_a)
            k_b = np.where(k_set | ~self.has_k_src, k_b, ks_b)
        else:
            ks_a, ks_b = k_a, k_b
        return {
            "out_a": out_a, "out_b": out_b, "in_a": in_a, "in_b": in_b, "k_a": k_a, "k_b": k_b,
            "src_a": src_a, "src_b": src_b, "ks_a": ks_a, "ks_b": ks_b, "in_set": in_set, "k_set": k_set,
        }  # fmt: skip

    def _propagate(self, out_a, out_b, src, dim, has, t):
        """The producer's output layout as seen at the consumer's operand (default where none)."""
        s = np.where(has, src, 0)
        rows = np.arange(self.n) * (NONE + 1)
        a = dim.reshape(-1)[rows + out_a[:, s]]
        b = dim.reshape(-1)[rows + out_b[:, s]]
        return np.where(has, a, self.defaults[t][:, 0]), np.where(has, b, self.defaults[t][:, 1])

    def cost(self, cfg: np.ndarray) -> np.ndarray:
        """Noise-free runtime in ns of each configuration.

        Args:
            cfg: (configs, configurable nodes, 18) integer array of layout values (-1..5).
        """
        c = cfg.shape[0]
        if self.n == 0:
            return np.full(c, self.base)
        e = self.effective(cfg)
        out_a, out_b, in_a, in_b, k_a, k_b = (e[k] for k in ("out_a", "out_b", "in_a", "in_b", "k_a", "k_b"))
        src_a, src_b, in_set, k_set = e["src_a"], e["src_b"], e["in_set"], e["k_set"]
        copy_in = in_set & ((in_a != src_a) | (in_b != src_b))
        copy_k = self.has_k_src & k_set & ((k_a != e["ks_a"]) | (k_b != e["ks_b"]))
        i_out, i_in, i_k = (
            self._row + a * (NONE + 1) + b for a, b in ((out_a, out_b), (in_a, in_b), (k_a, k_b))
        )
        p_out, p_in, p_k = self._flat["out"][i_out], self._flat["in"][i_in], self._flat["k"][i_k]
        p_src = self._pad("in", src_a, src_b)
        bo, bi, bk = self.bytes["out"], self.bytes["in"], self.bytes["k"]

        ph, bw = self.ph, self.bw
        op, role = self._op_time(e, i_in, i_k, (p_out, p_in, p_k))
        d_out = self.defaults["out"]

        # a producer's elementwise chain fuses into a consumer that reads its layout as written
        # (no copy between them): its traffic then mostly disappears; a forced copy breaks fusion
        fused = self._fused(~copy_in, ~copy_k)
        chain = self.chain * 2.0 * bo * self._powed["out"][i_out] / bw
        t = op + chain * np.where(fused, ph.fused_share, 1.0)
        cw = ph.copy_weight / bw  # forced copies: a pass over the tensor in both layouts
        t += copy_in * bi * (p_in + p_src) * cw
        p_ks = self._pad("k", e["ks_a"], e["ks_b"])
        t += copy_k * bk * (p_k + p_ks) * cw
        k_moved = (
            ~self.has_k_src & k_set & ((k_a != self.defaults["k"][:, 0]) | (k_b != self.defaults["k"][:, 1]))
        )
        t += k_moved * bk * (p_k + self._pad("k", *self._default_ab("k"))) * cw
        out_moved = (out_a != d_out[:, 0]) | (out_b != d_out[:, 1])
        t += (self.to_root & out_moved) * bo * (p_out + self._pad("out", *self._default_ab("out"))) * cw
        if self.hidden and len(self.feed_in):  # neighbours' output layouts together: extra traffic
            cons = self.feed_in
            extra = self.neighbour[role[:, self.src[cons]], role[:, cons]]
            t[:, cons] += extra * bi[cons] * p_in[:, cons] / bw
        total = self.base + t.sum(axis=1)
        if len(self.merge_a):  # two branches meeting in one op must share a layout: copy one
            ma, mb = self.merge_a, self.merge_b
            differ = (out_a[:, ma] != out_a[:, mb]) | (out_b[:, ma] != out_b[:, mb])
            pa = self._flat["out"][self._row[ma] + out_a[:, ma] * (NONE + 1) + out_b[:, ma]]
            pb = self._flat["out"][self._row[mb] + out_a[:, mb] * (NONE + 1) + out_b[:, mb]]
            total += (differ * self.merge_bytes * (pa + pb) * cw).sum(axis=1)
        return total

    def _op_time(
        self, e: dict, i_in: np.ndarray, i_k: np.ndarray, pads: tuple
    ) -> tuple[np.ndarray, np.ndarray]:
        """(configs, n) time of each conv/dot/reshape itself, and its output's minor role.

        Args:
            e: `effective` layouts.
            i_in, i_k: flat indices of the input and kernel layouts into the padding tables.
            pads: the output's, input's and kernel's padding factors.
        """
        ph, bw = self.ph, self.bw
        p_out, p_in, p_k = pads
        out_a, out_b, in_a, in_b, k_a = e["out_a"], e["out_b"], e["in_a"], e["in_b"], e["k_a"]
        bo, bi, bk = self.bytes["out"], self.bytes["in"], self.bytes["k"]
        orient = np.where(in_a == self.contract_in, 1.0, ph.mxu_input_penalty)
        orient *= np.where((k_a == self.contract_k) | (bk == 0), 1.0, ph.mxu_kernel_penalty)
        # padding to a power, read from tables raised once (a power per config is the slow part)
        compute = self.flops / PEAK_FLOPS_PER_NS * self._powed["in"][i_in] * self._powed["k"][i_k]
        compute *= orient * self.kind_eff
        traffic = bi * p_in + bk * p_k + bo * p_out  # padded bytes the op moves
        memory = traffic / bw
        # the MXU writes results feature-minor when it streams the input contraction-minor (and
        # the other way round); an output layout against that order costs an on-chip transpose
        natural = (in_a == self.contract_in) == (out_a == self.out_feature)
        memory += np.where(self.is_mxu & ~natural, ph.result_transpose * bo * p_out / bw, 0.0)
        role = self._role(out_a)
        mem_mult = self.role_cost[self.kind, role] if self.hidden else 1.0
        if np.isfinite(ph.cache_bytes) and ph.cache_cliff != 1.0:
            mem_mult = mem_mult * np.where(traffic > ph.cache_bytes, ph.cache_cliff, 1.0)
        memory = memory * mem_mult
        op = np.maximum(compute, memory) + ph.overlap * np.minimum(compute, memory)
        d_out, d_in = self.defaults["out"], self.defaults["in"]
        row_major = (
            (out_a == d_out[:, 0]) & (out_b == d_out[:, 1]) & (in_a == d_in[:, 0]) & (in_b == d_in[:, 1])
        )
        reshape = np.where(row_major, 0.0, (bi * p_in + bo * p_out) / bw * mem_mult)
        op = np.where(self.is_reshape, reshape, op)
        if self.affinity is not None:
            op = op * self.affinity[self._row // (NONE + 1) + np.minimum(out_a, NONE)]
        return op, role

    def _role(self, out_a: np.ndarray) -> np.ndarray:
        """(configs, n) the output's minor role: 0 its last dimension, 1 second-to-last, 2 other."""
        rank = self.ranks[0][None, :]
        return np.where(out_a == rank - 1, 0, np.where(out_a == rank - 2, 1, 2))

    def _fused(self, in_ok: np.ndarray, k_ok: np.ndarray) -> np.ndarray:
        """(configs, n): whether some consumer reads the node's output without a copy."""
        fused = np.zeros(in_ok.shape, dtype=bool)
        for consumers, producers, starts, which in self._feeds:
            ok = (in_ok, k_ok)[which]
            fused[:, producers] |= np.logical_or.reduceat(ok[:, consumers], starts, axis=1)
        return fused

    def _default_ab(self, t: str) -> tuple[np.ndarray, np.ndarray]:
        d = self.defaults[t]
        return d[:, 0], d[:, 1]


def _dim_map(perm: tuple[int, ...]) -> np.ndarray:
    """(7,) producer dim -> consumer dim for `perm` (consumer dim d = producer dim perm[d])."""
    m = np.arange(NONE + 1)
    for d, p in enumerate(perm):
        m[p] = d
    return m


def _by_producer(consumers: np.ndarray, producers: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Consumers grouped by the producer they read: (consumers in that order, each producer once,
    where each producer's run starts), for an OR over each producer's consumers in one reduceat."""
    order = np.argsort(producers, kind="stable")
    unique, starts = np.unique(producers[order], return_index=True)
    return consumers[order], unique, starts
