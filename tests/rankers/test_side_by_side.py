"""A GNN's collections trained side by side on small data (tpurank.rankers.side_by_side): the same
weights as one after another at the same thread count, and the choice of how many at once."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from helpers import common, copy_tree

from tpurank.cli import main
from tpurank.core.config import Config
from tpurank.core.errors import DataError
from tpurank.core.paths import Paths
from tpurank.gnn.train.checkpoints import CHECKPOINT, load_checkpoint
from tpurank.rankers import side_by_side

TWO = ["tile:xla", "layout:xla:random"]
FAILING = "tile:xla"
SMALL = ["gnn.max_steps=4", "gnn.eval_every=2", "gnn.hidden=8", "gnn.seeds=1"]


def fails_on_one(model: str, paths: Paths, cfg: Config, collection: str) -> float:
    """A worker's training that fails on FAILING as a bad data file does, and waits on the others."""
    if collection == FAILING:
        raise DataError(paths.data / "broken.npz", "not a zip file")
    time.sleep(60)  # stopped long before: the failure ends the pool
    return 60.0


def _train(paths: Paths) -> dict[str, dict[str, torch.Tensor]]:
    sets = [x for s in SMALL for x in ("--set", s)]
    assert main(["train", "--model", "gnn", "--collections", *TWO, *common(paths), *sets]) == 0
    return {c: load_checkpoint(paths.model_dir("gnn", c) / CHECKPOINT)["state_dict"] for c in TWO}


def test_side_by_side_trains_the_same_weights(
    tiny_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd, one_thread
) -> None:
    """One thread in this process (`one_thread`) and in each worker: bit for bit the same models."""
    one_by_one = _train(copy_tree(tiny_paths, tmp_path / "one"))
    assert "at a time" not in capfd.readouterr().err
    monkeypatch.setattr(side_by_side, "usable_cores", lambda sample_s=0: 2)
    together = _train(copy_tree(tiny_paths, tmp_path / "two"))
    err = capfd.readouterr().err
    assert "train gnn: 2 collections, 2 at a time (1 thread each)" in err
    assert all(f"train gnn {c}: " in err for c in TWO)
    for c in TWO:
        assert one_by_one[c].keys() == together[c].keys()
        assert all(torch.equal(one_by_one[c][k], together[c][k]) for k in one_by_one[c]), c


@pytest.mark.parametrize(
    ("model", "cores", "collections", "world", "jobs"),
    [
        ("gnn", 2, TWO, "1", 2),
        ("baseline", 4, [*TWO, "layout:nlp:random"], "1", 3),
        ("gnn", 1, TWO, "1", 1),  # one usable core ($OMP_NUM_THREADS=1, affinity)
        ("gnn", 2, TWO[:1], "1", 1),
        ("lgbm", 2, TWO, "1", 1),  # LightGBM's threads share a step well
        ("gnn", 2, TWO, "2", 1),  # torchrun's ranks share the steps instead
    ],
)
def test_how_many_at_once(
    tiny_paths: Paths,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    cores: int,
    collections: list[str],
    world: str,
    jobs: int,
) -> None:
    """Side by side on small data on the CPU; one at a time in the stage's process on big data or a GPU."""
    monkeypatch.setattr(side_by_side, "usable_cores", lambda sample_s=0: cores)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU, on any machine
    monkeypatch.setenv("WORLD_SIZE", world)
    assert side_by_side.side_by_side_jobs(model, tiny_paths, collections) == jobs
    monkeypatch.setattr("tpurank.gnn.device.usable_cuda", lambda index=0: (True, ""))  # a usable GPU
    assert side_by_side.side_by_side_jobs(model, tiny_paths, collections) == 1
    monkeypatch.setattr("tpurank.gnn.device.usable_cuda", lambda index=0: (False, "no CUDA device"))
    monkeypatch.setattr(side_by_side, "SMALL_DATA_BYTES", 1)  # big data
    assert side_by_side.side_by_side_jobs(model, tiny_paths, collections) == 1


def test_a_failing_collection_is_one_error_and_stops_the_others(tiny_paths: Paths) -> None:
    """The worker's DataError reaches the stage as itself (one line), and the other collection's
    worker is stopped rather than waited for."""
    configs = {c: Config() for c in TWO}
    t = time.perf_counter()
    with pytest.raises(DataError, match="broken.npz: not a zip file"):
        side_by_side.train_side_by_side(fails_on_one, "gnn", tiny_paths, configs, jobs=2)
    assert time.perf_counter() - t < 30
