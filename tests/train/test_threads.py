"""A neural model's weights and predictions are the same bytes whatever the machine's load and
whatever torch thread count the process had: torch's float sums split differently over another
number of threads (sgemm over a few rows, LayerNorm's weight gradients), so each step takes a count
of its own (tpurank.core.workers.neural_threads, model_threads)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
import torch
from helpers import common, copy_tree

from tpurank.cli import main
from tpurank.core import workers
from tpurank.core.paths import Paths
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_checkpoint
from tpurank.models.predictions import load_predictions

# a tile collection (its first layer's sgemm over a few rows splits by thread) and a layout one
TWO = ["tile:xla", "layout:nlp:random"]
SMALL = ["gnn.max_steps=2", "gnn.eval_every=2", "gnn.hidden=16", "gnn.seeds=1"]


@pytest.fixture
def two_cores(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A machine of 2 cores this process may both use, no $OMP_NUM_THREADS (./run.sh sets it to 1,
    which alone would hide a count that follows the load); torch's own count restored after."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)
    workers.cores_now.cache_clear()


def _train_and_predict(
    paths: Paths, monkeypatch: pytest.MonkeyPatch, busy_percent: float, threads: int
) -> tuple[dict[str, tuple[dict, list[list[str]]]], bytes]:
    """Each collection trained on its own (in this process), then predicted: another program keeping
    `busy_percent` of the machine busy, this process's torch on `threads` threads when they start.
    Returns each collection's checkpoint and curve (without its seconds) and the predictions' bytes."""
    monkeypatch.setattr(psutil, "cpu_percent", lambda interval=None: busy_percent)
    workers.cores_now.cache_clear()
    sets = [x for s in SMALL for x in ("--set", s)]
    models = {}
    for c in TWO:
        torch.set_num_threads(threads)
        assert main(["train", "--model", "gnn", "--collections", c, *common(paths), *sets]) == 0
        folder = paths.model_dir("gnn", c)
        rows = [r.split(",") for r in (folder / "metrics.csv").read_text().splitlines()]
        gone = rows[0].index("elapsed")
        models[c] = load_checkpoint(folder / CHECKPOINT), [r[:gone] + r[gone + 1 :] for r in rows]
    torch.set_num_threads(threads)
    argv = ["predict", "--model", "gnn", "--split", "valid", "--collections", *TWO, *common(paths), *sets]
    assert main(argv) == 0
    return models, paths.prediction_file("gnn", "valid").read_bytes()


def test_weights_and_predictions_do_not_follow_the_load(
    tiny_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, two_cores: None
) -> None:
    """A quiet machine (two free cores, torch on two threads) and a busy one (one core held by
    another program, torch on one thread): the same weights, curves and prediction bytes."""
    quiet_models, quiet = _train_and_predict(copy_tree(tiny_paths, tmp_path / "quiet"), monkeypatch, 0.0, 2)
    busy_models, busy = _train_and_predict(copy_tree(tiny_paths, tmp_path / "busy"), monkeypatch, 50.0, 1)
    for c in TWO:
        (ckpt, curve), (busy_ckpt, busy_curve) = quiet_models[c], busy_models[c]
        weights, busy_weights = ckpt["state_dict"], busy_ckpt["state_dict"]
        assert curve == busy_curve, c
        assert weights.keys() == busy_weights.keys()
        differ = [k for k in weights if not torch.equal(weights[k], busy_weights[k])]
        assert not differ, f"{c}: {len(differ)} of {len(weights)} weight tensors differ, e.g. {differ[0]}"
    assert quiet == busy
    assert all(m[c][0].get("threads") == 1 for m in (quiet_models, busy_models) for c in TWO)  # small data
    made = load_predictions(tmp_path / "quiet/out/predictions/gnn/valid.npz")
    assert len(made) == 6 and all(np.isfinite(c).any() for c in made.values())  # each valid graph
