"""Scoring a split with a trained GNN ranker's `model.pt` (the `predict` stage of the GNN models)."""

from __future__ import annotations

import numpy as np

from tpurank.core.collections import check_collection, kind_of
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.workers import affinity_cores, model_threads, torch_threads
from tpurank.data.subsets import scored_configs
from tpurank.gnn import device as devices
from tpurank.gnn.data import GraphData, load_split
from tpurank.gnn.device import setup_runtime
from tpurank.gnn.recipe import ModelSpec, Recipe
from tpurank.gnn.scoring import score_rows
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_model


def predict_collection(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    split: str,
    graphs: list[GraphData] | None = None,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Graph ID -> cost per original config index (lower = faster), from `model.pt`, on the torch
    threads the model trained on (`model_threads`): another count changes the costs' last bits, and
    the same model must give the same bytes in every run, however busy the machine. A graph's passes
    run side by side on the cores those threads leave (`score_rows`' lanes: the same bytes).

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config (its `predict_chunk` is used; architecture and bf16 come from the checkpoint).
        collection: one of COLLECTIONS.
        split: train, valid or test.
        graphs: preloaded graphs (default: read from the prepared cache).
        progress: show a progress bar.
    """
    check_collection(collection)
    path = paths.model_dir(spec.name, collection) / CHECKPOINT
    model, ckpt = load_model(spec, path, collection)
    trained = Recipe.from_saved(ckpt["recipe"])
    chunk = spec.recipe(cfg, kind_of(collection)).predict_chunk
    rt = setup_runtime()
    model.to(rt.device)
    # checkpoints from before the precision was saved: bf16 on CUDA when the recipe allowed it
    trained_precision = ckpt.get("precision") or ("bf16" if trained.bf16 else "fp32")
    precision = devices.prediction_precision(rt.device, trained_precision)
    if progress:
        print(f"[{spec.name}] predict {collection}: {devices.describe(rt.device, precision)}")
    if graphs is None:
        graphs = load_split(paths, collection, split, progress, dim_features=trained.dim_features)
    want = ckpt["model_args"]["node_feat_dim"]
    out: dict[str, np.ndarray] = {}
    threads = model_threads(ckpt.get("threads"))
    with torch_threads(threads):
        for g in tqdm(
            graphs, desc=f"{spec.name} predict {collection} {split}", unit="graph", disable=not progress
        ):
            check_features(g, want)
            rows = scored_rows(g, collection, split)
            cost = np.full(g.num_unique, np.nan)
            cost[rows] = score_rows(
                model,
                g,
                rows,
                chunk,
                rt.device,
                precision=precision,
                segment_nodes=trained.segment_nodes,
                lanes=affinity_cores() // threads,
            )
            out[g.id] = cost[g.inverse]
    return out


def check_features(g: GraphData, want: int) -> None:
    """A graph's node features are as wide as the model's (`want`).

    Raises:
        TpurankError: naming the graph and the widths (a cache prepared after the model trained).
    """
    if g.node_feat.shape[1] != want:
        raise TpurankError(
            f"{g.id}: {g.node_feat.shape[1]} node features but the model was trained on {want}; "
            f"rerun {command('prepare')} and {command('train')} together"
        )


def scored_rows(g: GraphData, collection: str, split: str) -> np.ndarray:
    """The unique-config rows to score: every one, but on a valid layout graph only those of the
    configs validation scores (its official subset and `scored_configs`, at most 2,000): scoring every
    config of the real data's valid graphs (up to ~100,000 each) costs more than training. The
    others stay NaN (unscored)."""
    spread = scored_configs(collection, len(g.inverse)) if split == "valid" else None
    if spread is None:
        return np.arange(g.num_unique)
    return np.unique(g.inverse[np.union1d(spread, g.eval_rows)])
