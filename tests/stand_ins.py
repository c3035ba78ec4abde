"""Stand-ins for `train.stage.train_one` that spawned training workers run.

A spawned worker imports a stand-in's module by name, so they live in this light module rather than
in their test module, which holds torch and torch_geometric (seconds of each worker's start).
"""

from __future__ import annotations

import os
import time

from tpurank.core.collections import COLLECTIONS
from tpurank.core.errors import DataError
from tpurank.core.paths import Paths
from tpurank.train.staging import staging_folder

PIDS_FILE = "training-pids.txt"  # in the out folder: one "collection pid" line per training


def record_pid(model: str, paths: Paths, cfg: object, collection: str) -> float:
    """Trains nothing and records which process it ran in."""
    with open(paths.out / PIDS_FILE, "a") as f:
        f.write(f"{collection} {os.getpid()}\n")
    return 0.0


FAILING = "tile:xla"  # the collection the failing stand-ins below fail on


def fails_on_one(model: str, paths: Paths, cfg: object, collection: str) -> float:
    """A worker's training that fails on FAILING as a bad data file does, once another collection has
    begun writing its staging folder (which its process, terminated, never removes), and waits on it."""
    if collection == FAILING:
        deadline = time.monotonic() + 20
        others = [c for c in COLLECTIONS if c != FAILING]
        while not (begun := any(staging_folder(paths, model, c).is_dir() for c in others)):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)
        raise DataError(paths.data / "broken.npz", f"not a zip file (the other began: {begun})")
    staging_folder(paths, model, collection).mkdir(parents=True)
    (staging_folder(paths, model, collection) / "last.pt").write_bytes(b"half trained")
    time.sleep(60)  # stopped long before: the failure ends the pool
    return 60.0


def fails_first(model: str, paths: Paths, cfg: object, collection: str) -> float:
    """One after another: FAILING (trained first) fails as a bad data file does; a later collection
    would record its process (it must never start)."""
    if collection == FAILING:
        raise DataError(paths.data / "broken.npz", "not a zip file")
    return record_pid(model, paths, cfg, collection)
