"""Checkpoints of the GNN rankers: written atomically, read as weights only, and keyed by the
prepared data they were trained on (so a finished model is reused only while its data is the same).

A checkpoint holds the resolved config and the model's constructor arguments (nanoGPT style), so
a `model.pt` alone rebuilds the model.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from tpurank.core.atomic import atomic_path
from tpurank.core.collections import collection_dir
from tpurank.core.errors import TpurankError
from tpurank.core.identity import file_identity
from tpurank.core.paths import Paths
from tpurank.prepare.cache import CACHE_SUFFIX

if TYPE_CHECKING:
    from tpurank.gnn.recipe import ModelSpec

CHECKPOINT = "model.pt"  # best weights; `complete` once training ended
RESUME = "last.pt"  # state after the latest validation, for resuming
CHECKPOINT_FORMAT = 1  # saved in every checkpoint (absent: 1); another value is refused at load


def prepared_fingerprint(paths: Paths, collection: str) -> str:
    """sha256 over (split, name, content identity) of the collection's prepared train and valid files.

    `prepare` rewrites a cache file only when its input or parameters change, so this changes
    exactly when the training data does; a finished model is reused only while it is unchanged.
    """
    h = hashlib.sha256()
    for split in ("train", "valid"):
        folder = paths.prepared / collection_dir(collection) / split
        for f in sorted(folder.glob(f"*{CACHE_SUFFIX}")) if folder.is_dir() else []:
            h.update(f"{split}/{f.name}:{file_identity(f)}\n".encode())
    return h.hexdigest()[:16]


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save atomically (a crash never leaves a truncated checkpoint)."""
    with atomic_path(path, suffix=".pt") as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` (weights only: never unpickles code).

    Raises:
        TpurankError: when missing or unreadable.
    """
    if not path.exists():
        raise TpurankError(f"{path}: no trained model; run `python -m tpurank train` for this model first")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch raises many types for a damaged file
        raise TpurankError(f"{path}: unreadable checkpoint ({e})") from None


def load_model(
    spec: ModelSpec, path: Path, collection: str | None = None
) -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild a model from its checkpoint alone (architecture from the saved arguments), after
    checking it is one of ours, of this model family, format and (given) collection.

    Raises:
        TpurankError: naming the file and what does not match.
    """
    ckpt = load_checkpoint(path)
    if not isinstance(ckpt, dict) or ckpt.get("format", 1) != CHECKPOINT_FORMAT:
        found = ckpt.get("format") if isinstance(ckpt, dict) else type(ckpt).__name__
        raise TpurankError(
            f"{path}: checkpoint format {found}, expected {CHECKPOINT_FORMAT}; retrain this model"
        )
    if ckpt.get("model") != spec.name:
        raise TpurankError(f"{path}: checkpoint of model {ckpt.get('model')!r}, expected {spec.name!r}")
    if collection is not None and ckpt.get("collection") != collection:
        raise TpurankError(
            f"{path}: a model of {ckpt.get('collection')!r}, not {collection!r} (copied from another folder?); "
            f"retrain it: `tpurank train --model {spec.name} --collections {collection}`"
        )
    try:
        model = spec.build(ckpt["model_args"])
        model.load_state_dict(ckpt["state_dict"])
    except (KeyError, TypeError, RuntimeError, ValueError) as e:
        raise TpurankError(
            f"{path}: checkpoint does not fit its model ({_reason(e)}); retrain this model"
        ) from None
    model.eval()
    return model, ckpt


def _reason(e: Exception) -> str:
    """The line of a load error that names what differs (torch puts a header line first)."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()] or [type(e).__name__]
    named = [x for x in lines if x.startswith(("size mismatch", "Missing key", "Unexpected key"))]
    return (named or lines)[0]


def unwrap(model: nn.Module) -> nn.Module:
    """The model inside a DistributedDataParallel wrapper (or the model itself)."""
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
