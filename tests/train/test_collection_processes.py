"""A GNN's collections trained in processes of their own (tpurank.train.collection_processes): side
by side on small data, the same weights as one after another at the same thread count; one after
another on big data, each in a fresh process, while the stage's process imports no torch; and the
choice between them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from helpers import common, copy_tree
from stand_ins import FAILING, PIDS_FILE, fails_first, fails_on_one

from tpurank.cli import main
from tpurank.core.config import Config
from tpurank.core.errors import DataError
from tpurank.core.paths import Paths
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_checkpoint
from tpurank.train import collection_processes as cp
from tpurank.train.collection_processes import Processes

TWO = [FAILING, "layout:xla:random"]  # FAILING trains first one after another (the given order)
SMALL = ["gnn.max_steps=4", "gnn.eval_every=2", "gnn.hidden=8", "gnn.seeds=1"]


def _train(paths: Paths) -> dict[str, dict[str, torch.Tensor]]:
    sets = [x for s in SMALL for x in ("--set", s)]
    assert main(["train", "--model", "gnn", "--collections", *TWO, *common(paths), *sets]) == 0
    return {c: load_checkpoint(paths.model_dir("gnn", c) / CHECKPOINT)["state_dict"] for c in TWO}


def test_side_by_side_trains_the_same_weights(
    tiny_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd
) -> None:
    """One after another in this process, whose torch has two threads, and side by side: bit for
    bit the same models, each collection training on one thread (small data) either way. The cores
    are set both times: a quiet machine's two free cores would train side by side twice."""
    monkeypatch.setattr(cp, "affinity_cores", lambda: 1)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        one_by_one = _train(copy_tree(tiny_paths, tmp_path / "one"))
    finally:
        torch.set_num_threads(before)
    assert "at a time" not in capfd.readouterr().err
    monkeypatch.setattr(cp, "affinity_cores", lambda: 2)
    together = _train(copy_tree(tiny_paths, tmp_path / "two"))
    err = capfd.readouterr().err
    assert "train gnn: 2 collections, 2 at a time (1 thread each)" in err
    assert all(f"train gnn {c}: " in err for c in TWO)
    for c in TWO:
        assert one_by_one[c].keys() == together[c].keys()
        assert all(torch.equal(one_by_one[c][k], together[c][k]) for k in one_by_one[c]), c


SIDE_BY_SIDE_2, SIDE_BY_SIDE_3, APART = Processes(2), Processes(3), Processes(1)


@pytest.mark.parametrize(
    ("model", "cores", "collections", "world", "small", "big"),
    [
        ("gnn", 2, TWO, "1", SIDE_BY_SIDE_2, APART),
        ("baseline", 4, [*TWO, "layout:nlp:random"], "1", SIDE_BY_SIDE_3, APART),
        ("gnn", 1, TWO, "1", None, APART),  # one usable core ($OMP_NUM_THREADS=1, affinity)
        ("gnn", 2, TWO[:1], "1", None, None),  # one collection: nothing to keep apart
        ("lgbm", 2, TWO, "1", None, None),  # LightGBM's threads share a step well
        ("gnn", 2, TWO, "2", None, None),  # torchrun's ranks share the steps instead
    ],
)
def test_how_the_collections_train(
    tiny_paths: Paths,
    monkeypatch: pytest.MonkeyPatch,
    model: str,
    cores: int,
    collections: list[str],
    world: str,
    small: Processes | None,
    big: Processes | None,
) -> None:
    """Side by side on small data on the CPU, in the stage's process on small data with a GPU; on big
    data one after another in fresh processes, whatever the device."""
    monkeypatch.setattr(cp, "affinity_cores", lambda: cores)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)  # the CPU, on any machine
    monkeypatch.setenv("WORLD_SIZE", world)
    assert cp.training_processes(model, tiny_paths, collections) == small
    monkeypatch.setattr("tpurank.gnn.device.usable_cuda", lambda index=0: (True, ""))  # a usable GPU
    assert cp.training_processes(model, tiny_paths, collections) is None
    monkeypatch.setattr(cp, "SMALL_DATA_BYTES", 1)  # big data
    assert cp.training_processes(model, tiny_paths, collections) == big


