"""Device and precision choice, with torch.cuda monkeypatched: no GPU is needed.

CUDA only where the installed torch has kernels for the GPU, bf16 only where supported, fp16 with
a gradient scaler elsewhere; the choice is saved in the checkpoint and reused at prediction.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from helpers import small_gnn

from tpurank.core.paths import Paths
from tpurank.gnn import device as devices
from tpurank.gnn.data import from_prepared, load_split
from tpurank.gnn.device import Runtime, setup_runtime
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.training import loop
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_checkpoint

# what recent CUDA 12 torch wheels list: no sm_60 (P100) any more
RECENT = ["sm_75", "sm_80", "sm_86", "sm_90", "compute_90"]


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch):
    """A fake GPU: call with (capability, bf16 support, arch list)."""

    def install(capability: tuple[int, int], bf16: bool, archs: list[str] = RECENT) -> None:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: capability)
        monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: list(archs))
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: bf16)
        monkeypatch.setattr(torch.cuda, "set_device", lambda *a: None)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")

    return install


@pytest.mark.parametrize(
    "capability, archs, ok",
    [
        ((6, 0), RECENT, False),  # P100 on a recent build
        ((7, 5), RECENT, True),  # T4
        ((8, 9), ["sm_80", "sm_86"], True),  # same major, newer minor runs the sm_86 cubin
        ((8, 0), ["sm_86"], False),  # an older minor does not
        ((12, 0), RECENT, True),  # newer than every cubin: PTX compute_90 is compiled at load
        ((12, 0), ["sm_90"], False),
        ((6, 0), ["sm_50", "sm_60", "sm_70"], True),  # an older build that still ships sm_60
        ((7, 5), [], False),  # a CPU build
    ],
)
def test_cuda_arch_supported(capability, archs, ok) -> None:
    assert devices.cuda_arch_supported(capability, archs) is ok


def test_unsupported_gpu_falls_back_to_cpu_with_one_warning(fake_gpu, capsys) -> None:
    fake_gpu((6, 0), bf16=False)
    rt = setup_runtime()
    assert rt.device.type == "cpu"
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "WARNING" in err[0] and "6.0" in err[0] and "sm_60" in err[0]


def test_no_gpu_is_cpu_without_warning(monkeypatch, capsys) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert setup_runtime().device.type == "cpu"
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "capability, bf16, mixed, want",
    [((7, 5), False, True, "fp16"), ((8, 0), True, True, "bf16"), ((8, 0), True, False, "fp32")],
)
def test_supported_gpu_and_its_precision(fake_gpu, capability, bf16, mixed, want) -> None:
    fake_gpu(capability, bf16=bf16)
    rt = setup_runtime()
    assert rt.device == torch.device("cuda", 0)
    assert devices.pick_precision(rt.device, mixed) == want
    assert devices.pick_precision(torch.device("cpu"), True) == "fp32"


def test_prediction_reuses_the_trained_precision(fake_gpu, capsys) -> None:
    cuda = torch.device("cuda", 0)
    fake_gpu((8, 0), bf16=True)
    assert devices.prediction_precision(cuda, "bf16") == "bf16"
    assert devices.prediction_precision(cuda, "fp16") == "fp16"
    assert capsys.readouterr().err == ""
    fake_gpu((7, 5), bf16=False)  # a bf16 model on a T4
    assert devices.prediction_precision(cuda, "bf16") == "fp32"
    assert "WARNING" in capsys.readouterr().err
    assert devices.prediction_precision(torch.device("cpu"), "fp16") == "fp32"
    assert devices.prediction_precision(torch.device("cpu"), "fp32") == "fp32"


def test_autocast_and_scaler_follow_the_precision() -> None:
    cuda = torch.device("cuda", 0)
    assert devices.autocast(cuda, "fp16").fast_dtype == torch.float16
    assert devices.autocast(cuda, "bf16").fast_dtype == torch.bfloat16
    assert not devices.autocast(cuda, "fp32")._enabled
    assert not devices.autocast(torch.device("cpu"), "bf16")._enabled
    assert not devices.grad_scaler("bf16").is_enabled() and not devices.grad_scaler("fp32").is_enabled()


def test_scaled_step_equals_the_plain_step() -> None:
    """train_step with an active gradient scaler (torch's CPU scaler) unscales before clipping and
    stepping: the update equals the unscaled one."""
    from helpers import prepared_graph, small_cfg

    graphs = [from_prepared(prepared_graph("layout", seed=s)) for s in range(2)]
    rows = [np.arange(10), np.arange(10)]
    r = gnn_model.SPEC.recipe(small_cfg(), "layout")
    after = []
    for scaler in (None, torch.amp.GradScaler("cpu", init_scale=1024.0)):
        torch.manual_seed(0)
        m = small_gnn("layout", 7, hidden=16, layers=2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        batches = loop.micro_batches(graphs, rows, 0)
        loop.train_step(m, opt, batches, r, torch.device("cpu"), precision="fp32", scaler=scaler)
        after.append(m.state_dict())
    for k in after[0]:
        assert torch.allclose(after[0][k], after[1][k], atol=1e-6), k


def test_precision_is_saved_and_reused_at_prediction(
    tiny_paths: Paths, tmp_path, monkeypatch, capsys
) -> None:
    """Training records its device and precision in model.pt and model.json; prediction reads it back."""
    from helpers import small_cfg

    paths = Paths(data=tiny_paths.data, out=tmp_path)
    collection = "layout:xla:default"
    train = load_split(tiny_paths, collection, "train", progress=False)
    valid = load_split(tiny_paths, collection, "valid", progress=False)
    cfg = small_cfg(max_steps=1, graphs_per_batch=2, configs_per_graph=8)
    # as on a T4: fp16 chosen (on this CPU-only machine autocast stays off and the scaler disables itself)
    monkeypatch.setattr(devices, "pick_precision", lambda device, mixed: "fp16")
    loop.fit(gnn_model.SPEC, paths, cfg, collection, train, valid, Runtime(torch.device("cpu")))
    assert "device cpu, fp16" in capsys.readouterr().out
    out = paths.model_dir("gnn", collection)
    ckpt = load_checkpoint(out / CHECKPOINT)
    assert ckpt["precision"] == "fp16" and ckpt["device"] == "cpu"
    assert json.loads((out / "model.json").read_text())["precision"] == "fp16"
    seen = []
    real = devices.prediction_precision
    monkeypatch.setattr(devices, "prediction_precision", lambda d, p: seen.append(p) or real(d, p))
    preds = predict_collection(gnn_model.SPEC, paths, cfg, collection, "valid", graphs=valid)
    assert seen == ["fp16"] and len(preds) == len(valid)
    captured = capsys.readouterr()
    assert "trained in fp16" in captured.err and "device cpu, fp32" in captured.out
