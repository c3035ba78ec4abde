"""Train one collection's GNN ranker: skip it when a complete model of the same key (config and
data, `checkpoints.training_key`) exists, else load the prepared graphs and run the training loop
(loop.py).

Training length is a budget (`Recipe.max_steps` optimizer steps, `Recipe.time_budget_min`
minutes), not epochs: collections differ 80-fold in size, so an epoch means nothing across them.
Graphs stream: only their structure is held, configs are decoded per batch from the cache
(`tpurank.prepare.store.ConfigStore`), so memory does not grow with a collection's configs.

Files in `models/<name>/<collection>/`: `model.pt` (best weights; `complete` once training ended),
`last.pt` (state after the latest validation, for resuming), `model.json` (provenance and history).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from tpurank.core.collections import check_collection, kind_of
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.gnn.data import GraphData, load_split
from tpurank.gnn.device import setup_runtime
from tpurank.gnn.recipe import ModelSpec, check_recipe
from tpurank.gnn.training.checkpoints import CHECKPOINT, finished_model
from tpurank.gnn.training.loop import fit


def train_collection(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    train_graphs: list[GraphData] | None = None,
    valid_graphs: list[GraphData] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train one collection; resumes from `last.pt` and skips when a complete `model.pt` has this config.

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config with the collection's overrides applied.
        collection: one of COLLECTIONS.
        train_graphs, valid_graphs: preloaded graphs (default: read from the prepared cache).
        progress: show progress bars.

    Returns:
        The training summary also written to `model.json` (best score, history, throughput).
    """
    check_collection(collection)
    check_recipe(spec.recipe(cfg, kind_of(collection)))
    rt = setup_runtime()
    done = finished_model(spec, paths, cfg, collection)
    if done is not None:
        if rt.main and progress:
            shown = replace(paths, staging=False).model_dir(spec.name, collection) / CHECKPOINT
            print(f"[{spec.name}] {collection}: {shown} is up to date (same config and data); skipping")
        return done.get("summary", {})

    dims = spec.recipe(cfg, kind_of(collection)).dim_features
    if train_graphs is None:
        train_graphs = load_split(paths, collection, "train", progress, dim_features=dims)
    if valid_graphs is None:
        valid_graphs = load_split(paths, collection, "valid", progress, dim_features=dims)
    return fit(
        spec, paths, cfg, collection, train=train_graphs, valid=valid_graphs, rt=rt, progress=progress
    ).summary
