"""What each step of `all` but neural training is expected to take: the steps the budget cannot
shorten (tpurank.run.budget). Each grows with the data's GB at a rate measured at full scale, above
a floor that even small data costs (process start-ups, small files), spread over the steps as a
demo run spends it. The neural rankers' predictions count once per seed, at the GPU's rate where a
GPU runs them.
"""

from __future__ import annotations

from pathlib import Path

from tpurank.core.config import Config
from tpurank.core.names import NEURAL_MODELS, Model, StepCommand
from tpurank.data.dataset import npz_bytes
from tpurank.run.steps import StepName
from tpurank.train.pace import neural_predict_scale

# seconds per GB of npz of each step but neural training, on 2 cores, as measured in Recipe 1 at full
# scale (`all --budget 90m` on the 11.56 GB synthetic tree, the cpu profile's 3 GNN seeds; docs/scale.md,
# bench/results/recipe1_full_90m.json): prepare 240 s, features 105 s, LightGBM 87 s; the GNN's
# predictions per seed: valid 80 s (at most 1,000 configs of a layout graph: data/subsets.py), test
# 129 s. They run on the GPU under the GPU profiles (tpurank.train.pace.NEURAL_PREDICT_SCALE)
STEP_S_PER_GB = {
    StepName(StepCommand.PREPARE): 20.8,
    StepName(StepCommand.FEATURES): 9.1,
    StepName(StepCommand.TRAIN, Model.LGBM): 7.5,
}
STEP_S_PER_GB |= {
    StepName(StepCommand.PREDICT, Model(m), split): rate
    for m in NEURAL_MODELS
    for split, rate in (("valid", 6.9), ("test", 11.2))
}
OTHER_STEP_S_PER_GB = 0.4  # the untrained rankers, LightGBM's predictions, the ensemble, the report
FIXED_S_MIN = 76.0  # process start-ups and small files: what even the tiny data costs, over the steps
# how FIXED_S_MIN spreads over the steps: each one's seconds in a demo run, where the size term is
# nothing (a fresh clone of 992562e, 2 cores, quiet: bench/LOG.md, 2026-11-29; the GNN's pace per
# optimizer step, tpurank.train.pace.STEP_S_PER_UNIT, from the same machine that day, so `all`'s
# second look scales both alike); the GNN's predictions most of what follows training, per seed (they
# score up to 1,000 configs of a graph in one pass: attention)
SMALL_STEP_S = {
    StepName(StepCommand.PREPARE): 7.1,
    StepName(StepCommand.FEATURES): 9.7,
    StepName(StepCommand.TRAIN, Model.LGBM): 22.7,
}
SMALL_STEP_S |= {StepName(StepCommand.VALIDATE): 6.1}
SMALL_STEP_S |= {
    StepName(StepCommand.PREDICT, Model(m), split): s
    for m in NEURAL_MODELS
    for split, s in (("valid", 11.6), ("test", 12.2))
}
OTHER_SMALL_STEP_S = 1.0  # the untrained rankers, LightGBM's predictions, the ensemble
# the steps of `all` with its default models (lgbm, gnn), for an estimate without a step list
DEFAULT_STEPS = (
    StepName(StepCommand.PREPARE),
    StepName(StepCommand.FEATURES),
    StepName(StepCommand.TRAIN, Model.LGBM),
)
DEFAULT_STEPS += tuple(
    StepName(StepCommand.PREDICT, m, "valid") for m in (Model.RANDOM, Model.HEURISTIC, Model.LGBM, Model.GNN)
)
DEFAULT_STEPS += (
    StepName(StepCommand.TRAIN, Model.ENSEMBLE),
    StepName(StepCommand.PREDICT, Model.ENSEMBLE, "valid"),
    StepName(StepCommand.VALIDATE),
)
DEFAULT_STEPS += tuple(
    StepName(StepCommand.PREDICT, m, "test") for m in (Model.LGBM, Model.GNN, Model.ENSEMBLE)
)


def data_bytes(data_root: Path, collection: str) -> float:
    """Bytes of the collection's npz files (stat only): what the fixed stages' time grows with."""
    return float(npz_bytes(data_root, [collection]))


def step_s_per_gb(step: StepName, cfg: Config, collections: list[str]) -> float:
    """Seconds per GB of npz a step of `all` takes on this profile (STEP_S_PER_GB)."""
    return STEP_S_PER_GB.get(step, OTHER_STEP_S_PER_GB) * neural_predictions(step, cfg, collections)


def neural_predictions(step: StepName, cfg: Config, collections: list[str]) -> float:
    """How many times a step's work a neural model's predictions take: once per seed, at the
    profile's GPU rate where one runs them (1 for any other step)."""
    if step.command != StepCommand.PREDICT or step.model not in NEURAL_MODELS:
        return 1.0
    seeds = [cfg.for_collection(c).gnn.seeds if step.model == Model.GNN else 1 for c in collections] or [1]
    return sum(seeds) / len(seeds) * neural_predict_scale(cfg.profile)


def step_estimates_s(
    steps: list[StepName] | tuple[StepName, ...], cfg: Config, data_root: Path, collections: list[str]
) -> dict[StepName, float]:
    """Each step's seconds from the data's size: its rate times the GB, and its share of FIXED_S_MIN
    (as the steps share a demo run's time: SMALL_STEP_S)."""
    gb = sum(data_bytes(data_root, c) for c in collections) / 1e9
    small = {
        s: SMALL_STEP_S.get(s, OTHER_SMALL_STEP_S) * neural_predictions(s, cfg, collections) for s in steps
    }
    total = sum(small.values()) or 1.0
    return {s: FIXED_S_MIN * small[s] / total + gb * step_s_per_gb(s, cfg, collections) for s in steps}


def seeds_scoring_s(model: str, cfg: Config, data_root: Path, collections: list[str]) -> float:
    """Seconds a neural training step spends outside its shares: with more than one seed it scores
    every member on the configs validation scores (`gnn/seeds.py`), the work of its valid predictions."""
    if model != Model.GNN or all(cfg.for_collection(c).gnn.seeds <= 1 for c in collections):
        return 0.0
    gb = sum(data_bytes(data_root, c) for c in collections) / 1e9
    return gb * step_s_per_gb(StepName(StepCommand.PREDICT, Model(model), "valid"), cfg, collections)


def fixed_estimate_s(cfg: Config, data_root: Path, collections: list[str]) -> float:
    """Seconds of every step of a default `all` but neural training, and the GNN seeds' scoring,
    from the data's size."""
    steps = sum(step_estimates_s(DEFAULT_STEPS, cfg, data_root, collections).values())
    return steps + seeds_scoring_s(Model.GNN, cfg, data_root, collections)
