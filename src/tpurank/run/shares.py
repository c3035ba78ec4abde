"""The neural training time of the budget's plan (tpurank.run.plan), split as `train` spends it.

- Over collections: by need (the 1st place's relative optimizer-step counts, the real data's
  split) or, with `budget.split = "steps"` (the demo), in proportion to each collection's expected
  time to its `max_steps`, so that a short budget cuts every collection to the same share of its
  optimizer steps and a long one leaves each ending on its `max_steps`.
- Over seeds: equal shares of their collection's time; no seed below the least share
  (`budget.min_share_min`): a collection trains fewer seeds first.
- Over processes: on small data on a CPU of several cores `train` runs the collections side by side,
  one one-thread process per core (tpurank.train.collection_processes), so the shares' wall time is
  the span of that schedule (each collection to the first free process, in the order `train` starts
  them), not their sum: the plan splits the time the processes have together.

A collection's expected time to its `max_steps` comes from a cost model (`tpurank.train.pace`): a
training that reaches `gnn.max_steps` before its share ends sooner, and the plan's estimate of the
time to go counts that, never the unspent share.
"""

from __future__ import annotations

import heapq
import math
from pathlib import Path

from tpurank.core.names import Model
from tpurank.core.paths import Paths
from tpurank.core.profiles import gpu
from tpurank.train.collection_processes import training_order, training_processes

# the start of a `train` step of a neural model (a step of `all`), beyond its collections' times:
# processes spawned, torch imported
# (the demo's five collections, two at a time, finished in 115.3 s where their own times chain to 110.6)
TRAIN_START_S = 5.0
ROUNDS = 40  # rescalings of the split until its span fits (floors make the span not scale exactly)


def side_by_side(model: str, data_root: Path, collections: list[str], gpu: bool) -> tuple[int, list[str]]:
    """(collections trained at once, the order they start in) as `train` will run `model`'s
    collections (tpurank.train.collection_processes), asked without torch: `gpu` says whether a
    usable GPU trains them."""
    paths = Paths(data=data_root, out=data_root)  # only the data's size is read
    processes = training_processes(model, paths, collections, cuda=lambda: gpu)
    if processes is None:
        return 1, list(collections)
    return processes.at_once, training_order(paths, collections, processes)


def processes(data_root: Path, collections: list[str]) -> tuple[int, list[str]]:
    """`side_by_side` for the GNN and the official baseline (both train so), a GPU found as the
    profile finds one."""
    return side_by_side(Model.GNN.value, data_root, collections, gpu() is not None)


def span_s(jobs: list[float], at_once: int) -> float:
    """The wall time of `jobs` (seconds, in starting order) when `at_once` run together, each
    starting on the first process free: the schedule of tpurank.train.collection_processes."""
    free = [0.0] * max(1, at_once)
    for job in jobs:
        heapq.heappush(free, heapq.heappop(free) + job)
    return max(free)


def split_minutes(
    total: float, weights: dict[str, float], seeds: dict[str, int], floor: float | dict[str, float]
) -> tuple[dict[str, float], dict[str, int]]:
    """(minutes per seed, seeds) of each collection: `total` minutes in proportion to `weights`, no
    seed below `floor` minutes (one for all, or each collection's). When `total` cannot pay every
    floor, the collections with the most seeds train fewer (down to one); when even one seed each
    cannot, each seed gets the floor and the split goes past `total` (the caller says so). A floored
    share is paid for by the others."""
    least = floor if isinstance(floor, dict) else dict.fromkeys(weights, floor)
    seeds = dict(seeds)
    while total < sum(least[c] * n for c, n in seeds.items()) and max(seeds.values(), default=1) > 1:
        most = max(seeds, key=lambda c: (seeds[c], -list(seeds).index(c)))
        seeds[most] -= 1
    floored: set[str] = set()
    while True:
        free = total - sum(least[c] * seeds[c] for c in floored)
        rest = {c: w for c, w in weights.items() if c not in floored}
        norm = sum(rest.values()) or 1.0
        out = {c: max(0.0, free) * w / norm / seeds[c] for c, w in rest.items()}
        low = {c for c, m in out.items() if m < least[c]}
        if not low:  # to 0.01 minutes, a floor rounded up: it is the least a seed gets
            minutes = {**{c: math.ceil(least[c] * 100 - 1e-9) / 100 for c in floored}, **out}
            return {c: round(m, 2) for c, m in minutes.items()}, seeds
        floored |= low


def split_span(
    wall_min: float,
    weights: dict[str, float],
    seeds: dict[str, int],
    floor: float | dict[str, float],
    order: list[str],
    at_once: int,
) -> tuple[dict[str, float], dict[str, int]]:
    """`split_minutes` of the most minutes whose span (`span_s` in `order`, `at_once` together) fits
    in `wall_min` minutes: one after another that is `wall_min` itself; side by side up to `at_once`
    times it. Where even the floors do not fit, the floors (the caller says how far over)."""
    total = wall_min * max(1, at_once)
    tolerance = 0.01 * len(order)  # split_minutes rounds each share to 0.01 minutes
    for _ in range(ROUNDS):
        minutes, kept = split_minutes(total, weights, seeds, floor)
        span = span_s([minutes[c] * kept[c] for c in order], at_once)
        if span <= wall_min + tolerance or total <= 0:
            break
        total *= wall_min / span
    return minutes, kept
