"""Build HLO-like graphs node by node and turn them into the real file's arrays.

Nodes are appended in topological (proto) order, so every edge `[user, operand]` has user > operand,
as in the real files. Elementwise chains keep their operand's shape, so a layout chosen at one
configurable node propagates to the next one: that is what makes neighbouring configurable nodes
interact in the cost model (`ConfigurableNode.src`, `HloGraph.merges`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from tpurank.synth.hlo import (
    BYTES_PER_NS,
    COL_BATCH_GROUPS,
    COL_CONV_DIMS0,
    COL_DIM_PROD,
    COL_DIM_SUM,
    COL_DIMENSIONS0,
    COL_DIMS0,
    COL_ETYPE0,
    COL_FEATURE_GROUPS,
    COL_LAYOUT0,
    COL_PARAM,
    COL_ROOT,
    COL_TUPLE,
    CONFIGURABLE_OPS,
    ELEMENTWISE,
    ETYPE_BYTES,
    ETYPE_COL,
    OP,
    SLICE_PRODUCT_COLS,
    WINDOW_GROUPS0,
    ConfigurableNode,
    HloGraph,
    Merge,
    Node,
)
from tpurank.synth.hlo_chains import follow_chain, free_ids, is_stream, users_of


class Builder:
    """Appends nodes in topological order and turns them into the 140-column node_feat."""

    def __init__(self, rng: np.random.Generator, etype: str = "f32") -> None:
        self.rng = rng
        self.etype = etype
        self.nodes: list[Node] = []
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
        self.nodes.append(Node(OP[op], tuple(int(d) for d in shape), etype or self.etype, list(operands)))
        if feats:
            self.nodes[-1].feats.update(feats)
        # a non-configurable op streams its output once: a layout-independent share of runtime
        self.other_cost_ns += (
            _bytes(self.nodes[-1].shape, ETYPE_BYTES[etype or self.etype]) / BYTES_PER_NS + 80.0
        )
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
        flops = 2.0 * _numel(out) * c * math.prod(window)
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
        flops = 2.0 * _numel(out) * kdim
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
        flops = 2.0 * _numel(out) * self.nodes[x].shape[contract_x]
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
        assert math.prod(shape) == math.prod(self.nodes[x].shape), (shape, self.nodes[x].shape)
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
                and node.operands[0] not in free_ids(self.nodes, node.operands[:1])
            ):
                perm = tuple(node.perm[d] for d in perm)
                x = node.operands[0]
                continue
            same = [o for o in node.operands if is_stream(self.nodes, o, node.shape)]
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

    def _merges(self) -> list[Merge]:
        """A merge (source a, source b, bytes) for every op combining the outputs of two different
        configurable nodes: it needs both in one layout, so a mismatch costs a copy."""
        out = []
        for nd in self.nodes:
            if nd.op in CONFIGURABLE_OPS or len(nd.operands) < 2:
                continue
            srcs = {self._find_source(o)[0] for o in nd.operands if is_stream(self.nodes, o, nd.shape)} - {-1}
            if len(srcs) > 1:
                first, *rest = sorted(srcs)
                out += [Merge(first, r, _bytes(nd.shape, ETYPE_BYTES[nd.etype])) for r in rest]
        return out

    def split(self) -> None:
        """End a computation here (the real files split at while/cond/cluster computations)."""
        if len(self.nodes) > self.splits[-1]:
            self.splits.append(len(self.nodes))

    def finish(self, outputs: list[int]) -> HloGraph:
        """Close with a tuple root over `outputs` and build the arrays."""
        root = self.add("tuple", (), outputs, etype="tuple", feats={COL_TUPLE: len(outputs)})
        users = users_of(self.nodes)
        out_set = set(outputs)
        for c in self.configurable:
            c.chain, c.to_root = follow_chain(self.nodes, users, c.node, out_set)
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


def _numel(shape: tuple[int, ...]) -> float:
    """Elements of a tensor, as a float. math.prod, not np.prod (whose call overhead was a tenth
    of a big graph's build): the same number, as every partial product of a tensor's dims is an
    integer below 2**53, exact in float64 whatever the order."""
    return float(math.prod(shape))


def _bytes(shape: tuple[int, ...], itemsize: int) -> float:
    return _numel(shape) * itemsize


def _window_feats(window: tuple[int, ...], stride: int) -> dict[int, float]:
    pad = [(w - 1) // 2 for w in window]
    groups = [list(window), [stride] * len(window), pad, pad, [1] * len(window), [1] * len(window)]
    out: dict[int, float] = {}
    for g, values in enumerate(groups):
        base = WINDOW_GROUPS0 + 8 * g
        for i, v in enumerate(values):
            out[base + i] = v
        out[base + 6] = sum(values)
        out[base + 7] = float(math.prod(values))
    return out


def _conv_dim_numbers(rank: int) -> list[int]:
    """input batch, input feature, input spatial..., kernel in/out feature, kernel spatial..., output."""
    spatial = list(range(1, rank - 1))
    return [0, rank - 1, *spatial, rank - 2, rank - 1, *range(rank - 2), 0, rank - 1, *spatial][:14]


def node_features(nodes: list[Node], root: int) -> np.ndarray:
    """The 140 real node_feat columns from each node's shape, element type, layout and attributes."""
    feat = np.zeros((len(nodes), 140), dtype=np.float32)
    feat[:, [WINDOW_GROUPS0 + 8 * g + 7 for g in range(6)]] = 1.0  # products over empty windows
    feat[:, list(SLICE_PRODUCT_COLS)] = 1.0
    for i, nd in enumerate(nodes):
        feat[i, COL_ETYPE0 + ETYPE_COL[nd.etype]] = 1.0
        dims = nd.shape[:6]
        feat[i, COL_DIMS0 : COL_DIMS0 + len(dims)] = dims
        feat[i, COL_DIM_SUM] = sum(dims)
        feat[i, COL_DIM_PROD] = float(math.prod(dims)) if nd.etype != "tuple" else 0.0
        rank = len(dims)
        feat[i, COL_LAYOUT0 : COL_LAYOUT0 + rank] = list(range(rank - 1, -1, -1))  # row-major default
        for col, v in nd.feats.items():
            feat[i, col] = v
    feat[root, COL_ROOT] = 1.0
    return feat
