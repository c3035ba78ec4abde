"""The hidden TPU cost model that turns a graph and a configuration into a runtime (ns).

It is deliberately physical, so that what a ranker learns on synthetic data is the kind of thing
that matters on real TPUs, and deliberately hidden (nothing here is written into the files).

Layout collections. A configurable node (convolution, dot, reshape) has three tensors: output,
input and kernel. Each tensor's layout is a minor-to-major order; what matters on a TPU is the
minor dimension (mapped to the 128 vector lanes) and the second-minor one (8 sublanes, 16 for
bf16, which packs two values per sublane). A config value of -1 means "compiler default": the
default output layout is row-major, a default input takes whatever layout its producer wrote
(renamed through any transposes between them), a default weight kernel is laid out for the MXU
(contracted dimension minor), and a default activation kernel (attention dots) takes its
producer's layout like an input.

- Padding waste: a tensor of shape S in layout (a, b) occupies
  `ceil(S[a]/128)*128/S[a] * ceil(S[b]/8)*8/S[b]` times its real bytes; every memory cost below
  is scaled by it (3 channels on the lanes waste 42x; 256 waste nothing).
- Compute (conv, dot): `flops / PEAK` times `(pad_in * pad_kernel) ** 0.35` times 1.3 when the input's
  minor dimension is not the contracted one (the MXU then needs a transpose on the fly) and 1.15
  for the kernel; the op runs as a roofline `max(compute, memory) + 0.2 * min(compute, memory)`.
  The MXU writes its result feature-minor when it reads the input contraction-minor (and the
  other way round): an output layout against that pairing adds RESULT_TRANSPOSE passes over the
  output (an interaction of the node's own input and output layouts, which per-tensor counts miss).
- Reshape: free (a bitcast) when both its layouts are the row-major defaults, else a physical copy
  of its bytes in both layouts.
- Forced copies: an explicitly chosen input layout that differs from what the producing
  configurable node wrote (through layout-keeping elementwise ops and transposes, which rename
  the dimensions: a transpose is a free bitcast exactly when the consumer reads the renamed
  layout, so the producer's literal layout costs a copy there) costs a copy of the tensor in
  both layouts; the same holds for an activation kernel and its producer; a non-default kernel layout costs a copy of the weights; an output that reaches
  the program result in a non-default layout costs a copy back. Copies grow with tensor bytes, so
  neighbouring configurable nodes interact: a producer's output layout should match what its
  consumer wants. Where two branches from different configurable nodes meet in one op (a
  residual add), differing output layouts cost a copy of one branch.
- The elementwise ops computed only from a configurable node's output run in its layout: their
  memory traffic is scaled by that layout's padding (to the power 0.7: fusion hides part of it).
  The chain fuses into a consumer that reads the producer's layout as written (no copy between
  them), leaving FUSED_SHARE of its traffic; a forced copy breaks that fusion, so a
  producer/consumer mismatch costs more the longer the chain between them (no feature counts it).
- Everything else in the graph costs a fixed, layout-independent time.

Tile collection. The kernel's output (shape S) is cut into tiles t; runtime is
`n_tiles * (per-tile overhead + max(compute, memory))` with tiles padded to (8|16, 128); tiles
whose double-buffered working set overflows the 16 MiB of on-chip vector memory spill: each
doubling beyond it adds the tile's time once more.

Measurements: each runtime is the modelled cost times `exp(PROGRAM_SIGMA * z + N(0, NOISE_SIGMA))`.
`z` (`program_noise`) is a repeatable deviation per compiled program (hashed from the cost: equal
costs, equal deviation), standing for what the model leaves out; it cannot be learned from the
configs and sets how hard the ranking is (PROGRAM_SIGMA = 0.1% puts the random, heuristic and lgbm
taus of `compare-synth` within 0.1 of the real sample's on the xla default pair). The
jitter is what re-measuring adds: real duplicate configs differ by ~1e-5 (at most 8e-5), and so
do the synthetic ones. Runtimes are integer ns, so close runtimes tie as in the real files.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import ndtri

from tpurank.synth.hlo import BYTES_PER_NS, HloGraph

PEAK_FLOPS_PER_NS = 137_500.0  # ~137 TFLOP/s bf16 MXU throughput of one TPU v4 core
VPU_FLOPS_PER_NS = 4_000.0  # vector unit, for elementwise kernels
LANES, SUBLANES = 128, 8
NONE = 6  # "no such dimension" index in the layout tables (rank-1 tensors have no second-minor)
MXU_INPUT_PENALTY = 1.3  # input's minor dim is not the contracted one
MXU_KERNEL_PENALTY = 1.15  # kernel's minor dim is not the contracted one
OVERLAP = 0.2  # share of the smaller of compute/memory that does not overlap
NOISE_SIGMA = 2e-5  # re-measurement jitter: real duplicate configs differ by ~1e-5 (up to 8e-5)
PROGRAM_SIGMA = 0.001  # repeatable deviation of a program from the model (see program_noise)
COMPUTE_PAD_EXP = 0.35  # MXU time grows with padding less than linearly (weights stay resident)
CHAIN_PAD_EXP = 0.7  # fused elementwise ops hide part of the padded traffic
FUSED_SHARE = 0.3  # share of an elementwise chain's traffic left once it fuses into its consumer
RESULT_TRANSPOSE = 0.5  # extra passes over a conv/dot output written against the MXU's natural order
TILE_OVERHEAD_NS = 120.0  # fixed cost of one tile (grid step: DMA setup, pipeline fill)
VMEM_BYTES = 16 << 20  # on-chip vector memory
SPILL_SLOPE = 1.0  # relative slowdown per doubling of the working set beyond VMEM


def _lane_pad(d: int) -> float:
    return math.ceil(d / LANES) * LANES / d if d > 0 else 1.0


def _sublane_pad(d: int, itemsize: int) -> float:
    rows = SUBLANES * max(1, 4 // max(1, itemsize))
    return math.ceil(d / rows) * rows / d if d > 0 else 1.0


def pad_table(shape: tuple[int, ...], itemsize: int) -> np.ndarray:
    """(7, 7) padding factor of `shape` for every (minor, second-minor) pair; index 6 = none."""
    t = np.ones((NONE + 1, NONE + 1))
    for a, da in enumerate(shape[:6]):
        t[a, NONE] = _lane_pad(da)
        for b, db in enumerate(shape[:6]):
            if a != b:
                t[a, b] = _lane_pad(da) * _sublane_pad(db, itemsize)
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
    """

    def __init__(self, graph: HloGraph) -> None:
        nodes = graph.configurable
        self.n = len(nodes)
        self.base = float(graph.other_cost_ns)
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
                self.tables[t][j] = pad_table(shape, c.etype_bytes)
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
            (consumers, ok, _onehot(src[consumers], self.n))
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
        self._row = np.arange(self.n) * (NONE + 1) ** 2

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
        p_out, p_in, p_k = (
            self._pad("out", out_a, out_b),
            self._pad("in", in_a, in_b),
            self._pad("k", k_a, k_b),
        )
        p_src = self._pad("in", src_a, src_b)
        bo, bi, bk = self.bytes["out"], self.bytes["in"], self.bytes["k"]

        orient = np.where(in_a == self.contract_in, 1.0, MXU_INPUT_PENALTY)
        orient *= np.where((k_a == self.contract_k) | (bk == 0), 1.0, MXU_KERNEL_PENALTY)
        compute = self.flops / PEAK_FLOPS_PER_NS * (p_in * p_k) ** COMPUTE_PAD_EXP * orient
        memory = (bi * p_in + bk * p_k + bo * p_out) / BYTES_PER_NS
        # the MXU writes results feature-minor when it streams the input contraction-minor (and
        # the other way round); an output layout against that order costs an on-chip transpose
        natural = (in_a == self.contract_in) == (out_a == self.out_feature)
        memory += np.where(self.is_mxu & ~natural, RESULT_TRANSPOSE * bo * p_out / BYTES_PER_NS, 0.0)
        op = np.maximum(compute, memory) + OVERLAP * np.minimum(compute, memory)
        d_out, d_in = self.defaults["out"], self.defaults["in"]
        row_major = (
            (out_a == d_out[:, 0]) & (out_b == d_out[:, 1]) & (in_a == d_in[:, 0]) & (in_b == d_in[:, 1])
        )
        op = np.where(self.is_reshape, np.where(row_major, 0.0, (bi * p_in + bo * p_out) / BYTES_PER_NS), op)

        # a producer's elementwise chain fuses into a consumer that reads its layout as written
        # (no copy between them): its traffic then mostly disappears; a forced copy breaks fusion
        fused = self._fused(~copy_in, ~copy_k)
        chain = self.chain * 2.0 * bo * p_out**CHAIN_PAD_EXP / BYTES_PER_NS
        t = op + chain * np.where(fused, FUSED_SHARE, 1.0)
        t += copy_in * bi * (p_in + p_src) / BYTES_PER_NS
        p_ks = self._pad("k", e["ks_a"], e["ks_b"])
        t += copy_k * bk * (p_k + p_ks) / BYTES_PER_NS
        k_moved = (
            ~self.has_k_src & k_set & ((k_a != self.defaults["k"][:, 0]) | (k_b != self.defaults["k"][:, 1]))
        )
        t += k_moved * bk * (p_k + self._pad("k", *self._default_ab("k"))) / BYTES_PER_NS
        out_moved = (out_a != d_out[:, 0]) | (out_b != d_out[:, 1])
        t += (
            (self.to_root & out_moved)
            * bo
            * (p_out + self._pad("out", *self._default_ab("out")))
            / BYTES_PER_NS
        )
        total = self.base + t.sum(axis=1)
        if len(self.merge_a):  # two branches meeting in one op must share a layout: copy one
            ma, mb = self.merge_a, self.merge_b
            differ = (out_a[:, ma] != out_a[:, mb]) | (out_b[:, ma] != out_b[:, mb])
            pa = self._flat["out"][self._row[ma] + out_a[:, ma] * (NONE + 1) + out_b[:, ma]]
            pb = self._flat["out"][self._row[mb] + out_a[:, mb] * (NONE + 1) + out_b[:, mb]]
            total += (differ * self.merge_bytes * (pa + pb) / BYTES_PER_NS).sum(axis=1)
        return total

    def _fused(self, in_ok: np.ndarray, k_ok: np.ndarray) -> np.ndarray:
        """(configs, n): whether some consumer reads the node's output without a copy."""
        fused = np.zeros(in_ok.shape, dtype=bool)
        for consumers, which, onehot in self._feeds:
            ok = (in_ok, k_ok)[which]
            fused |= (ok[:, consumers].astype(np.float64) @ onehot) > 0
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


