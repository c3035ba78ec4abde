"""Layout configuration sampling: random layouts and a search around the compiler default (tile
sizes: `tile_configs.py`, re-exported here).

A layout config row is (configurable nodes, 18): output, input and kernel layouts, 6 slots each.
Tensors of rank <= 3 get a full minor-to-major permutation; higher ranks (convolutions) name only
their two most-minor dimensions, as the real conv files do; unused slots are -1, and a tensor whose
slots are all -1 keeps the compiler's default.

- `random` collections draw every tensor's layout independently (wide runtime spread).
- `default` collections run a local search from the compiler's default: an unrecorded warm-up
  descends from it for WARMUP_ROUNDS rounds, then children change one to three tensors of a
  parent drawn from the configs kept so far, and are kept with probability
  exp(-(slowdown against the parent) / T) (Metropolis), so the kept configs follow
  exp(-(slowdown against the best) / T): fast configs are oversampled and runtimes stay within a
  few percent. Rows are written in no particular order (row 0 stays the
  default): in the real default files runtime shows no trend along the file (Kendall tau of row
  index vs runtime -0.002 and 0.056 on the two xla default files), while a recorded descent made
  "fewer changes than the default" a strong (wrong) signal, and the heuristic ranker's tau -0.4. Most tensors then spell out the layout the compiler
  would pick (as in the real default files, where few tensors are all -1).
  The search also records a few children whatever they cost (probes, in half the files; never
  parents) and, when every kept child was seen before, the cheapest unseen one: real default
  files hold 60-75% distinct configs and one of the two xla ones has 1% of its configs 3x slower.
- Duplicates: rows are re-emitted from earlier ones, to be measured again with fresh noise.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterator

import numpy as np

from tpurank.synth.cost_model import LayoutCostModel
from tpurank.synth.hlo import ConfigurableNode, HloGraph
from tpurank.synth.physics import Physics
from tpurank.synth.tile_configs import default_tile, sample_tiles, tile_choices, tile_config_feat

__all__ = [
    "LayoutSpace",
    "default_search_configs",
    "default_tile",
    "layout_candidates",
    "random_configs",
    "sample_tiles",
    "spell_out",
    "tile_choices",
    "tile_config_feat",
]

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
SPELL_OUT = (0.85, 0.97)  # default search: share of tensors whose default layout is written out (per file)
SEARCH_TEMPERATURE = 0.006  # keep a child w.p. exp(-slowdown vs its parent / T): +1% kept 19%
ELITE = 48  # warm-up of the default search: parents are drawn from this many fastest configs
# default search: rounds of unrecorded search before the first recorded child, so the recorded
# configs sit around a good region rather than on a path that improves with every change made
# from the default (real default files: runtime does not fall with the number of changed nodes)
WARMUP_ROUNDS = 8
PARENTS = 256  # default search after the warm-up: parents drawn from this many kept configs
WARMUP_SHARE = 0.15  # warm-up children change more groups (bigger steps)
WARMUP_KIDS = 256  # children per warm-up round (big rounds: fewer, vectorised steps)
MAX_RESERVOIR = 256  # earlier rows kept for re-emitting duplicates (bounded memory)
PROBE_MAX_SLOWDOWN = 4.0  # default search: probes slower than this x the best are not recorded
NOVEL_MAX_SLOWDOWN = 1.1  # ... nor new configs taken in place of a revisit (`_novel`)


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


SLOT_TABLES = _slot_tables()


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
    out = cfg.copy()
    for t, (ka, kb) in enumerate((("out_a", "out_b"), ("in_a", "in_b"), ("k_a", "k_b"))):
        sl = slice(t * SLOTS, (t + 1) * SLOTS)
        unset = (cfg[:, :, sl] == -1).all(axis=2)
        for j in np.flatnonzero(mask[:, t]):
            rank = model.ranks[t][j]
            if rank == 0:
                continue
            rows = unset[:, j]
            a = np.minimum(e[ka][rows, j], 6)
            b = np.minimum(e[kb][rows, j], 6)
            out[rows, j, sl] = SLOT_TABLES[rank][a, b]
    return out


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
            for g in range(count):
                sel = np.asarray(
                    [m for m, lab in zip(members, label, strict=True) if lab == g], dtype=np.int64
                )
                if len(sel):
                    self.groups.append(sel.reshape(-1, 2))
                    self.cands.append(cand)
                    self.weights.append(_skewed(rng, len(cand)))

    def _set(self, out: np.ndarray, rows: np.ndarray | int, g: int, value: np.ndarray) -> None:
        """Write one layout row (6,) or per-row layouts (r, 6) into every tensor of group g."""
        for j, t in self.groups[g]:
            out[rows, j, t * SLOTS : (t + 1) * SLOTS] = value

    def random(self, rng: np.random.Generator, rows: int, p_default: float = P_DEFAULT_RANDOM) -> np.ndarray:
        """(rows, n, 18) int8 configs with every group of tensors drawn independently."""
        out = np.full((rows, self.n, 3 * SLOTS), -1, dtype=np.int8)
        for g, cand in enumerate(self.cands):
            pick = rng.choice(len(cand), size=rows, p=self.weights[g])
            keep = np.flatnonzero(rng.random(rows) >= p_default)
            self._set(out, keep, g, cand[pick[keep]])
        return out

    def mutate(
        self, rng: np.random.Generator, parents: np.ndarray, share: float = MUTATE_SHARE
    ) -> np.ndarray:
        """Children that change a few groups of each parent (to another layout or back to default):
        geometric, with mean 1 + `share` of the groups.

        Vectorised per group: every (child, group) change drawn at once, then applied group by group.
        """
        children = parents.copy()
        if not self.groups:
            return children
        changes = rng.geometric(1.0 / (1.0 + share * len(self.groups)), size=len(children))
        rows = np.repeat(np.arange(len(children)), changes)
        groups = rng.integers(len(self.groups), size=len(rows))
        reset = rng.random(len(rows)) < 0.25
        pick = rng.random(len(rows))
        for g in np.unique(groups):
            sel = groups == g
            r = rows[sel]
            cand = self.cands[g]
            j, t = self.groups[g][0]
            current = children[r, j, t * SLOTS : (t + 1) * SLOTS]  # (k, 6)
            is_default = (current == -1).all(axis=1)
            # the index of the current layout among the candidates (len(cand) when default)
            match = (current[:, None, :] == cand[None, :, :]).all(axis=2)
            where = np.where(match.any(axis=1), match.argmax(axis=1), len(cand))
            # another candidate: draw among len(cand) - 1 (or len(cand) from default) and skip the current
            n_other = len(cand) - (~is_default).astype(np.int64)
            idx = np.minimum((pick[sel] * n_other).astype(np.int64), np.maximum(n_other - 1, 0))
            idx = idx + (idx >= where)
            value = cand[np.minimum(idx, len(cand) - 1)]
            value[reset[sel] & ~is_default] = -1  # back to the compiler default
            keep = n_other > 0  # a one-candidate group already at its layout cannot change
            for jj, tt in self.groups[g]:
                children[r[keep], jj, tt * SLOTS : (tt + 1) * SLOTS] = value[keep]
        return children


def _skewed(rng: np.random.Generator, k: int) -> np.ndarray:
    """Probabilities of k candidates: RANDOM_SKEW**i in a random order."""
    w = RANDOM_SKEW ** rng.permutation(k).astype(np.float64)
    return w / w.sum() if k else w


def random_configs(
    graph: HloGraph,
    rng: np.random.Generator,
    total: int,
    unique_share: float,
    chunk: int = 1024,
    physics: Physics | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (configs int8 (k, n, 18), noise-free cost (k,)) chunks for a `random` collection.

    Args:
        graph: the graph.
        rng: random source.
        total: rows in all.
        unique_share: fraction of rows that are new configs; the rest repeat earlier rows.
        chunk: rows per yielded block (bounds memory).
        physics: the dataset's physics (default: the reference physics).
    """
    space, model = LayoutSpace(graph.configurable, rng), LayoutCostModel(graph, physics)
    reservoir = _Reservoir(rng)
    done = 0
    while done < total:
        k = min(chunk, total - done)
        cfg = space.random(rng, k)
        cost = model.cost(cfg)
        cfg, cost = reservoir.mix(cfg, cost, 1.0 - unique_share)
        done += k
        yield cfg, cost