def test_a_collection_trains_on_threads_of_its_own_size(
    tiny_paths: Paths, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One torch thread on small data, every core the process may use on big data, whatever else
    trains with it; LightGBM's threads are its own (None: torch untouched)."""
    from tpurank.core import workers

    monkeypatch.setattr(workers, "affinity_cores", lambda: 2)
    assert cp.training_threads("gnn", tiny_paths, TWO[1]) == 1
    assert cp.training_threads("baseline", tiny_paths, TWO[1]) == 1
    assert cp.training_threads("lgbm", tiny_paths, TWO[1]) is None
    monkeypatch.setattr(cp, "SMALL_DATA_BYTES", 1)  # big data
    assert cp.training_threads("gnn", tiny_paths, TWO[1]) == 2


def test_a_failing_collection_is_one_error_and_stops_the_others(tiny_paths: Paths, tmp_path: Path) -> None:
    """The worker's DataError reaches the stage as itself (one line), and the other collection's
    worker is stopped rather than waited for; the staging folder it had begun is removed."""
    paths = copy_tree(tiny_paths, tmp_path)
    configs = {c: Config() for c in TWO}
    t = time.perf_counter()
    with pytest.raises(DataError, match=r"broken.npz: not a zip file \(the other began: True\)"):
        cp.train_in_processes(fails_on_one, "gnn", paths, configs, SIDE_BY_SIDE_2)
    assert time.perf_counter() - t < 30
    assert list((paths.models / "gnn").iterdir()) == []


def test_one_after_another_a_failure_ends_the_step(run_copy: Paths) -> None:
    """Each collection in a fresh process: the first one's DataError reaches the stage as itself,
    and the next collection never starts."""
    configs = {c: Config() for c in TWO}
    t = time.perf_counter()
    with pytest.raises(DataError, match="broken.npz: not a zip file"):
        cp.train_in_processes(fails_first, "gnn", run_copy, configs, APART)
    assert time.perf_counter() - t < 30
    assert not (run_copy.out / PIDS_FILE).exists()


# the train stage on data taken as big, in a fresh interpreter (this one holds torch): each collection
# goes to a fresh process (a stand-in training that records its pid, from a module of its own so the
# stage imports nothing else), and the stage loads neither torch nor a data library
RECORDER = """
import os

def record_pid(model, paths, cfg, collection):
    with open(paths.out / "PIDS", "a") as f:
        f.write(f"{collection} {os.getpid()}\\n")
    return 0.0
"""
STAGE = """
import json, os, sys
sys.path.insert(0, sys.argv[1])
import pid_recorder
from tpurank.cli import main
from tpurank.train import collection_processes, stage
collection_processes.SMALL_DATA_BYTES = 0
stage.train_one = pid_recorder.record_pid
code = main(["train", "--model", "gnn", "--collections", *sys.argv[2:4], *sys.argv[4:]])
loaded = [m for m in ("torch", "numpy", "pandas", "pyarrow", "scipy") if m in sys.modules]
print(json.dumps({"code": code, "pid": os.getpid(), "loaded": loaded}))
"""


def test_on_big_data_each_collection_trains_in_a_fresh_process(run_copy: Paths, tmp_path: Path) -> None:
    (tmp_path / "pid_recorder.py").write_text(RECORDER.replace("PIDS", PIDS_FILE))
    r = subprocess.run(
        [sys.executable, "-c", STAGE, str(tmp_path), *TWO, *common(run_copy)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    stage = json.loads(r.stdout.strip().splitlines()[-1])
    assert stage == {"code": 0, "pid": stage["pid"], "loaded": []}
    assert "train gnn: 2 collections, one after another, each in a process of its own" in r.stderr
    pids = [line.split() for line in (run_copy.out / PIDS_FILE).read_text().splitlines()]
    assert [c for c, _ in pids] == TWO  # in the given order
    assert len({p for _, p in pids} | {str(stage["pid"])}) == 3  # two fresh processes, not the stage's
