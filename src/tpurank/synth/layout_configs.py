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
from collections.abc import Iterator

import numpy as np

from tpurank.synth.cost_model import LayoutCostModel
from tpurank.synth.hlo import HloGraph
from tpurank.synth.layout_space import SLOTS, LayoutSpace, layout_candidates, spell_out
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


def _accepted(
    rng: np.random.Generator,
    kids: np.ndarray,
    cost: np.ndarray,
    parent_cost: np.ndarray,
    best: float,
    probe_share: float,
    seen: set,
) -> tuple[np.ndarray, np.ndarray]:
    """(kept as parents, recorded in the file) of a batch of children: `seen` gains the recorded ones."""
    # Metropolis: a child is kept with prob exp(-(its slowdown against its parent) / T):
    # the kept configs follow exp(-slowdown against the best / T) around the good region,
    # not a descent, so late rows are no faster than early ones (as in the real files)
    keep = rng.random(len(kids)) < np.exp(-(cost - parent_cost) / best / SEARCH_TEMPERATURE)
    # probes: a few children are recorded whatever they cost (the real unet3d default
    # file has 1% of its configs 3x slower than the rest), but never become parents
    probe = ~keep & (rng.random(len(kids)) < probe_share) & (cost < PROBE_MAX_SLOWDOWN * best)
    record = _novel(kids, keep | probe, seen, cost, NOVEL_MAX_SLOWDOWN * best)
    return keep & record, record


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
    elite_state = model.state(elite_cfg)  # children are evaluated from their parent's terms
    best = min(best, float(elite_cost.min()))
    seen = {_row_key(pending_cfg[0][0])}  # configs recorded so far (duplicates come from the reservoir)
    have, done = 1, 0
    while done < total:
        k = min(chunk, total - done)
        while have < k:
            pick = rng.integers(len(elite_cfg), size=max(64, k))
            parents = elite_cfg[pick]
            kids = space.mutate(rng, parents) if space.n else parents
            kid_state = model.child_state(elite_state.take(pick), parents, kids)
            cost = model.totals(kid_state)
            keep, record = _accepted(rng, kids, cost, elite_cost[pick], best, probe_share, seen)
            if record.any():
                pending_cfg.append(kids[record])
                pending_cost.append(cost[record])
                have += int(record.sum())
            best = min(best, float(cost.min()))
            # kept children join the parents (a random subset of PARENTS stays)
            elite_cfg = np.concatenate([elite_cfg, kids[keep]])
            elite_cost = np.concatenate([elite_cost, cost[keep]])
            elite_state = elite_state.concat(kid_state.take(np.flatnonzero(keep)))
            stay = rng.permutation(len(elite_cfg))[:PARENTS]
            elite_cfg, elite_cost, elite_state = elite_cfg[stay], elite_cost[stay], elite_state.take(stay)
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