def default_search_configs(
    graph: HloGraph,
    rng: np.random.Generator,
    total: int,
    unique_share: float,
    chunk: int = 1024,
    physics: Physics | None = None,
) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """Yield (configs, noise-free cost) chunks of a search around the compiler default.

    The first row is the compiler's default config. Like the real files, most tensors name their
    layout explicitly (the default one where the search did not change it): see `spell_out`.
    Arguments as `random_configs`.
    """
    space, model = LayoutSpace(graph.configurable, rng), LayoutCostModel(graph, physics)
    # half the searches record probes (real: one of the two xla default files has 3x outliers)
    probe_share = model.ph.search_probe if rng.random() < 0.5 else 0.0
    spell = rng.random((space.n, 3)) < rng.uniform(*SPELL_OUT)
    elite_cfg = np.full((1, space.n, 3 * SLOTS), -1, dtype=np.int8)
    elite_cost = model.cost(elite_cfg)
    best = float(elite_cost[0])
    reservoir = _Reservoir(rng)
    pending_cfg, pending_cost = [elite_cfg], [elite_cost]
    elite_cfg, elite_cost = _walk_away(space, model, rng, elite_cfg, elite_cost)
    best = min(best, float(elite_cost.min()))
    seen = {_row_key(pending_cfg[0][0])}  # configs recorded so far (duplicates come from the reservoir)
    have, done = 1, 0
    while done < total:
        k = min(chunk, total - done)
        while have < k:
            pick = rng.integers(len(elite_cfg), size=max(64, k))
            kids = space.mutate(rng, elite_cfg[pick]) if space.n else elite_cfg[pick]
            cost = model.cost(kids)
            # Metropolis: a child is kept with prob exp(-(its slowdown against its parent) / T):
            # the kept configs follow exp(-slowdown against the best / T) around the good region,
            # not a descent, so late rows are no faster than early ones (as in the real files)
            keep = rng.random(len(kids)) < np.exp(-(cost - elite_cost[pick]) / best / SEARCH_TEMPERATURE)
            # probes: a few children are recorded whatever they cost (the real unet3d default
            # file has 1% of its configs 3x slower than the rest), but never become parents
            probe = ~keep & (rng.random(len(kids)) < probe_share) & (cost < PROBE_MAX_SLOWDOWN * best)
            record = _novel(kids, keep | probe, seen, cost, NOVEL_MAX_SLOWDOWN * best)
            keep &= record
            if record.any():
                pending_cfg.append(kids[record])
                pending_cost.append(cost[record])
                have += int(record.sum())
            best = min(best, float(cost.min()))
            # kept children join the parents (a random subset of PARENTS stays)
            elite_cfg = np.concatenate([elite_cfg, kids[keep]])
            elite_cost = np.concatenate([elite_cost, cost[keep]])
            stay = rng.permutation(len(elite_cfg))[:PARENTS]
            elite_cfg, elite_cost = elite_cfg[stay], elite_cost[stay]
        cfg, cost = np.concatenate(pending_cfg), np.concatenate(pending_cost)
        out_cfg, out_cost = cfg[:k], cost[:k]
        pending_cfg, pending_cost, have = [cfg[k:]], [cost[k:]], len(cfg) - k
        out_cfg, out_cost = reservoir.mix(out_cfg, out_cost, 1.0 - unique_share, keep_first=done == 0)
        done += k
        order = _file_order(rng, k, keep_first=done == k)
        yield spell_out(model, out_cfg[order], spell), out_cost[order]


