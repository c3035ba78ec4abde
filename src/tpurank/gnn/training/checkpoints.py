"""Checkpoints of the GNN rankers: written atomically, read as weights only, and keyed by what
they were trained from (`training_key`: the config and the prepared train and valid files), so a
finished model is reused only while that is unchanged.

A checkpoint holds the resolved config and the model's constructor arguments (nanoGPT style), so
a `model.pt` alone rebuilds the model.
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any, NamedTuple

import torch
from torch import nn

from tpurank.core.atomic import write_model
from tpurank.core.collections import collection_dir
from tpurank.core.config import Config
from tpurank.core.declared import starting_points, train_io
from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import Paths
from tpurank.core.staleness import SEED, Files, current
from tpurank.gnn.nets.standardize import STATISTICS
from tpurank.gnn.recipe import ModelSpec
from tpurank.prepare.cache import CACHE_SUFFIX

CHECKPOINT = "model.pt"  # best weights; `complete` once training ended
RESUME = "last.pt"  # state after the latest validation, for resuming
CHECKPOINT_FORMAT = 1  # saved in every checkpoint (absent: 1); another value is refused at load


class LoadedModel(NamedTuple):
    """A model rebuilt from its checkpoint (in eval mode), and the checkpoint itself."""

    model: nn.Module
    checkpoint: dict[str, Any]


def training_key(spec: ModelSpec, paths: Paths, cfg: Config, collection: str) -> str:
    """The key of one training run's result (`StageIO.piece_key` on the train stage's declaration):
    the family, its config section and the seed, and the content of the collection's prepared train
    and valid files.

    Every checkpoint stores it; a complete `model.pt`, or a `last.pt` to resume, is used only
    while the key is unchanged. `prepare` rewrites a cache file only when its input or parameters
    change, so the key changes exactly when the training data does.
    """
    folder = paths.prepared / collection_dir(collection)
    files = [Files(folder / split, f"*{CACHE_SUFFIX}") for split in ("train", "valid")]
    starts = starting_points(cfg, spec.section, [collection])
    files += [Files(p.parent, p.name) for p in starts]  # the starting weights' content, not only their path
    # the sections a GNN reads: its own, and the seed (a LightGBM or features change keeps it)
    return train_io(paths, spec.name, starts).piece_key(
        {"model": spec.name}, files, cfg, (SEED, spec.section)
    )


def load_init_weights(model: nn.Module, path: Path, spec: ModelSpec, args: dict[str, Any]) -> None:
    """Start a training from the weights of another (`gnn.init_from`: e.g. a model trained on the
    synthetic tree, then fine-tuned on real graphs). The network must be built alike (family and
    constructor arguments); the input statistics stay those just fitted on this training's graphs,
    since the weights expect standardized inputs, not another data's raw scale.

    Raises:
        TpurankError: one line naming `path` when it is missing, unreadable or another network.
    """
    if not path.is_file():
        raise TpurankError(
            f"{path}: no such checkpoint ({spec.section}.init_from names the model.pt to start from)"
        )
    state = load_checkpoint(path)
    if state.get("model") != spec.name:
        raise TpurankError(
            f"{path}: a {state.get('model')} model; {spec.section}.init_from needs a {spec.name} one"
        )
    theirs = spec.network_class.with_new_names(state.get("model_args", {}))
    differ = sorted(k for k in args.keys() | theirs.keys() if args.get(k) != theirs.get(k))
    if differ:
        shown = ", ".join(f"{k} {theirs.get(k)!r} (here {args.get(k)!r})" for k in differ)
        raise TpurankError(f"{path}: another network than this training's: {shown}")
    own = model.state_dict()
    kept = {k: own[k] for k in STATISTICS if own.get(k) is not None}
    model.load_state_dict({**state["state_dict"], **kept})


def finished_model(spec: ModelSpec, paths: Paths, cfg: Config, collection: str) -> dict[str, Any] | None:
    """The complete `model.pt` of this family, config and data (its checkpoint), or None: then the
    model must be trained (or its training resumed)."""
    final = paths.model_dir(spec.name, collection) / CHECKPOINT
    if not final.exists():
        return None
    done = load_checkpoint(final)
    key = training_key(spec, paths, cfg, collection)
    return done if current(done.get("key"), key, whole=done.get("complete") is True) else None


def save_checkpoint(path: Path, state: dict[str, Any]) -> None:
    """torch.save atomically (a crash never leaves a truncated checkpoint); a failed write (torch
    says "enforce fail at inline_container.cc" when the disk fills) is one line naming `path`."""
    write_model(path, lambda tmp: torch.save(state, tmp), suffix=".pt", errors=(RuntimeError,))


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint written by `save_checkpoint` (weights only: never unpickles code).

    Raises:
        TpurankError: when missing or unreadable (one line: torch's own message spans several).
    """
    if not path.exists():
        raise TpurankError(f"{path}: no trained model; run {command('train')} for this model first")
    try:
        return _torch_load(path)
    except _Unreadable as e:
        raise TpurankError(
            f"{path}: unreadable checkpoint ({e}); delete it and train this model again"
        ) from None


def load_resume_state(path: Path) -> dict[str, Any] | None:
    """The resume state `path` (last.pt) holds; None when absent, or unreadable (after a one-line
    warning): it is only a shortcut, so training starts again from step 0 instead of failing."""
    if not path.exists():
        return None
    try:
        state = _torch_load(path)
    except _Unreadable as e:
        print(
            f"tpurank train: warning: {path}: unreadable resume state ({e}); training from step 0",
            file=sys.stderr,
        )
        return None
    return state


class _Unreadable(Exception):
    """A file torch cannot load as a checkpoint; the message says why in a few words."""


def _torch_load(path: Path) -> dict[str, Any]:
    """torch.load, weights only, with any failure (or a file that holds no dict) as `_Unreadable`:
    torch's messages run to paragraphs."""
    try:
        with warnings.catch_warnings():  # e.g. "Detected pickle protocol 4": noise beside the one line
            warnings.simplefilter("ignore", UserWarning)
            state = torch.load(path, map_location="cpu", weights_only=True)
    except OSError as e:
        raise _Unreadable(e.strerror or str(e)) from None
    except Exception as e:  # torch raises many types (KeyError, UnpicklingError...) for a damaged file
        if path.stat().st_size == 0:
            raise _Unreadable("an empty file") from None
        if "PytorchStreamReader" in str(e):  # a zip archive cut short or damaged
            raise _Unreadable("a truncated or damaged torch file") from None
        raise _Unreadable("not a torch file") from None
    if not isinstance(state, dict):  # a torch file of something else (a bare tensor)
        raise _Unreadable(f"a {type(state).__name__}, not a checkpoint")
    return state


def load_model(spec: ModelSpec, path: Path, collection: str | None = None) -> LoadedModel:
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
            f"retrain it: {command(f'train --model {spec.name} --collections {collection}')}"
        )
    try:
        model = spec.load_network(ckpt["model_args"])
        model.load_state_dict(ckpt["state_dict"])
    except (KeyError, TypeError, RuntimeError, ValueError) as e:
        raise TpurankError(
            f"{path}: checkpoint does not fit its model ({_reason(e)}); retrain this model"
        ) from None
    model.eval()
    return LoadedModel(model, ckpt)


def _reason(e: Exception) -> str:
    """The line of a load error that names what differs (torch puts a header line first)."""
    lines = [x.strip() for x in str(e).splitlines() if x.strip()] or [type(e).__name__]
    named = [x for x in lines if x.startswith(("size mismatch", "Missing key", "Unexpected key"))]
    return (named or lines)[0]
