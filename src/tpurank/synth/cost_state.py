"""Per-node constants and per-config terms of the layout cost model, shaped so the same formulas
run on every (config, node) of a batch or on a chosen list of (config, node) pairs.

Why: a default search evaluates children that differ from their parent in a few nodes. Keeping
each config's per-node times (`CostState`) lets a child's be computed for the nodes a change can
reach only (`LayoutCostModel.child_state`); `NodeView.take` gathers the per-node constants of
those pairs, so each number comes from the same floating-point operations as a full evaluation
and the runtimes stay bit for bit the same.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NodeView:
    """Per-node constants of one graph's cost model: (n,) arrays that broadcast against
    (configs, n) arrays, or (pairs,) arrays gathered by `take` for a list of (config, node) pairs.

    Args:
        row: each node's offset into the flat (n, 7, 7) padding tables.
        dim_row: each node's offset into flat (n, 7) tables (dimension maps, affinity).
        defaults: tensor ("out", "in", "k") -> (minor, second-minor) the compiler picks.
        nbytes: tensor -> its real bytes.
        flops, contract_in, contract_k, kind, kind_eff, is_mxu, is_reshape, out_feature, chain,
            to_root, has_src, has_k_src, rank_out: as the `LayoutCostModel` attributes.
    """

    row: np.ndarray
    dim_row: np.ndarray
    defaults: dict[str, tuple[np.ndarray, np.ndarray]]
    nbytes: dict[str, np.ndarray]
    flops: np.ndarray
    contract_in: np.ndarray
    contract_k: np.ndarray
    kind: np.ndarray
    kind_eff: np.ndarray
    is_mxu: np.ndarray
    is_reshape: np.ndarray
    out_feature: np.ndarray
    chain: np.ndarray
    to_root: np.ndarray
    has_src: np.ndarray
    has_k_src: np.ndarray
    rank_out: np.ndarray

    def take(self, nodes: np.ndarray) -> NodeView:
        """The constants of `nodes` (one entry per (config, node) pair)."""
        out = {}
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name == "defaults":
                v = {t: (a[nodes], b[nodes]) for t, (a, b) in v.items()}
            elif f.name == "nbytes":
                v = {t: a[nodes] for t, a in v.items()}
            else:
                v = v[nodes]
            out[f.name] = v
        return NodeView(**out)


@dataclass
class CostState:
    """What a config's runtime is summed from, kept so a child can reuse its parent's terms.

    Args:
        t: (configs, n) time of each configurable node with its chain, copies and neighbours.
        merge: (configs, merges) copy time of each pair of merging branches.
        copy_in, copy_k: (configs, n) whether the input / kernel is copied (fusion reads them).
    """

    t: np.ndarray
    merge: np.ndarray
    copy_in: np.ndarray
    copy_k: np.ndarray

    @staticmethod
    def empty(configs: int, n: int, merges: int) -> CostState:
        """A state of configs without configurable nodes (or merges)."""
        return CostState(
            np.zeros((configs, n)),
            np.zeros((configs, merges)),
            np.zeros((configs, n), dtype=bool),
            np.zeros((configs, n), dtype=bool),
        )

    def take(self, rows: np.ndarray) -> CostState:
        """The states of `rows` (a copy)."""
        return CostState(self.t[rows], self.merge[rows], self.copy_in[rows], self.copy_k[rows])

    def concat(self, other: CostState) -> CostState:
        """This state's configs followed by `other`'s."""
        pairs = zip(self.arrays(), other.arrays(), strict=True)
        return CostState(*(np.concatenate([a, b]) for a, b in pairs))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.t, self.merge, self.copy_in, self.copy_k