def _file_order(rng: np.random.Generator, k: int, keep_first: bool) -> np.ndarray:
    """The rows of a chunk in no particular order (the real default files show no trend along the
    file); `keep_first`: the compiler's default stays row 0."""
    first = 1 if keep_first else 0
    return np.concatenate([np.arange(first), first + rng.permutation(k - first)])


def _walk_away(
    space: LayoutSpace, model: LayoutCostModel, rng: np.random.Generator, cfg: np.ndarray, cost: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The search's unrecorded first rounds: it walks away from the default, keeping the ELITE best."""
    for _ in range(WARMUP_ROUNDS if space.n else 0):
        kids = space.mutate(rng, cfg[rng.integers(len(cfg), size=WARMUP_KIDS)], WARMUP_SHARE)
        pool_cfg, pool_cost = np.concatenate([cfg, kids]), np.concatenate([cost, model.cost(kids)])
        order = np.argsort(pool_cost, kind="stable")[:ELITE]
        cfg, cost = pool_cfg[order], pool_cost[order]
    return cfg, cost


def _row_key(row: np.ndarray) -> bytes:
    return hashlib.blake2b(row.tobytes(), digest_size=8).digest()


def _novel(
    kids: np.ndarray, keep: np.ndarray, seen: set[bytes], cost: np.ndarray | None = None, limit: float = 0.0
) -> np.ndarray:
    """`keep` restricted to configs not recorded before (recording them). When none of them is new,
    the cheapest child not recorded before is taken instead if it costs less than `limit` (real
    default files hold 60-75% distinct configs: a search widens its step rather than re-measure);
    in a small space where no such child is left, a revisit is kept as before."""
    new = np.zeros(len(keep), dtype=bool)
    for i in np.flatnonzero(keep):
        key = _row_key(kids[i])
        if key not in seen:
            seen.add(key)
            new[i] = True
    if new.any() or cost is None:
        return new if new.any() else keep
    for i in np.argsort(cost, kind="stable"):
        if cost[i] >= limit:
            break
        key = _row_key(kids[i])
        if key not in seen:
            seen.add(key)
            new[i] = True
            return new
    return keep


class _Reservoir:
    """Earlier rows kept to be emitted again as duplicate measurements (bounded memory)."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.cfg: np.ndarray | None = None
        self.cost: np.ndarray | None = None

    def mix(
        self, cfg: np.ndarray, cost: np.ndarray, dup_share: float, keep_first: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Replace about `dup_share` of the rows by copies of rows seen before (or in this block)."""
        pool_cfg = cfg if self.cfg is None else np.concatenate([self.cfg, cfg])
        pool_cost = cost if self.cost is None else np.concatenate([self.cost, cost])
        cfg, cost = cfg.copy(), cost.copy()
        dup = self.rng.random(len(cfg)) < dup_share
        if keep_first:
            dup[0] = False
        if dup.any():
            # duplicates concentrate on a few rows (a search re-measures what it liked)
            n_src = max(1, int(round(len(pool_cfg) * (1.0 - dup_share))) // 2 + 1)
            src = self.rng.integers(min(n_src, len(pool_cfg)), size=int(dup.sum()))
            cfg[dup] = pool_cfg[src]
            cost[dup] = pool_cost[src]
        keep = self.rng.permutation(len(pool_cfg))[:MAX_RESERVOIR]
        self.cfg, self.cost = pool_cfg[keep], pool_cost[keep]
        return cfg, cost
