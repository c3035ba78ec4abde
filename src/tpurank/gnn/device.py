"""Which device and numeric precision the GNNs run with, and the process group under torchrun.

CUDA only when the installed torch ships kernels for the GPU's compute capability (a P100, sm_60,
is not supported by recent builds: torch would fail at the first kernel), else the CPU with a
one-line warning. Mixed precision (config `bf16 = true`) is bf16 autocast where the GPU supports
bf16 (Ampere and newer), fp16 autocast with a gradient scaler elsewhere (T4, V100); the CPU runs
fp32. The choice is printed, saved in the checkpoint, and reused at prediction time.
Under `torchrun --nproc_per_node=N` each process takes its local rank's GPU (nccl) or the CPU (gloo).
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import NamedTuple

import torch
import torch.distributed as dist

from tpurank.core.memory import bound_cpu_heap
from tpurank.core.profiles import cuda_arch_supported

PRECISIONS = ("bf16", "fp16", "fp32")
_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


class CudaCheck(NamedTuple):
    """Whether a CUDA device can be used with the installed torch, and why not ("" when it can)."""

    usable: bool
    why: str


def usable_cuda(index: int = 0) -> CudaCheck:
    """Whether CUDA device `index` can be used with the installed torch, and why not."""
    if not torch.cuda.is_available():
        return CudaCheck(False, "no CUDA device")
    capability = tuple(torch.cuda.get_device_capability(index))
    archs = list(torch.cuda.get_arch_list())
    if cuda_arch_supported(capability, archs):  # type: ignore[arg-type]
        return CudaCheck(True, "")
    name = f"sm_{capability[0]}{capability[1]}"
    return CudaCheck(
        False,
        (
            f"the GPU's compute capability {capability[0]}.{capability[1]} ({name}) is not supported by the "
            f"installed torch {torch.__version__} (built for {', '.join(archs) or 'no GPU'})"
        ),
    )


def pick_device(local_rank: int = 0) -> torch.device:
    """CUDA device `local_rank` when usable, else the CPU (with a one-line warning when a GPU is unusable)."""
    ok, why = usable_cuda(local_rank)
    if ok:
        return torch.device("cuda", local_rank)
    if torch.cuda.is_available():
        print(f"WARNING: running on the CPU: {why}", file=sys.stderr)
    return torch.device("cpu")


def pick_precision(device: torch.device, mixed: bool) -> str:
    """bf16 / fp16 / fp32 for `device` when mixed precision is wanted (config `bf16`)."""
    if device.type != "cuda" or not mixed:
        return "fp32"
    return "bf16" if torch.cuda.is_bf16_supported() else "fp16"


def prediction_precision(device: torch.device, trained: str) -> str:
    """The precision the model was trained in when `device` runs it, else fp32 (with a one-line warning)."""
    if trained == "fp32":
        return "fp32"
    runs = device.type == "cuda" and (trained == "fp16" or torch.cuda.is_bf16_supported())
    if runs:
        return trained
    print(
        f"WARNING: the model was trained in {trained}, which {device} does not run; predicting in fp32",
        file=sys.stderr,
    )
    return "fp32"


def autocast(device: torch.device, precision: str) -> torch.autocast:
    """The one autocast context of training and prediction (off for fp32 and on the CPU)."""
    enabled = precision in _DTYPES and device.type == "cuda"
    return torch.autocast(device.type, dtype=_DTYPES.get(precision, torch.bfloat16), enabled=enabled)


def grad_scaler(precision: str) -> torch.amp.GradScaler:
    """A gradient scaler, active for fp16 only (bf16 has fp32's exponent range and needs none)."""
    return torch.amp.GradScaler("cuda", enabled=precision == "fp16")


def describe(device: torch.device, precision: str) -> str:
    if device.type != "cuda":
        return f"device cpu, {precision}"
    name = torch.cuda.get_device_name(device)
    major, minor = torch.cuda.get_device_capability(device)
    return f"device {device} ({name}, sm_{major}{minor}), {precision}"


@dataclass
class Runtime:
    """Where this process runs: device, rank and world size (1 without torchrun)."""

    device: torch.device
    rank: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0


def setup_runtime() -> Runtime:
    """A CUDA device the installed torch supports (one per local rank), else the CPU (with glibc's
    mmap threshold fixed where huge pages are at hand); joins the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = pick_device(local)
    if device.type == "cuda":
        torch.cuda.set_device(local)
    else:
        bound_cpu_heap()  # big CPU tensors give their pages back when freed (tpurank.core.memory)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if world > 1 else 0
    return Runtime(device=device, rank=rank, world=world)


def unwrap(model: torch.nn.Module) -> torch.nn.Module:
    """The model inside a DistributedDataParallel wrapper (or the model itself)."""
    return model.module if isinstance(model, torch.nn.parallel.DistributedDataParallel) else model
