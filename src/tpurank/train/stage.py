"""The train stage's work: one model per collection.

Each model module writes its own files (and provenance) under `models/<M>/<collection>/`, by way of
a staging folder swapped in only when its training completes (`staging.py`): an interrupted
retrain leaves the finished model as it was. On big data each collection trains in a process of
its own (`collection_processes.py`), and this one, importing no model, stays light while it waits.
"""

from __future__ import annotations

import sys
import time
from contextlib import nullcontext

from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.core.workers import torch_threads
from tpurank.models.registry import get_model
from tpurank.train.collection_processes import train_in_processes, training_processes, training_threads
from tpurank.train.pace import planned_config
from tpurank.train.staging import staged


def train_one(model: str, paths: Paths, cfg: Config, collection: str) -> float:
    """Train `model` on one collection with its config, by way of its staging folder (an interrupted
    retrain leaves the finished model); its seconds. Module-level: the collections' own processes
    run it (tpurank.train.collection_processes). Its steps are fixed first, from its time budget at
    the planned pace (tpurank.train.pace), in the collection's own process (reading its train files
    there, so a stage that waits on its workers stays light): its model is then a function of its
    data, config, seed and that plan, not of the clock. A neural model trains on the threads of its
    collection's size (`training_threads`), in the worker or in this process alike, not on those
    the process happened to have: another count changes its weights' last bits."""
    t = time.perf_counter()
    cfg = planned_config(cfg, model, collection, paths.data)
    trainer = get_model(model)  # a model this install lacks fails before its staging folder is made
    threads = training_threads(model, paths, collection)
    with staged(paths, model, collection) as staging, torch_threads(threads) if threads else nullcontext():
        trainer.train(staging, cfg, collection)
    seconds = time.perf_counter() - t
    print(f"train {model} {collection}: {seconds:.1f} s", file=sys.stderr)
    return seconds


def train_collections(model: str, paths: Paths, configs: dict[str, Config]) -> None:
    """Train `model` on each collection of `configs` (each its own config): side by side in
    processes of their own where the data is big, else one after another in this process."""
    if (processes := training_processes(model, paths, list(configs))) is not None:
        train_in_processes(train_one, model, paths, configs, processes)
        return
    for c, cfg in configs.items():
        train_one(model, paths, cfg, c)
