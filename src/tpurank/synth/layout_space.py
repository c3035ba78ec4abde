"""The layout space of a graph: every tensor's explicit layouts, tied groups, and the two ways
configs are drawn in it (independently per group, or as children changing a few groups of a
parent); plus `spell_out`, which writes the compiler's choice into default tensors.

A layout config row is (configurable nodes, 18): output, input and kernel layouts, 6 slots each
(-1 unused). Tensors of rank <= 3 get a full minor-to-major permutation; higher ranks
(convolutions) name only their two most-minor dimensions, as the real conv files do.
"""

from __future__ import annotations

import itertools

import numpy as np

from tpurank.synth.cost_model import LayoutCostModel
from tpurank.synth.hlo import ConfigurableNode

SLOTS = 6
P_DEFAULT_RANDOM = 0.2  # share of tensors left at the compiler default in random configs
# random configs: each tensor prefers a few layouts (candidate i of a per-file shuffle has weight
# RANDOM_SKEW**i), as in the real random files, where a few layouts dominate each tensor
RANDOM_SKEW = 0.3
# default search: groups changed per child, geometric with mean 1 + this share of the groups
# (the real default files vary more tensors per config than single-tensor mutations give)
MUTATE_SHARE = 0.04
TIED_SHARE = (
    0.05,
    0.35,
)  # tied tensor groups per tensor (real sample: 0.03-0.30 distinct columns per tensor)


def layout_candidates(rank: int) -> np.ndarray:
    """Every explicit layout of a tensor of this rank as (k, 6) slot rows (-1 padded)."""
    if rank == 0:
        return np.zeros((0, SLOTS), dtype=np.int8)
    perms = itertools.permutations(range(rank)) if rank <= 3 else itertools.permutations(range(rank), 2)
    rows = [list(p) + [-1] * (SLOTS - len(p)) for p in perms]
    return np.array(rows, dtype=np.int8)


def _slot_tables() -> list[np.ndarray]:
    """Per rank, (7, 7, 6) slot rows spelling out the layout with minor a and second-minor b."""
    tables = []
    for rank in range(7):
        t = np.full((7, 7, SLOTS), -1, dtype=np.int8)
        for a in range(rank):
            for b in [*range(rank), 6]:
                if b == a or (b == 6 and rank > 1) or (b != 6 and rank == 1):
                    continue
                if rank <= 3:
                    rest = [d for d in range(rank - 1, -1, -1) if d not in (a, b)]
                    row = [a] + ([b] if b != 6 else []) + rest
                else:
                    row = [a, b]
                t[a, b, : len(row)] = row
        tables.append(t)
    return tables


SLOT_TABLES = np.stack(_slot_tables())  # (rank, minor, second-minor, 6)
# SLOT_TABLES flat (rank * 49 + minor * 7 + second-minor), each row padded to one 8-byte word
# (gathering 8-byte items is far faster than 6-byte rows)
SLOT_WORDS = np.pad(SLOT_TABLES.reshape(-1, SLOTS), ((0, 0), (0, 8 - SLOTS))).view(np.uint64)[:, 0]


