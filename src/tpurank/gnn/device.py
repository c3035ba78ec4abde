"""Where a GNN runs: device, rank and world size, and the one autocast context of training and
prediction (CUDA + bf16 autocast; DDP under torchrun, gloo on CPU and nccl on GPU)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist


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
    """CUDA when present (one GPU per local rank), else CPU; joins the process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if torch.cuda.is_available():
        torch.cuda.set_device(local)
        device = torch.device("cuda", local)
    else:
        device = torch.device("cpu")
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if world > 1 else 0
    return Runtime(device=device, rank=rank, world=world)


def autocast(device: torch.device, bf16: bool) -> torch.autocast:
    """The one autocast context of training and prediction: bf16 on CUDA when enabled, else off."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16 and device.type == "cuda")
