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

from tpurank.synth.cost_state import CostState, NodeView
from tpurank.synth.cost_terms import NONE, CostTerms, output_role, slot_layout
from tpurank.synth.hlo import BYTES_PER_NS, HloGraph
from tpurank.synth.noise import measure, program_noise
from tpurank.synth.physics import LANES, REFERENCE, SUBLANES, Physics, graph_rng
from tpurank.synth.tile_cost import tile_cost

__all__ = ["LayoutCostModel", "measure", "pad_table", "program_noise", "tile_cost"]

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


class LayoutCostModel(CostTerms):
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
        self._shape_tables(nodes)
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
        # layouts are dimension indices (0..6): int8 keeps the per-config arrays 8x smaller
        self._src_dim_flat = self.src_dim.reshape(-1).astype(np.int8)
        self._k_dim_flat = self.k_dim.reshape(-1).astype(np.int8)
        self.nodes = self._node_view()

    def _shape_tables(self, nodes: list) -> None:
        """Per node and tensor ("out", "in", "k"): its padding table, the layout the compiler picks
        and its bytes."""
        f = np.float64
        self.tables = {t: np.zeros((self.n, NONE + 1, NONE + 1)) for t in ("out", "in", "k")}
        self.defaults = {t: np.zeros((self.n, 2), dtype=np.int64) for t in ("out", "in", "k")}
        self.bytes = {t: np.zeros(self.n, dtype=f) for t in ("out", "in", "k")}
        for j, c in enumerate(nodes):
            for t, shape in (("out", c.out_shape), ("in", c.in_shape), ("k", c.k_shape)):
                self.tables[t][j] = pad_table(shape, c.etype_bytes, self.ph)
                self.defaults[t][j] = default_pair(len(shape))
                self.bytes[t][j] = float(np.prod(shape, dtype=f)) * c.etype_bytes if shape else 0.0
            if c.k_shape and c.k_src < 0:  # a weight parameter: the compiler lays it out for the MXU
                self.defaults["k"][j] = mxu_kernel_pair(len(c.k_shape), c.contract_k)

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

    def _node_view(self) -> NodeView:
        d = self.defaults
        return NodeView(
            row=self._row,
            dim_row=np.arange(self.n) * (NONE + 1),
            defaults={
                t: (d[t][:, 0].astype(np.int8), d[t][:, 1].astype(np.int8)) for t in ("out", "in", "k")
            },
            nbytes=self.bytes,
            flops=self.flops,
            contract_in=self.contract_in,
            contract_k=self.contract_k,
            kind=self.kind,
            kind_eff=self.kind_eff,
            is_mxu=self.is_mxu,
            is_reshape=self.is_reshape,
            out_feature=self.out_feature,
            chain=self.chain,
            to_root=self.to_root,
            has_src=self.has_src,
            has_k_src=self.has_k_src,
            rank_out=self.ranks[0],
        )

    def effective(self, cfg: np.ndarray) -> dict[str, np.ndarray]:
        """The layout each tensor really gets: (minor, second-minor) per (config, node) for out,
        in and k, the producer's layout `src` reaching the input, and which slots were set."""
        nv = self.nodes
        out = slot_layout(cfg[:, :, 0], cfg[:, :, 1], *nv.defaults["out"])[:2]
        s = np.where(self.has_src, self.src, 0)
        ks = np.where(self.has_k_src, self.k_src, 0)
        k_out = (out[0][:, ks], out[1][:, ks]) if self.has_k_src.any() else None
        own = tuple(cfg[:, :, i] for i in (6, 7, 12, 13))
        return self._resolve(nv, own, out, (out[0][:, s], out[1][:, s]), k_out)

    def cost(self, cfg: np.ndarray) -> np.ndarray:
        """Noise-free runtime in ns of each configuration.

        Args:
            cfg: (configs, configurable nodes, 18) integer array of layout values (-1..5).
        """
        if self.n == 0:
            return np.full(cfg.shape[0], self.base)
        return self.totals(self.state(cfg))

    def totals(self, state: CostState) -> np.ndarray:
        """Noise-free runtime in ns of each config of `state` (summed as `cost` sums)."""
        if self.n == 0:
            return np.full(len(state.t), self.base)
        # the sums run over the memory layouts a full evaluation leaves (its merges come out in
        # column-major order, whose row sums add in another order than row-major ones)
        total = self.base + np.ascontiguousarray(state.t).sum(axis=1)
        if len(self.merge_a):
            total += np.asfortranarray(state.merge).sum(axis=1)
        return total

    def state(self, cfg: np.ndarray) -> CostState:
        """Every term of each config's runtime, evaluated in full (`totals` sums them)."""
        if self.n == 0:
            return CostState.empty(len(cfg), 0, len(self.merge_a))
        e = self.effective(cfg)
        terms = self._terms(self.nodes, e)
        fused = self._fused(~terms["copy_in"], ~terms["copy_k"])
        role_src = terms["role"][:, np.where(self.has_src, self.src, 0)] if self.hidden else None
        t = self._combine(self.nodes, terms, fused, role_src)
        ma, mb = self.merge_a, self.merge_b
        merge = self._merge_terms(
            (e["out_a"][:, ma], e["out_b"][:, ma]),
            (e["out_a"][:, mb], e["out_b"][:, mb]),
            ma,
            mb,
            self.merge_bytes,
        )
        return CostState(t, merge, terms["copy_in"], terms["copy_k"])

    def child_state(self, state: CostState, parents: np.ndarray, kids: np.ndarray) -> CostState:
        """The state of `kids`, each a change of a few nodes of the config in the same row of
        `parents`, from `state`: the parents' states (a copy, such as `CostState.take` gives,
        updated in place and returned).

        Only the terms a change can reach are evaluated again: a changed node's, its consumers'
        when its output changed (they read its layout), its producers' when an operand changed
        (fusion), and the merges of a changed output. They go through the same operations as in
        `state`, so every number, and every `totals`, equals a full evaluation's bit for bit.
        """
        if self.n == 0:
            return state
        # a tensor's minor and second-minor (its first two slots, one int16) are all that costs
        diff = kids.view(np.int16)[:, :, ::3] != parents.view(np.int16)[:, :, ::3]
        ch_out, ch_in, ch_k = diff[:, :, 0], diff[:, :, 1], diff[:, :, 2]
        hit = ch_out | ch_in | ch_k
        hit[:, self.feed_in] |= ch_out[:, self.src[self.feed_in]]
        hit[:, self.feed_k] |= ch_out[:, self.k_src[self.feed_k]]
        for consumers, producers, starts, which in self._feeds:
            hit[:, producers] |= np.logical_or.reduceat((ch_in, ch_k)[which][:, consumers], starts, axis=1)
        r, j = np.nonzero(hit)
        nv, own = self.nodes.take(j), kids[r, j]
        s = np.where(self.has_src, self.src, 0)[j]
        src_out = self._out_layout(kids, r, s)
        k_out = (
            self._out_layout(kids, r, np.where(self.has_k_src, self.k_src, 0)[j])
            if self.has_k_src.any()
            else None
        )
        out = slot_layout(own[:, 0], own[:, 1], *nv.defaults["out"])[:2]
        e = self._resolve(nv, (own[:, 6], own[:, 7], own[:, 12], own[:, 13]), out, src_out, k_out)
        terms = self._terms(nv, e)
        state.copy_in[r, j], state.copy_k[r, j] = terms["copy_in"], terms["copy_k"]
        fused = self._fused(~state.copy_in, ~state.copy_k)[r, j]
        role_src = output_role(src_out[0], self.ranks[0][s]) if self.hidden else None
        state.t[r, j] = self._combine(nv, terms, fused, role_src)
        if len(self.merge_a):
            ma, mb = self.merge_a, self.merge_b
            mr, m = np.nonzero(ch_out[:, ma] | ch_out[:, mb])
            a, b = self._out_layout(kids, mr, ma[m]), self._out_layout(kids, mr, mb[m])
            state.merge[mr, m] = self._merge_terms(a, b, ma[m], mb[m], self.merge_bytes[m])
        return state

    def _out_layout(
        self, cfg: np.ndarray, rows: np.ndarray, nodes: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The effective (minor, second-minor) output layout of node `nodes[i]` in config `rows[i]`."""
        d = self.defaults["out"]
        return slot_layout(cfg[rows, nodes, 0], cfg[rows, nodes, 1], d[nodes, 0], d[nodes, 1])[:2]


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