def _onehot(idx: np.ndarray, n: int) -> np.ndarray:
    m = np.zeros((len(idx), n))
    m[np.arange(len(idx)), idx] = 1.0
    return m


def program_noise(cost: np.ndarray) -> np.ndarray:
    """A standard normal per noise-free cost, the same wherever the cost is the same.

    Configs that compile to the same program (equal modelled cost) share it, so it is no
    measurement noise that averaging re-runs would remove: it stands for everything the model
    leaves out, is repeatable, and cannot be learned from the configs. Hashed from the cost's
    bits (splitmix64), not drawn from a generator, so streamed files get it chunk by chunk.
    """
    # quantised to 1e-8 relative: equal programs whose sums were added in another order agree
    bits = np.rint(np.log(np.maximum(np.asarray(cost, dtype=np.float64), 1e-300)) * 1e8).astype(np.int64)
    bits = bits.view(np.uint64)
    with np.errstate(over="ignore"):
        z = bits + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    u = ((z >> np.uint64(11)).astype(np.float64) + 0.5) / float(1 << 53)
    return ndtri(u)


def measure(cost: np.ndarray, rng: np.random.Generator, program_sigma: float | None = None) -> np.ndarray:
    """Noisy int64 measurements (ns) of noise-free costs: a repeatable per-program deviation
    (`program_noise`, scale `program_sigma`, default PROGRAM_SIGMA) times re-measurement jitter
    (scale NOISE_SIGMA)."""
    program_sigma = PROGRAM_SIGMA if program_sigma is None else program_sigma
    log_dev = program_sigma * program_noise(cost) + rng.normal(0.0, NOISE_SIGMA, size=cost.shape)
    noisy = cost * np.exp(log_dev)
    return np.maximum(1, np.rint(noisy)).astype(np.int64)


