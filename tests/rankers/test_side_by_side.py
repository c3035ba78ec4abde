"""A GNN's collections trained side by side on small data (tpurank.rankers.side_by_side): the same
weights as one after another at the same thread count, and the choice of how many at once."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import torch
from helpers import common, copy_tree, records_its_process

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


SIDE_BY_SIDE = side_by_side.Workers(2, 1, fresh=False)
APART = side_by_side.Workers(1, None, fresh=True)  # big data: one at a time, every core, a process each


@pytest.mark.parametrize(
    ("model", "cores", "collections", "world", "small", "big"),
    [
        ("gnn", 2, TWO, "1", SIDE_BY_SIDE, APART),
        ("baseline", 4, [*TWO, "layout:nlp:random"], "1", side_by_side.Workers(3, 1, False), APART),
        ("gnn", 1, TWO, "1", None, APART),  # one usable core ($OMP_NUM_THREADS=1, affinity)
        ("gnn", 2, TWO[:1], "1", None, APART),
        ("lgbm", 2, TWO, "1", None, None),  # LightGBM's threads share a step well
        ("gnn", 2, TWO, "2", None, None),  # torchrun's ranks share the steps instead
    ],
)
def test_where_collections_train(
    tiny_paths: Paths,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    cores: int,
    collections: list[str],
    world: str,
    small: side_by_side.Workers | None,
    big: side_by_side.Workers | None,
) -> None:
    """Small data side by side, big data a fresh process per collection, on the CPU only."""
    monkeypatch.setattr(side_by_side, "usable_cores", lambda sample_s=0: cores)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU, on any machine
    monkeypatch.setenv("WORLD_SIZE", world)
    assert side_by_side.collection_workers(model, tiny_paths, collections) == small
    monkeypatch.setattr(side_by_side, "SMALL_DATA_BYTES", 1)
    assert side_by_side.collection_workers(model, tiny_paths, collections) == big
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a GPU: training's own process
    monkeypatch.setattr("tpurank.gnn.device.usable_cuda", lambda index=0: (True, ""))
    assert side_by_side.collection_workers(model, tiny_paths, collections) is None


def test_a_failing_collection_is_one_error_and_stops_the_others(tiny_paths: Paths) -> None:
    """The worker's DataError reaches the stage as itself (one line), and the other collection's
    worker is stopped rather than waited for."""
    configs = {c: Config() for c in TWO}
    t = time.perf_counter()
    with pytest.raises(DataError, match="broken.npz: not a zip file"):
        side_by_side.train_in_workers(
            fails_on_one, "gnn", tiny_paths, configs, side_by_side.Workers(2, 1, False)
        )
    assert time.perf_counter() - t < 30


def test_on_big_data_each_collection_trains_in_a_fresh_process(tmp_path: Path, capfd) -> None:
    """One at a time, each collection in a new process: what one leaves cannot raise the next's peak.
    (The workers' function lives in tests/helpers.py, which imports no torch: a second each.)"""
    paths = Paths(data=tmp_path / "data", out=tmp_path)
    side_by_side.train_in_workers(records_its_process, "gnn", paths, {c: Config() for c in TWO}, APART)
    pids = {int((tmp_path / f"{c.replace(':', '-')}.pid").read_text()) for c in TWO}
    assert len(pids) == 2 and os.getpid() not in pids
    assert "train gnn: each collection in a process of its own" in capfd.readouterr().err
