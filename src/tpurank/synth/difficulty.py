"""How hard a data root is to rank: per-graph runtime statistics and the Kendall tau of simple rankers.

`synth --compare-real` puts the real sample's only train/valid pairs beside synthetic files of the
same sizes. Each side is scored the same way: the train/valid files are prepared into a temporary
cache, and three rankers order each valid graph's configs:

- `random`: the seeded random baseline (mean tau over RANDOM_SEEDS seeds: one seed is noise);
- `heuristic`: the no-learning rule of `tpurank.baselines`;
- `lgbm`: the project's LightGBM ranker on its tabular features, trained on the train files for a
  fixed LGBM_ROUNDS rounds (no early stopping: with one valid graph, stopping on it would tune to the
  graph being scored).

Tau is over all configs of a valid graph (tile: normalized runtimes), as `tpurank.metrics` computes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
from pathlib import Path

import numpy as np

from tpurank.baselines import heuristic_costs, random_costs
from tpurank.config import Config
from tpurank.metrics import kendall_tau, order_from_costs
from tpurank.paths import Paths
from tpurank.prepare.cache import PreparedGraph, iter_prepared

RANKERS = ("random", "heuristic", "lgbm")
RANDOM_SEEDS = 5
LGBM_ROUNDS = 200


def runtime_stats(runtime: np.ndarray) -> dict[str, float]:
    """Spread (max/min), coefficient of variation and share of distinct values of one graph's runtimes."""
    rt = np.asarray(runtime, dtype=np.float64)
    if len(rt) == 0 or rt.min() <= 0:
        return {"spread": np.nan, "cv": np.nan, "distinct": np.nan}
    return {
        "spread": float(rt.max() / rt.min()),
        "cv": float(rt.std() / rt.mean()),
        "distinct": len(np.unique(rt)) / len(rt),
    }


def _lgbm_costs(paths: Paths, cfg: Config, collection: str) -> dict[str, np.ndarray]:
    """Train the LightGBM ranker on the train split (fixed rounds) and score the valid split."""
    from tpurank.lgbm import model as lgbm
    from tpurank.tabular import io as tab_io
    from tpurank.tabular.stage import build_features

    cfg = cfg.for_collection(collection)
    cfg = dataclasses.replace(cfg, lgbm=dataclasses.replace(cfg.lgbm, num_boost_round=LGBM_ROUNDS, threads=1))
    with contextlib.redirect_stdout(io.StringIO()):  # stage chatter would break the table
        build_features(paths, cfg, [collection], ["train", "valid"])
        booster, info = lgbm.fit(tab_io.read_table(paths, collection, "train"), None, cfg, collection)
        lgbm.save(paths, cfg, collection, booster, info)
        return lgbm.predict(paths, cfg, collection, "valid")


def ranker_taus(root: Path, collection: str, cfg: Config | None = None) -> list[dict]:
    """Per valid graph of `collection` under `root`: runtime statistics and each ranker's tau.

    Args:
        root: a data root holding train and valid files of the collection (real or synthetic).
        collection: one of dataset.COLLECTIONS.
        cfg: the config (default: `Config()`, seed 0).

    Returns:
        One dict per valid graph: stem, configs, spread, cv, distinct, tau_random, tau_heuristic, tau_lgbm.
    """
    from tpurank.prepare.stage import prepare_dataset

    cfg = cfg or Config()
    with tempfile.TemporaryDirectory(prefix="tpurank-difficulty-") as tmp:
        paths = Paths(data=root, out=Path(tmp))
        with contextlib.redirect_stdout(io.StringIO()):
            prepare_dataset(paths, cfg, [collection], ["train", "valid"], jobs=1, progress=False)
        graphs: list[PreparedGraph] = list(iter_prepared(paths.prepared, collection, "valid"))
        lgbm_costs = _lgbm_costs(paths, cfg, collection)
        rows = []
        for g in graphs:
            rt = g.config_runtime
            rec: dict = {"stem": g.stem, "configs": len(rt), **runtime_stats(rt)}
            rec["tau_random"] = float(
                np.nanmean([kendall_tau(order_from_costs(random_costs(g, s)), rt) for s in range(RANDOM_SEEDS)])
            )
            rec["tau_heuristic"] = kendall_tau(order_from_costs(heuristic_costs(g)), rt)
            rec["tau_lgbm"] = kendall_tau(order_from_costs(lgbm_costs[g.id]), rt)
            rows.append(rec)
        return rows
