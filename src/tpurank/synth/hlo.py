"""HLO-like program graphs: real opcode ids, shapes, element types and default layouts.

Graphs are built block by block in topological (proto) order, so every edge `[user, operand]` has
user > operand, as in the real files. `xla` graphs are convolutional networks (NHWC activations,
2-D and 3-D convolutions, batch-norm style reductions, squeeze-excite branches with dots and
reshapes, a dense head); `nlp` graphs are transformer layers (projection and attention dots,
softmax, MLPs, reshapes between 2-D and 3-D activations); `tile` graphs are single fused kernels
of 2-100 nodes. Elementwise chains keep their operand's shape, so a layout chosen at one
configurable node propagates to the next one: that is what makes neighbouring configurable nodes
interact in the cost model.

Opcode ids were read from the real sample (the unet_3d protobuf aligned with its npz), e.g.
26 convolution, 34 dot, 41 fusion, 63 parameter, 75 reshape.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, field

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
    merges: list[tuple[int, int, float]] = field(default_factory=list)  # (config node, config node, bytes)

    @property
    def node_config_ids(self) -> np.ndarray:
        return np.array([c.node for c in self.configurable], dtype=np.int64)


@dataclass
class _Node:
    op: int
    shape: tuple[int, ...]
    etype: str
    operands: list[int]
    feats: dict[int, float] = field(default_factory=dict)
    perm: tuple[int, ...] = ()  # transposes: output dim d is operand dim perm[d]


class Builder:
    """Appends nodes in topological order and turns them into the 140-column node_feat."""

    def __init__(self, rng: np.random.Generator, etype: str = "f32") -> None:
        self.rng = rng
        self.etype = etype
        self.nodes: list[_Node] = []
        self.n_params = 0
        self.configurable: list[ConfigurableNode] = []
        self.splits: list[int] = [0]
        self.other_cost_ns = 0.0
        self._cfg_index: dict[int, int] = {}
        self._src_memo: dict[int, tuple[int, tuple[int, ...]]] = {}

    def __len__(self) -> int:
        return len(self.nodes)

    def add(
        self,
        op: str,
        shape: tuple[int, ...],
        operands: Sequence[int] = (),
        etype: str | None = None,
        feats: dict[int, float] | None = None,
    ) -> int:
        """Append a node (operands must already exist); returns its index."""
        self.nodes.append(_Node(OP[op], tuple(int(d) for d in shape), etype or self.etype, list(operands)))
        if feats:
            self.nodes[-1].feats.update(feats)
        # a non-configurable op streams its output once: a layout-independent share of runtime
        self.other_cost_ns += _bytes(shape, ETYPE_BYTES[etype or self.etype]) / BYTES_PER_NS + 80.0
        return len(self.nodes) - 1

    def param(self, shape: tuple[int, ...], etype: str | None = None) -> int:
        """A new parameter (numbered in order, as node_feat column 30 records)."""
        i = self.add("parameter", shape, [], etype=etype, feats={COL_PARAM: self.n_params})
        self.n_params += 1
        return i

    def chain(self, x: int, budget: int) -> int:
        """Elementwise ops on x (shape kept) adding about `budget` nodes: unary ops, binary ops and
        fusions over earlier values of the chain (residual-style), broadcast constants, selects."""
        shape = self.nodes[x].shape
        end = len(self.nodes) + budget
        seen = [x]  # earlier values of the chain, used as further operands
        while len(self.nodes) < end:
            name = ELEMENTWISE[int(self.rng.integers(len(ELEMENTWISE)))]
            left = end - len(self.nodes)
            if name in ("convert", "exponential", "tanh"):
                x = self.add(name, shape, [x])
            elif len(seen) >= 2 and self.rng.random() < 0.35:
                k = int(min(len(seen), self.rng.integers(2, 5)))
                ops = [seen[int(i)] for i in self.rng.choice(len(seen), size=k, replace=False)]
                x = self.add("fusion", shape, [x, *ops])  # a fused elementwise kernel
            elif left >= 3 and len(shape) > 1 and self.rng.random() < 0.25:
                c = self.add("constant", (shape[-1],))
                b = self.add("broadcast", shape, [c], feats={COL_DIMENSIONS0: len(shape) - 1})
                x = self.add(name, shape, [x, b])
            elif name == "select" and left >= 3:
                p = self.add("compare", shape, [x, seen[int(self.rng.integers(len(seen)))]], etype="pred")
                x = self.add("select", shape, [p, x, seen[int(self.rng.integers(len(seen)))]])
            else:
                other = seen[int(self.rng.integers(len(seen)))]
                x = self.add(name, shape, [x, other])
            seen.append(x)
        return x

    def conv(self, x: int, out_ch: int, window: tuple[int, ...], stride: int = 1) -> int:
        """A convolution over x (N, spatial..., C) with a parameter kernel; configurable."""
        n, *spatial, c = self.nodes[x].shape
        out_spatial = [max(1, s // stride) for s in spatial]
        k = self.param((*window, c, out_ch))
        out = (n, *out_spatial, out_ch)
        feats = _window_feats(window, stride)
        rank = len(out)
        feats.update({COL_CONV_DIMS0 + i: v for i, v in enumerate(_conv_dim_numbers(rank))})
        feats.update({COL_FEATURE_GROUPS: 1, COL_BATCH_GROUPS: 1})
        node = self.add("convolution", out, [x, k], feats=feats)
        flops = 2.0 * np.prod(out, dtype=np.float64) * c * np.prod(window)
        self._configurable(
            node,
            "conv",
            out,
            inp=self.nodes[x].shape,
            k=self.nodes[k].shape,
            flops=flops,
            contract_in=rank - 1,
            contract_k=rank - 2,
        )
        return node

    def dot(self, x: int, w_cols: int, w: int | None = None) -> int:
        """x (..., K) @ w (K, N) -> (..., N); w is a new parameter unless given; configurable."""
        *lead, kdim = self.nodes[x].shape
        if w is None:
            w = self.param((kdim, w_cols))
        out = (*lead, self.nodes[w].shape[-1])
        node = self.add("dot", out, [x, w])
        flops = 2.0 * np.prod(out, dtype=np.float64) * kdim
        self._configurable(
            node,
            "dot",
            out,
            inp=self.nodes[x].shape,
            k=self.nodes[w].shape,
            flops=flops,
            contract_in=len(lead),
            contract_k=0,
        )
        return node

    def batched_dot(self, x: int, y: int, out: tuple[int, ...], contract_x: int, contract_y: int) -> int:
        """A dot of two activations (attention scores, weighted values); configurable."""
        node = self.add("dot", out, [x, y])
        flops = 2.0 * np.prod(out, dtype=np.float64) * self.nodes[x].shape[contract_x]
        self._configurable(
            node,
            "dot",
            out,
            inp=self.nodes[x].shape,
            k=self.nodes[y].shape,
            flops=flops,
            contract_in=contract_x,
            contract_k=contract_y,
        )
        return node

    def transpose(self, x: int, perm: tuple[int, ...]) -> int:
        """x with its dims permuted (output dim d = input dim perm[d]); not configurable, but a
        layout propagates through it (a transpose is a free bitcast when the layouts line up)."""
        shape = self.nodes[x].shape
        feats = {COL_DIMENSIONS0 + i: float(p) for i, p in enumerate(perm) if p}
        node = self.add("transpose", tuple(shape[p] for p in perm), [x], feats=feats)
        self.nodes[node].perm = tuple(perm)
        return node

    def reshape(self, x: int, shape: tuple[int, ...]) -> int:
        """x reshaped to `shape` (same element count); configurable."""
        assert np.prod(shape) == np.prod(self.nodes[x].shape), (shape, self.nodes[x].shape)
        node = self.add("reshape", shape, [x])
        self._configurable(
            node, "reshape", shape, inp=self.nodes[x].shape, k=(), flops=0.0, contract_in=0, contract_k=0
        )
        return node

    def _configurable(self, node, kind, out, inp, k, flops, contract_in, contract_k) -> None:
        operands = self.nodes[node].operands
        src, src_perm = self._find_source(operands[0])
        k_src, k_perm = self._find_source(operands[1]) if len(operands) > 1 else (-1, ())
        self._cfg_index[node] = len(self.configurable)
        self.configurable.append(
            ConfigurableNode(
                node,
                kind,
                tuple(out),
                in_shape=tuple(inp),
                k_shape=tuple(k),
                flops=float(flops),
                contract_in=contract_in,
                contract_k=contract_k,
                src=src,
                etype_bytes=ETYPE_BYTES[self.etype],
                src_perm=src_perm,
                k_src=k_src,
                k_perm=k_perm,
            )
        )

    def _find_source(self, x: int) -> tuple[int, tuple[int, ...]]:
        """(configurable node whose output reaches x through shape-keeping elementwise ops and
        transposes, following each op's first stream operand, or -1; the dim map from x to it:
        x's dim d is the source's dim perm[d]). Memoised along the walk."""
        start, rank = x, len(self.nodes[x].shape)
        perm, walked = tuple(range(rank)), []  # perm: start's dims -> the current node's dims
        while True:
            if x in self._cfg_index:
                found, to_src = self._cfg_index[x], tuple(range(rank))
                break
            if x in self._src_memo:
                found, to_src = self._src_memo[x]
                break
            walked.append((x, perm))
            node = self.nodes[x]
            if (
                node.perm
                and node.operands
                and node.operands[0] not in _free_ids(self.nodes, node.operands[:1])
            ):
                perm = tuple(node.perm[d] for d in perm)
                x = node.operands[0]
                continue
            same = [o for o in node.operands if _is_stream(self.nodes, o, node.shape)]
            if node.op == OP["parameter"] or not same:
                found, to_src = -1, ()
                break
            x = same[0]
        for w, p in walked:  # w's dim e = start's dim d with p[d] == e; that is source dim to_src[perm[d]]
            if found < 0:
                self._src_memo[w] = (-1, ())
                continue
            inv = [0] * len(p)
            for d, e in enumerate(p):
                inv[e] = d
            self._src_memo[w] = (found, tuple(to_src[perm[inv[e]]] for e in range(len(p))))
        return self._src_memo[start] if start in self._src_memo else (found, tuple(to_src[d] for d in perm))

    def _merges(self) -> list[tuple[int, int, float]]:
        """(source a, source b, bytes) for every op combining the outputs of two different
        configurable nodes: it needs both in one layout, so a mismatch costs a copy."""
        out = []
        for nd in self.nodes:
            if nd.op in CONFIGURABLE_OPS or len(nd.operands) < 2:
                continue
            srcs = {self._find_source(o)[0] for o in nd.operands if _is_stream(self.nodes, o, nd.shape)} - {
                -1
            }
            if len(srcs) > 1:
                first, *rest = sorted(srcs)
                out += [(first, r, _bytes(nd.shape, ETYPE_BYTES[nd.etype])) for r in rest]
        return out

    def split(self) -> None:
        """End a computation here (the real files split at while/cond/cluster computations)."""
        if len(self.nodes) > self.splits[-1]:
            self.splits.append(len(self.nodes))

    def finish(self, outputs: list[int]) -> HloGraph:
        """Close with a tuple root over `outputs` and build the arrays."""
        root = self.add("tuple", (), outputs, etype="tuple", feats={COL_TUPLE: len(outputs)})
        users = _users(self.nodes)
        out_set = set(outputs)
        for c in self.configurable:
            c.chain, c.to_root = _follow_chain(self.nodes, users, c.node, out_set)
        graph = self._graph(root)
        graph.merges = self._merges()
        return graph

    def finish_kernel(self, root: int) -> HloGraph:
        """Close a tile kernel: its root is its last op (no tuple)."""
        return self._graph(root)

    def _graph(self, root: int) -> HloGraph:
        edges = [(u, v) for u, nd in enumerate(self.nodes) for v in dict.fromkeys(nd.operands)]
        splits = self.splits if self.splits[-1] == len(self.nodes) else [*self.splits, len(self.nodes)]
        return HloGraph(
            node_feat=node_features(self.nodes, root),
            node_opcode=np.array([nd.op for nd in self.nodes], dtype=np.uint8),
            edge_index=np.array(edges, dtype=np.int64).reshape(-1, 2),
            node_splits=np.array([splits], dtype=np.int64),
            configurable=self.configurable,
            other_cost_ns=self.other_cost_ns,
            root_shape=self.nodes[root].shape,
            root_etype_bytes=ETYPE_BYTES[self.nodes[root].etype],
        )


BYTES_PER_NS = 800.0  # ~800 GB/s HBM bandwidth (TPU v4-class), used for every memory-bound cost


def _bytes(shape: tuple[int, ...], itemsize: int) -> float:
    return float(np.prod(shape, dtype=np.float64)) * itemsize


def _window_feats(window: tuple[int, ...], stride: int) -> dict[int, float]:
    pad = [(w - 1) // 2 for w in window]
    groups = [list(window), [stride] * len(window), pad, pad, [1] * len(window), [1] * len(window)]
    out: dict[int, float] = {}
    for g, values in enumerate(groups):
        base = WINDOW_GROUPS0 + 8 * g
        for i, v in enumerate(values):
            out[base + i] = v
        out[base + 6] = sum(values)
        out[base + 7] = float(np.prod(values))
    return out


def _conv_dim_numbers(rank: int) -> list[int]:
    """input batch, input feature, input spatial..., kernel in/out feature, kernel spatial..., output."""
    spatial = list(range(1, rank - 1))
    return [0, rank - 1, *spatial, rank - 2, rank - 1, *range(rank - 2), 0, rank - 1, *spatial][:14]


def _users(nodes: list[_Node]) -> list[list[int]]:
    users: list[list[int]] = [[] for _ in nodes]
    for u, nd in enumerate(nodes):
        for v in dict.fromkeys(nd.operands):
            users[v].append(u)
    return users


def _is_stream(nodes: list[_Node], o: int, shape: tuple[int, ...]) -> bool:
    """Whether operand o carries a tensor stream of this shape (not a constant, a broadcast of
    one, or a parameter, which any layout can be read from for free)."""
    return nodes[o].shape == shape and nodes[o].op not in _FREE_OPERANDS


_FREE_OPERANDS = (OP["constant"], OP["broadcast"], OP["parameter"], OP["iota"])


def _free_ids(nodes: list[_Node], ids: list[int]) -> set[int]:
    return {o for o in ids if nodes[o].op in _FREE_OPERANDS}


def _follow_chain(
    nodes: list[_Node], users: list[list[int]], start: int, outputs: set[int]
) -> tuple[int, bool]:
    """(ops computed only from `start`'s output, in its shape; whether they reach an output).

    An op also fed by another stream (a residual add of two branches) is a merge point: it is
    not counted here (see `_merges`), and the chain stops there. Nodes are visited in index
    (topological) order, so an op is judged once all its operands from the chain are known.
    """
    shape, heap, seen, to_root = nodes[start].shape, [start], {start}, start in outputs
    while heap:
        x = heapq.heappop(heap)
        for u in users[x]:
            nd = nodes[u]
            if u in seen or nd.shape != shape or nd.op in CONFIGURABLE_OPS:
                continue
            if all(o in seen for o in nd.operands if _is_stream(nodes, o, shape)):
                seen.add(u)
                to_root = to_root or u in outputs
                heapq.heappush(heap, u)
    return len(seen) - 1, to_root


def node_features(nodes: list[_Node], root: int) -> np.ndarray:
    """The 140 real node_feat columns from each node's shape, element type, layout and attributes."""
    feat = np.zeros((len(nodes), 140), dtype=np.float32)
    feat[:, [WINDOW_GROUPS0 + 8 * g + 7 for g in range(6)]] = 1.0  # products over empty windows
    feat[:, list(SLICE_PRODUCT_COLS)] = 1.0
    for i, nd in enumerate(nodes):
        feat[i, COL_ETYPE0 + ETYPE_COL[nd.etype]] = 1.0
        dims = nd.shape[:6]
        feat[i, COL_DIMS0 : COL_DIMS0 + len(dims)] = dims
        feat[i, COL_DIM_SUM] = sum(dims)
        feat[i, COL_DIM_PROD] = float(np.prod(dims)) if nd.etype != "tuple" else 0.0
        rank = len(dims)
        feat[i, COL_LAYOUT0 : COL_LAYOUT0 + rank] = list(range(rank - 1, -1, -1))  # row-major default
        for col, v in nd.feats.items():
            feat[i, col] = v
    feat[root, COL_ROOT] = 1.0
    return feat


# ----------------------------------------------------------------------------- graph families


def _pick(rng: np.random.Generator, values) -> int:
    return int(values[int(rng.integers(len(values)))])


def _split_budget(rng: np.random.Generator, total: int, parts: int) -> list[int]:
    """Split `total` filler nodes into `parts` random non-negative shares."""
    if parts <= 0:
        return []
    w = rng.dirichlet(np.full(parts, 0.7))
    out = np.floor(w * max(total, 0)).astype(int)
    return out.tolist()


def xla_graph(rng: np.random.Generator, nodes: int, configurable: int) -> HloGraph:
    """A convolutional network: conv blocks (conv -> batch-norm -> elementwise -> conv), some with
    a squeeze-excite branch (reduce -> dot -> dot -> reshape -> scale), and a dense head."""
    b = Builder(rng, etype="bf16" if rng.random() < 0.5 else "f32")
    three_d = rng.random() < 0.2
    spatial = (_pick(rng, [8, 16, 32]),) * 3 if three_d else (_pick(rng, [14, 28, 56, 112, 224]),) * 2
    batch = _pick(rng, [1, 2, 4, 8, 16, 32, 128])
    x = b.param((batch, *spatial, _pick(rng, [3, 16, 32, 64])))
    p_se = rng.uniform(0.0, 0.8)  # share of blocks with a squeeze-excite branch (dots + a reshape)
    blocks = max(1, int(np.ceil((configurable - 2) / (2 + 3 * p_se))))
    filler = _split_budget(rng, nodes - round(blocks * (12 + 12 * p_se)) - 6, blocks)
    outputs: list[int] = []
    for i in range(blocks):
        out_ch = _pick(rng, [16, 32, 48, 64, 96, 128, 192, 256, 384, 512])
        window = (3,) * len(spatial) if rng.random() < 0.6 else (1,) * len(spatial)
        stride = 2 if (rng.random() < 0.15 and min(b.nodes[x].shape[1:-1]) >= 4) else 1
        y = b.conv(x, out_ch, window, stride)
        # batch-norm style statistics: reduce over N and spatial, broadcast back
        red = b.add("reduce", (out_ch,), [y, b.add("constant", ())], feats={COL_DIMENSIONS0: 0})
        scale = b.add("rsqrt", (out_ch,), [red])
        bs = b.add("broadcast", b.nodes[y].shape, [scale], feats={COL_DIMENSIONS0: len(spatial) + 1})
        y = b.add("multiply", b.nodes[y].shape, [y, bs])
        y = b.chain(y, filler[i] if i < len(filler) else 0)
        y = b.add("maximum", b.nodes[y].shape, [y, b.add("constant", ())])
        y = b.conv(y, out_ch, (1,) * len(spatial))
        x = b.add("add", b.nodes[y].shape, [y, b.nodes[y].operands[0]])
        if rng.random() < p_se:
            x = _squeeze_excite(b, x)
        if rng.random() < 0.25:
            b.split()
        if rng.random() < 0.1:
            outputs.append(x)
    shape = b.nodes[x].shape
    flat = b.reshape(x, (shape[0], int(np.prod(shape[1:]))))
    logits = b.dot(flat, _pick(rng, [10, 100, 1000]))
    outputs.append(b.add("add", b.nodes[logits].shape, [logits, b.param(b.nodes[logits].shape)]))
    _tail(b, rng, nodes, outputs=outputs, sizes=[64, 128, 256, 1000])
    return b.finish(outputs)


def _squeeze_excite(b: Builder, x: int) -> int:
    """Global pool -> dot -> relu -> dot -> reshape back to (N, 1.., C) -> scale x."""
    shape = b.nodes[x].shape
    n, c = shape[0], shape[-1]
    pooled = b.add("reduce", (n, c), [x, b.add("constant", ())], feats={COL_DIMENSIONS0: 1})
    d1 = b.dot(pooled, max(8, c // 4))
    d1 = b.add("maximum", b.nodes[d1].shape, [d1, b.add("constant", ())])
    d2 = b.add("tanh", (n, c), [b.dot(d1, c)])
    r = b.reshape(d2, (n, *([1] * (len(shape) - 2)), c))
    bc = b.add("broadcast", shape, [r], feats={COL_DIMENSIONS0: 0, COL_DIMENSIONS0 + 1: len(shape) - 1})
    return b.add("multiply", shape, [x, bc])


def _tail(b: Builder, rng: np.random.Generator, nodes: int, outputs: list[int], sizes: list[int]) -> None:
    """Optimizer-style tail up to `nodes`: small elementwise chains on parameters."""
    while len(b) < nodes - 1:
        p = b.param((_pick(rng, sizes),))
        outputs.append(b.chain(p, int(min(rng.integers(1, 6), max(1, nodes - 2 - len(b))))))


def nlp_graph(rng: np.random.Generator, nodes: int, configurable: int) -> HloGraph:
    """Transformer layers on (batch, seq, hidden): q/k/v projections (dot), batched attention dots
    with a softmax between them, an output projection and an MLP (sometimes run on the flattened
    (batch*seq, hidden) activations, between two reshapes)."""
    b = Builder(rng, etype="bf16" if rng.random() < 0.6 else "f32")
    batch = _pick(rng, [1, 2, 4, 8, 16, 32, 64])
    seq = _pick(rng, [32, 64, 128, 256, 384, 512])
    hidden = _pick(rng, [128, 256, 384, 512, 768, 1024])
    x = b.param((batch, seq, hidden))
    p_flat = rng.uniform(0.0, 0.8)  # share of MLPs run on flattened activations (2 reshapes)
    layers = max(1, round(configurable / (8 + 2 * p_flat)))
    filler = _split_budget(rng, nodes - layers * 30 - 8, layers)
    outputs: list[int] = []
    att = (batch, seq, seq)
    for i in range(layers):
        q, k, v = b.dot(x, hidden), b.dot(x, hidden), b.dot(x, hidden)
        kt = b.transpose(k, (0, 2, 1))
        s = b.batched_dot(q, kt, att, contract_x=2, contract_y=1)
        m = b.add("reduce", (batch, seq), [s, b.add("constant", ())], feats={COL_DIMENSIONS0: 2})
        mb = b.add("broadcast", att, [m], feats={COL_DIMENSIONS0: 0, COL_DIMENSIONS0 + 1: 1})
        e = b.add("exponential", att, [b.add("subtract", att, [s, mb])])
        z = b.add("reduce", (batch, seq), [e, b.add("constant", ())], feats={COL_DIMENSIONS0: 2})
        zb = b.add("broadcast", att, [z], feats={COL_DIMENSIONS0: 0, COL_DIMENSIONS0 + 1: 1})
        p = b.add("divide", att, [e, zb])
        a = b.batched_dot(p, v, (batch, seq, hidden), contract_x=2, contract_y=1)
        r = b.add("add", (batch, seq, hidden), [b.dot(a, hidden), x])
        r = b.chain(r, filler[i] if i < len(filler) else 0)
        flat = rng.random() < p_flat
        h = b.reshape(r, (batch * seq, hidden)) if flat else r
        h = b.dot(h, hidden * 4)
        h = b.add("multiply", b.nodes[h].shape, [b.add("tanh", b.nodes[h].shape, [h]), h])
        o = b.dot(h, hidden)
        if flat:
            o = b.reshape(o, (batch, seq, hidden))
        x = b.add("add", (batch, seq, hidden), [o, r])
        if rng.random() < 0.1:
            b.split()
    outputs.append(x)
    _tail(b, rng, nodes, outputs=outputs, sizes=[hidden])
    return b.finish(outputs)


def tile_graph(rng: np.random.Generator, nodes: int) -> HloGraph:
    """One fused kernel (2-100 nodes): parameters, an optional conv or dot, elementwise ops, a root."""
    b = Builder(rng, etype="bf16" if rng.random() < 0.5 else "f32")
    kind = rng.choice(["dot", "conv", "elementwise", "reduce"], p=[0.35, 0.25, 0.3, 0.1])
    if kind == "conv":
        x = b.param(
            (
                _pick(rng, [1, 8, 32, 128]),
                _pick(rng, [7, 14, 28, 56]),
                _pick(rng, [7, 14, 28, 56]),
                _pick(rng, [3, 32, 64, 128]),
            )
        )
        y = b.conv(x, _pick(rng, [32, 64, 128, 256]), (3, 3))
        per_out = 2.0 * b.nodes[x].shape[-1] * 9
    elif kind == "dot":
        x = b.param((_pick(rng, [8, 64, 128, 512, 1024, 4096]), _pick(rng, [64, 128, 256, 768, 1024])))
        y = b.dot(x, _pick(rng, [64, 100, 128, 256, 1000, 3072]))
        per_out = 2.0 * b.nodes[x].shape[-1]
    else:
        shape = tuple(
            _pick(rng, [1, 3, 8, 16, 32, 49, 64, 128, 256, 512, 1024]) for _ in range(int(rng.integers(1, 5)))
        )
        y = b.param(shape)
        per_out = 1.0
    y = b.chain(y, max(1, nodes - len(b) - 2))  # a kernel has at least one op besides its inputs
    if kind == "reduce" and len(b.nodes[y].shape) > 1:
        y = b.add(
            "reduce",
            b.nodes[y].shape[:-1],
            [y, b.add("constant", ())],
            feats={COL_DIMENSIONS0: len(b.nodes[y].shape) - 1},
        )
    g = b.finish_kernel(y)
    g.configurable = []  # tile configs are per kernel, not per node
    g.flops_per_output = per_out + len(b)
    return g


def layout_graph(rng: np.random.Generator, family: str, nodes: int, configurable: int) -> HloGraph:
    """A layout graph of about `nodes` nodes and `configurable` conv/dot/reshape nodes.

    Args:
        rng: the random source (the graph is a pure function of it).
        family: "xla" (convolutional nets) or "nlp" (transformers).
        nodes: target node count (the result is within a few nodes of it unless blocks need more).
        configurable: target number of configurable nodes (approximate).
    """
    if family == "xla":
        return xla_graph(rng, nodes, configurable)
    if family == "nlp":
        return nlp_graph(rng, nodes, configurable)
    raise ValueError(f"unknown family {family!r}")
