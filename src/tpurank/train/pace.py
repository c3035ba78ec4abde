"""A neural training's plan: the optimizer steps it runs, fixed before it starts.

A trained model must be a function of its data, config, seed and plan, never of how fast the
machine happened to run: so the steps a time budget pays are decided once, from a cost model of a
step (`expected_s`, the same one `all`'s budget plan splits its time with: tpurank.run.plan), and
the learning-rate schedule spans those steps (tpurank.gnn.training.lr_schedule). The time budget
stays a cap: it ends a training only on a machine slower than the plan's pace, and that training's
one line says so (its steps then depend on the timing).

`all` plans each collection's optimizer steps with its share and the slowdown it measured on its
own steps before training, and writes them into the collection's config (`max_steps`, the warm-up
scaled alike); `train` run by hand plans them from its own `time_budget_min` (`planned_config`), which leaves a
config `all` planned as it is.
"""

from __future__ import annotations

import dataclasses
import math
import zipfile
from pathlib import Path
from typing import Any

from tpurank.core.collections import collection_dir, kind_of
from tpurank.core.config import Config
from tpurank.core.names import NEURAL_MODELS
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.core.profiles import gpu

# Seconds one optimizer step takes per unit of work on one thread, validations included: a unit is one
# config of one graph at one node pruning keeps (`kept_nodes`), at width 32 through 3 layers. Measured
# on the demo's plain layout collections, trained side by side on 2 cores (bench/LOG.md, 2026-11-29,
# quiet, the same run as tpurank.run.step_costs.SMALL_STEP_S, so the two scale alike): xla:random
# 74.6 s for 300 steps of 4 graphs x 32 configs x ~278 kept nodes (6.99e-6), nlp:random 71.1 s at
# ~257 (7.21e-6); a little above both, so a share scaled from it rarely falls short of its steps.
STEP_S_PER_UNIT = 7.3e-6
# attention across configs at the configurable nodes (gnn.layer_attention): in a fresh clone's demo run
# (bench/LOG.md, 2026-11-29) xla:default and nlp:default trained at 1.38x and 1.48x the plain
# collections' rate per unit beside them (56.1 s for 140 steps, 54.2 s for 140); a little above both
ATTENTION_COST = 1.5
# a tile kernel's step: the demo's tile:xla trained 600 steps of 4 graphs x 64 configs x ~14 nodes at
# width 64 in 4.8 s, about a fifth of the layout rate per unit (no configurable nodes carry a config)
TILE_COST = 0.22
SIZE_FILES = 16  # train files read per collection for its typical graph
NEURAL_PREDICT_SCALE = {"cpu": 1.0, "kaggle-t4": 0.2, "gpu": 0.06}  # GPU inference, per the profile
# the share of a time budget the planned steps fill at the planned pace: the rest absorbs a machine up
# to a tenth slower than planned, so the budget's cap rarely ends a training (whose model would then
# depend on the timing, and whose rate would be cut off before its decay)
PLANNED_SHARE = 0.9
# planned steps keep two significant digits, rounded down: a plan made again after a slightly
# different time spent (the second look of `all`) most often plans the same steps, so the same model
STEP_DIGITS = 2
SLACK = 1e-9  # relative: a steps count that the time pays exactly is paid


def neural_predict_scale(profile: str) -> float:
    """How much faster the neural rankers run under `profile` than on 2 CPU cores: its GPU's rate
    where the machine has a usable GPU, else 1 (a GPU profile chosen on a CPU runs there)."""
    scale = NEURAL_PREDICT_SCALE.get(profile, 1.0)
    return scale if scale == 1.0 or gpu() is not None else 1.0


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
    import numpy as np  # only here: the train stage imports this module and waits on its workers light

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


def planned_steps(max_steps: int, budget_s: float, expected: float) -> int:
    """The steps a training runs: `max_steps`, or the share of them PLANNED_SHARE of `budget_s`
    seconds pays at the planned pace (`expected` seconds to `max_steps`), to STEP_DIGITS significant
    digits rounded down and at least one. No budget, or no estimate (0), plans `max_steps`: the time
    budget then only caps.

    Args:
        max_steps: the config's step cap.
        budget_s: the training's time budget in seconds (0 = none).
        expected: the seconds `max_steps` are expected to take (0 = not known).
    """
    paying = budget_s * PLANNED_SHARE * (1 + SLACK)
    if budget_s <= 0 or expected <= 0 or paying >= expected:
        return max_steps
    paid = max_steps * paying / expected
    grain = 10 ** max(0, math.floor(math.log10(max(paid, 1))) + 1 - STEP_DIGITS)
    return max(1, min(max_steps, int(paid // grain * grain)))


def planned_section(section: Any, steps: int) -> dict[str, int]:
    """The keys of a model's config section that `steps` planned steps set: `max_steps`, and the
    warm-up (where the section has one) scaled alike, so it stays the same share of the schedule."""
    keys = {"max_steps": steps}
    warmup = getattr(section, "warmup_steps", None)
    if warmup is not None and steps < section.max_steps:
        keys["warmup_steps"] = min(steps, math.ceil(warmup * steps / section.max_steps))
    return keys


def planned_config(cfg: Config, model: str, collection: str, data_root: Path) -> Config:
    """`cfg` (one collection's, `Config.for_collection`) with the steps its time budget pays at the
    planned pace (this profile's, no slowdown): what `train` run by hand trains. A config `all`
    planned already asks no fewer steps than its time pays here, so it is returned as it is.

    Args:
        cfg: the collection's config.
        model: the model trained (only the neural ones are planned).
        collection: the collection.
        data_root: the data root, whose train files give the typical graph (none: the config's steps).
    """
    section = getattr(cfg, model, None)
    if model not in NEURAL_MODELS or section is None or section.time_budget_min <= 0:
        return cfg
    nodes = typical_kept(data_root, collection, cfg.prepare.hops)
    expected = expected_s(model, cfg, collection, nodes) * neural_predict_scale(cfg.profile)
    steps = planned_steps(section.max_steps, section.time_budget_min * 60, expected)
    if steps == section.max_steps:
        return cfg
    return dataclasses.replace(
        cfg, **{model: dataclasses.replace(section, **planned_section(section, steps))}
    )