def tile_cost(graph: HloGraph, tiles: np.ndarray) -> np.ndarray:
    """Noise-free runtime in ns of each tile-size choice for a tile kernel.

    Args:
        graph: the kernel (its root_shape, root_etype_bytes and flops_per_output are used).
        tiles: (configs, rank) tile sizes along the root's dimensions (1..size).
    """
    shape = np.array(graph.root_shape or (1,), dtype=np.float64)
    tiles = tiles.astype(np.float64)
    itemsize = graph.root_etype_bytes or 4
    n_tiles = np.prod(np.ceil(shape / tiles), axis=1)
    padded = tiles.copy()
    padded[:, -1] = np.ceil(padded[:, -1] / LANES) * LANES
    if padded.shape[1] > 1:
        rows = SUBLANES * max(1, 4 // itemsize)
        padded[:, -2] = np.ceil(padded[:, -2] / rows) * rows
    elems = np.prod(padded, axis=1)
    # inputs + output, double-buffered; contraction kernels read a deeper input slab
    working_set = elems * itemsize * 2.0 * (2.0 + min(graph.flops_per_output, 4096.0) / 256.0)
    compute = elems * graph.flops_per_output / VPU_FLOPS_PER_NS
    memory = working_set / BYTES_PER_NS
    per_tile = np.maximum(compute, memory) + OVERLAP * np.minimum(compute, memory) + TILE_OVERHEAD_NS
    spill = 1.0 + SPILL_SLOPE * np.log2(np.maximum(1.0, working_set / VMEM_BYTES))
    return n_tiles * per_tile * spill + 0.05 * graph.other_cost_ns
