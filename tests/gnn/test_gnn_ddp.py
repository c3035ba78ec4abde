"""Two CPU processes under torchrun (DDP, gloo) train a few steps and end with identical weights."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import prepared_graph, small_gnn

from tpurank.core.paths import Paths
from tpurank.prepare.cache import prepared_path, save_prepared

COLLECTION = "layout:xla:random"
WORKER = """
import sys
from dataclasses import replace
from pathlib import Path

import torch
import torch.distributed as dist

from tpurank.core.config import Config
from tpurank.core.config_build import from_dict
from tpurank.gnn.families import gnn as gm
from tpurank.gnn.data import load_split
from tpurank.gnn.device import setup_runtime
from tpurank.gnn.training.loop import fit
from tpurank.core.paths import Paths

out = Path(sys.argv[1])
paths = Paths(data=out / "data", out=out)
cfg = from_dict({"gnn": dict(hidden=16, layers=2, opcode_dim=4, config_dim=4, max_steps=4, eval_every=2,
                             graphs_per_batch=2, configs_per_graph=8)})
rt = setup_runtime()
assert rt.world == 2 and dist.is_initialized() and dist.get_backend() == "gloo"
train = load_split(paths, "layout:xla:random", "train", progress=False)
valid = load_split(paths, "layout:xla:random", "valid", progress=False)
model, summary = fit(gm.SPEC, paths, cfg, "layout:xla:random", train, valid, rt, progress=False)
torch.save(model.state_dict(), out / f"rank{rt.rank}.pt")
dist.destroy_process_group()
"""


@pytest.mark.slow
def test_two_process_ddp_ends_with_identical_weights(tmp_path: Path) -> None:
    paths = Paths(data=tmp_path / "data", out=tmp_path)
    for split, seeds in (("train", range(6)), ("valid", range(10, 12))):
        for s in seeds:
            g = prepared_graph("layout", seed=s, split=split)
            save_prepared(prepared_path(paths.prepared, COLLECTION, split, g.stem), g)
    worker = tmp_path / "worker.py"
    worker.write_text(WORKER)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", str(worker)]
    proc = subprocess.run([*cmd, str(tmp_path)], env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]

    w0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    w1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    assert w0.keys() == w1.keys()
    for k in w0:
        assert torch.equal(w0[k], w1[k]), k

    # training moved the weights away from the (seeded) initialisation, and only rank 0 wrote files
    from tpurank.core.config import Config

    torch.manual_seed(Config().seed)
    init = small_gnn("layout", 7, hidden=16, layers=2, opcode_dim=4, config_dim=4).state_dict()
    assert any(not torch.equal(init[k], w0[k]) for k in init)
    model_dir = paths.model_dir("gnn", COLLECTION)
    assert (model_dir / "model.pt").exists() and (model_dir / "model.json").exists()
