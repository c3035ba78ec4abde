"""The neural training time of the budget's plan (tpurank.run.plan), split as `train` spends it.

- Over collections: by need (the 1st place's relative steps, the real data's split) or, with
  `budget.split = "steps"` (the demo), in proportion to each collection's expected time to its step
  cap, so that a short budget cuts every collection to the same share of its steps and a long one
  leaves each ending on its steps.
- Over seeds: equal shares of their collection's time; no seed below the least share
  (`budget.min_share_min`): a collection trains fewer seeds first.
- Over processes: on small data on a CPU of several cores `train` runs the collections side by side,
  one one-thread process per core (tpurank.train.collection_processes), so the shares' wall time is
  the span of that schedule (each collection to the first free process, in the order `train` starts
  them), not their sum: the plan splits the time the processes have together.

A collection's expected time to its step cap comes from a cost model (`expected_s`): a training
that reaches `gnn.max_steps` before its share ends sooner, and the plan's estimate of the time to go
counts that, never the unspent share.
"""

from __future__ import annotations

import heapq
import math
import zipfile
from pathlib import Path

import numpy as np

from tpurank.core.collections import collection_dir, kind_of
from tpurank.core.config import Config
from tpurank.core.names import Model
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.core.profiles import gpu
from tpurank.train.collection_processes import training_order, training_processes

# Seconds one optimizer step takes per unit of work on one thread, validations included: a unit is one
# config of one graph at one node pruning keeps (`kept_nodes`), at width 32 through 3 layers. Measured
# on the demo's plain layout collections, trained side by side on 2 cores (bench/LOG.md, 2026-11-27,
# quiet): xla:random 42.9 s for 240 steps of 4 graphs x 32 configs x ~278 kept nodes (5.02e-6),
# nlp:random 38.7 s at ~257 (4.90e-6); a little above both, so a share scaled from it rarely falls
# short of its steps.
STEP_S_PER_UNIT = 5.1e-6
# attention across configs at the configurable nodes (gnn.layer_attention): xla:default 67.3 s and
# nlp:default 67.1 s in the same run (1.54x and 1.67x the plain rate)
ATTENTION_COST = 1.67
# a tile kernel's step: the demo's tile:xla trained 600 steps of 4 graphs x 64 configs x ~14 nodes at
# width 64 in 4.8 s, about a fifth of the layout rate per unit (no configurable nodes carry a config)
TILE_COST = 0.22
# a neural training step's own start, beyond its collections' times: processes spawned, torch imported
# (the demo's five collections, two at a time, finished in 115.3 s where their own times chain to 110.6)
TRAIN_START_S = 5.0
SIZE_FILES = 16  # train files read per collection for its typical graph
ROUNDS = 40  # rescalings of the split until its span fits (floors make the span not scale exactly)


def sample_files(data_root: Path, collection: str) -> list[Path]:
    """Up to SIZE_FILES train files of the collection, spread over its sorted list (the files
    there are, without train files): what the plan reads a typical graph from."""
    folder = data_root / NPZ_SUBDIR / collection_dir(collection)
    files = sorted(folder.glob("train/*.npz")) or sorted(folder.glob("*/*.npz"))
    return files[:: max(1, len(files) // SIZE_FILES)][:SIZE_FILES]


def kept_nodes(files: list[Path], hops: int) -> float:
    """The mean nodes pruning keeps of `files` (0 when none reads): a layout graph's configurable
    nodes and their `hops`-hop neighbourhood, from its edges (as `prepare` prunes); a tile graph, or
    any with `hops` -1, whole. What a training step's cost grows with (`expected_s`)."""
    sizes = []
    for f in files:
        try:
            with np.load(f, allow_pickle=False) as z:
                edges, kept = z["edge_index"], z.get("node_config_ids")
                total = len(z["node_opcode"])
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):  # `check` reports bad files
            continue
        if kept is None or hops < 0 or not len(edges):
            sizes.append(float(total))
            continue
        for _ in range(hops):
            touching = np.isin(edges[:, 0], kept) | np.isin(edges[:, 1], kept)
            kept = np.union1d(kept, edges[touching].ravel())
        sizes.append(float(min(total, len(kept))))
    return sum(sizes) / len(sizes) if sizes else 0.0


def typical_kept(data_root: Path, collection: str, hops: int) -> float:
    """`kept_nodes` of the collection's `sample_files`."""
    return kept_nodes(sample_files(data_root, collection), hops)


def expected_s(model: str, cfg: Config, collection: str, nodes: float) -> float:
    """One seed's seconds to its step cap on one thread of 2 CPU cores: its steps x graphs x configs a
    step x the typical nodes of a train graph (`nodes`, tpurank.run.plan.graph_size) x its width and
    depth, at STEP_S_PER_UNIT (TILE_COST for tile, ATTENTION_COST with layer attention)."""
    section = getattr(cfg.for_collection(collection), model)
    units = section.max_steps * section.graphs_per_batch * section.configs_per_graph * nodes
    units *= section.hidden / 32 * section.layers / 3
    kind = TILE_COST if kind_of(collection) == "tile" else 1.0
    attention = ATTENTION_COST if getattr(section, "layer_attention", False) else 1.0
    return units * STEP_S_PER_UNIT * kind * attention


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