def spell_out(model: LayoutCostModel, cfg: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """Write the layout the compiler would pick into default (-1) tensors where `mask` says so.

    The real `default` files name almost every tensor's layout explicitly, starting from what the
    compiler chose. Spelled-out layouts equal the effective ones, so runtimes do not change.

    Args:
        model: the graph's cost model (knows default and propagated layouts).
        cfg: (c, n, 18) configs.
        mask: (n, 3) which tensors to spell out (fixed per file, so duplicates stay identical).
    """
    if model.n == 0:
        return cfg
    e = model.effective(cfg)
    c, n = len(cfg), model.n
    ranks = np.stack([np.asarray(r) for r in model.ranks], axis=1)  # (n, 3)
    spelled = np.empty((c, n, 3), dtype=np.int64)  # flat index of each tensor's SLOT_WORDS row
    for t, (ka, kb) in enumerate((("out_a", "out_b"), ("in_a", "in_b"), ("k_a", "k_b"))):
        spelled[:, :, t] = (ranks[:, t] * 7 + np.minimum(e[ka], 6)) * 7 + np.minimum(e[kb], 6)
    # slots handled two at a time (int16): a tensor is three of them, unset when all three are -1
    slots = cfg.view(np.int16).reshape(c, n, 3, 3)
    unset = (slots[..., 0] == -1) & (slots[..., 1] == -1) & (slots[..., 2] == -1)
    write = np.repeat(mask & (ranks > 0) & unset, 3, axis=2).reshape(c, n, 3, 3)
    rows = SLOT_WORDS[spelled].view(np.int16).reshape(c, n, 3, 4)[..., :3]
    return np.where(write, rows, slots).reshape(c, n, 9).view(np.int8)


class LayoutSpace:
    """The explicit layout candidates of every tensor of every configurable node of a graph.

    Tensors are tied in groups that always take the same layout, as the compiler propagates one
    decision to many tensors: in the real sample, a file's distinct column sequences are 0.03-0.30
    of its tensor columns (`compare-synth`, "distinct tensor columns"). A group holds
    tensors of one rank (one candidate set); a per-file share in TIED_SHARE sets how many groups.
    """

    def __init__(self, nodes: list[ConfigurableNode], rng: np.random.Generator | None = None) -> None:
        rng = rng if rng is not None else np.random.default_rng(0)
        self.n = len(nodes)
        ranks: dict[int, list[tuple[int, int]]] = {}
        for j, c in enumerate(nodes):
            k = c.k_shape if c.kind != "reshape" else ()
            for t, shape in enumerate((c.out_shape, c.in_shape, k)):
                if len(shape):
                    ranks.setdefault(len(shape), []).append((j, t))
        share = rng.uniform(*TIED_SHARE)
        self.groups: list[np.ndarray] = []  # (members, 2) [node, tensor] of each group
        self.cands: list[np.ndarray] = []  # candidates of each group
        self.weights: list[np.ndarray] = []  # their probabilities in random configs (RANDOM_SKEW)
        for rank, members in sorted(ranks.items()):
            count = max(1, int(round(len(members) * share)))
            label = np.sort(rng.integers(count, size=len(members)))  # neighbours tie, as in the real files
            cand = layout_candidates(rank)
            pairs = np.asarray(members, dtype=np.int64).reshape(-1, 2)
            for g in range(count):
                sel = pairs[label == g]
                if len(sel):
                    self.groups.append(sel)
                    self.cands.append(cand)
                    self.weights.append(_skewed(rng, len(cand)))
        self._index_groups()

    def _index_groups(self) -> None:
        """Flat tables over every group, so a batch of changes is applied in a few array operations:
        members as tensor indices (node * 3 + tensor) laid end to end, each group's first tensor, and
        its candidates padded to one width with a value no layout holds."""
        sizes = np.array([len(m) for m in self.groups], dtype=np.int64)
        self.members = np.concatenate([m @ np.array([3, 1]) for m in self.groups]) if self.groups else sizes
        self.sizes, self.starts = sizes, np.cumsum(sizes) - sizes
        self.n_cands = np.array([len(c) for c in self.cands], dtype=np.int64)
        width = int(self.n_cands.max()) if len(self.cands) else 1
        self.padded = np.full((len(self.cands), width, SLOTS), -2, dtype=np.int8)
        for g, cand in enumerate(self.cands):
            self.padded[g, : len(cand)] = cand
        self.padded_words = _words(self.padded)  # (groups, width): a layout compared in one word
        # the weights' cumulative sums as `Generator.choice` computes them, by candidate count
        self._cdfs = []
        for k in np.unique(self.n_cands):
            gs = np.flatnonzero(self.n_cands == k)
            cdf = np.stack([self.weights[g].cumsum() for g in gs])
            self._cdfs.append((gs, cdf / cdf[:, -1:]))

    def _tensors(self, cfg: np.ndarray) -> np.ndarray:
        """(configs, n, 18) configs seen as (configs, 3n, 6) tensors: a view, never a copy."""
        view = cfg.view()
        view.shape = (len(cfg), self.n * 3, SLOTS)  # raises rather than copy
        return view

    def _set(self, out: np.ndarray, rows: np.ndarray, groups: np.ndarray, values: np.ndarray) -> None:
        """Write layout `values[i]` (6,) into every tensor of group `groups[i]` of config `rows[i]`.
        A config changed twice in one group keeps the later change."""
        size = self.sizes[groups]
        first = np.repeat(self.starts[groups] - np.cumsum(size) + size, size)
        tensors = self.members[first + np.arange(int(size.sum()))]
        self._tensors(out)[np.repeat(rows, size), tensors] = np.repeat(values, size, axis=0)

    def random(self, rng: np.random.Generator, rows: int, p_default: float = P_DEFAULT_RANDOM) -> np.ndarray:
        """(rows, n, 18) int8 configs with every group of tensors drawn independently.

        Group by group, the draws are those of `rng.choice(len(cand), rows, p=weights)` (a uniform
        per row against the weights' cumulative sum) then a uniform per row for the default; drawn
        here for all groups in one call, in the same order, so the configs are the same."""
        out = np.full((rows, self.n, 3 * SLOTS), -1, dtype=np.int8)
        if not self.cands:
            return out
        u = rng.random((len(self.cands), 2, rows))
        pick = np.empty((len(self.cands), rows), dtype=np.int64)
        for gs, cdf in self._cdfs:  # searchsorted(cdf, u, "right") is the count of cdf <= u
            pick[gs] = (cdf[:, None, :] <= u[gs, 0, :, None]).sum(axis=2)
        groups, kept = np.nonzero(u[:, 1] >= p_default)
        self._set(out, kept, groups, self.padded[groups, pick[groups, kept]])
        return out

    def mutate(
        self, rng: np.random.Generator, parents: np.ndarray, share: float = MUTATE_SHARE
    ) -> np.ndarray:
        """Children that change a few groups of each parent (to another layout or back to default):
        geometric, with mean 1 + `share` of the groups. Every change is drawn and applied at once;
        each reads the parent's layout."""
        children = parents.copy()
        if not self.groups:
            return children
        changes = rng.geometric(1.0 / (1.0 + share * len(self.groups)), size=len(children))
        rows = np.repeat(np.arange(len(children)), changes)
        groups = rng.integers(len(self.groups), size=len(rows))
        reset = rng.random(len(rows)) < 0.25
        pick = rng.random(len(rows))
        current = _words(self._tensors(parents)[rows, self.members[self.starts[groups]]])
        is_default = current == DEFAULT_WORD
        n_cand = self.n_cands[groups]
        # the index of the current layout among the candidates (n_cand when default)
        match = current[:, None] == self.padded_words[groups]
        where = np.where(match.any(axis=1), match.argmax(axis=1), n_cand)
        # another candidate: draw among n_cand - 1 (or n_cand from default) and skip the current
        n_other = n_cand - (~is_default).astype(np.int64)
        idx = np.minimum((pick * n_other).astype(np.int64), np.maximum(n_other - 1, 0))
        idx = idx + (idx >= where)
        value = self.padded[groups, np.minimum(idx, n_cand - 1)]
        value[reset & ~is_default] = -1  # back to the compiler default
        keep = n_other > 0  # a one-candidate group already at its layout cannot change
        self._set(children, rows[keep], groups[keep], value[keep])
        return children


def _words(rows: np.ndarray) -> np.ndarray:
    """(..., 6) int8 slot rows as one uint64 each (two zero bytes after the six): equal rows give
    equal words, so a row is compared in one operation rather than six and a reduction."""
    padded = np.zeros((*rows.shape[:-1], 8), dtype=np.int8)
    padded[..., :SLOTS] = rows
    return padded.view(np.uint64)[..., 0]


DEFAULT_WORD = _words(np.full(SLOTS, -1, dtype=np.int8))  # a tensor left at the compiler default


def _skewed(rng: np.random.Generator, k: int) -> np.ndarray:
    """Probabilities of k candidates: RANDOM_SKEW**i in a random order."""
    w = RANDOM_SKEW ** rng.permutation(k).astype(np.float64)
    return w / w.sum() if k else w
