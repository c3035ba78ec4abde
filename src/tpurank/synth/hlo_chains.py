"""How a layout travels through a graph being built: the ops computed only from one stream (a
configurable node's elementwise chain, which keeps its layout) and the operands that carry a stream
at all (constants, broadcasts and parameters can be read in any layout for free).
"""

from __future__ import annotations

import heapq

from tpurank.synth.hlo import CONFIGURABLE_OPS, OP, Node


def users_of(nodes: list[Node]) -> list[list[int]]:
    """For each node, the nodes that take it as an operand (each once, in index order)."""
    users: list[list[int]] = [[] for _ in nodes]
    for u, nd in enumerate(nodes):
        for v in dict.fromkeys(nd.operands):
            users[v].append(u)
    return users


def is_stream(nodes: list[Node], o: int, shape: tuple[int, ...]) -> bool:
    """Whether operand o carries a tensor stream of this shape (not a constant, a broadcast of
    one, or a parameter, which any layout can be read from for free)."""
    return nodes[o].shape == shape and nodes[o].op not in FREE_OPERANDS


FREE_OPERANDS = (OP["constant"], OP["broadcast"], OP["parameter"], OP["iota"])


def free_ids(nodes: list[Node], ids: list[int]) -> set[int]:
    return {o for o in ids if nodes[o].op in FREE_OPERANDS}


def follow_chain(
    nodes: list[Node], users: list[list[int]], start: int, outputs: set[int]
) -> tuple[int, bool]:
    """(ops computed only from `start`'s output, in its shape; whether they reach an output).

    An op also fed by another stream (a residual add of two branches) is a merge point: it is
    not counted here (see `Builder._merges`), and the chain stops there. Nodes are visited in index
    (topological) order, so an op is judged once all its operands from the chain are known.
    """
    shape, heap, seen, to_root = nodes[start].shape, [start], {start}, start in outputs
    while heap:
        x = heapq.heappop(heap)
        for u in users[x]:
            nd = nodes[u]
            if u in seen or nd.shape != shape or nd.op in CONFIGURABLE_OPS:
                continue
            if all(o in seen for o in nd.operands if is_stream(nodes, o, shape)):
                seen.add(u)
                to_root = to_root or u in outputs
                heapq.heappush(heap, u)
    return len(seen) - 1, to_root
