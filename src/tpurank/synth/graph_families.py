"""The synthetic graph families: `xla` convolutional networks, `nlp` transformer layers and `tile`
single fused kernels.

`xla` graphs are NHWC activations through 2-D and 3-D convolutions, batch-norm style reductions,
squeeze-excite branches with dots and reshapes, and a dense head; `nlp` graphs are transformer
layers (projection and attention dots, softmax, MLPs, reshapes between 2-D and 3-D activations);
`tile` graphs are single fused kernels of 2-100 nodes. Each is a pure function of its random source.
"""

from __future__ import annotations

import numpy as np

from tpurank.synth.hlo import COL_DIMENSIONS0, HloGraph
from tpurank.synth.hlo_builder import Builder


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
