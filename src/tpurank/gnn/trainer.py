"""Training loop shared by the GNN rankers: sampling, losses, AdamW/Adam, cosine schedule, early
stopping on the validation metric, resumable checkpoints, CUDA + mixed precision (device.py) and DDP.

Checkpoints hold the resolved config and the model's constructor arguments (nanoGPT style), so a
`model.pt` alone rebuilds the model. Files in `models/<name>/<collection>/`:
`model.pt` (best weights; `complete` once training ended), `last.pt` (state after the latest epoch,
for resuming), `model.json` (provenance and the per-epoch history).

Distributed: under `torchrun --nproc_per_node=N` every process trains on its own graphs of each
step and DistributedDataParallel averages the gradients (gloo on CPU, nccl on GPU); process 0
validates, decides early stopping for all, and writes the files.
"""

from __future__ import annotations

import contextlib
import hashlib
import math
import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from tpurank.atomic import atomic_path
from tpurank.config import Config, to_dict
from tpurank.dataset import check_collection, collection_dir, kind_of
from tpurank.errors import TpurankError
from tpurank.gnn import device as devices
from tpurank.gnn.data import Batch, GraphData, eval_configs, from_prepared, make_batch, sample_rows
from tpurank.gnn.losses import ranking_loss
from tpurank.metrics import kendall_tau, order_from_costs, tile_score
from tpurank.paths import Paths
from tpurank.prepare.cache import iter_prepared
from tpurank.progress import tqdm
from tpurank.provenance import write_sidecar

CHECKPOINT = "model.pt"
RESUME = "last.pt"
SIDECAR = "model.json"
PASS_NODE_BUDGET = 2_000_000  # configs x nodes per scoring pass: (C, N, 64) float32 states stay ~0.5 GB


@dataclass
class Recipe:
    """How a model is trained and run; built from its config section."""

    loss: str  # "hinge" or "listmle" (resolved: never "auto")
    margin: float
    configs_per_graph: int
    graphs_per_batch: int
    optimizer: str  # "adamw" or "adam"
    lr: float
    weight_decay: float
    schedule: str  # "cosine" or "constant"
    clip_norm: float  # 0 = off
    clip_per_tensor: bool  # clip each gradient tensor on its own (the official trainer) or the global norm
    epochs: int
    patience: int
    max_steps_per_epoch: int
    eval_max_configs: int
    predict_chunk: int
    bf16: bool
    max_batch_nodes: int = 0  # nodes per training forward pass; 0 = the whole step at once


@dataclass
class ModelSpec:
    """A model family: its registry name, constructor, and how the config maps to it."""

    name: str
    build: Callable[[dict[str, Any]], nn.Module]
    model_args: Callable[[Config, str, int], dict[str, Any]]  # (cfg, kind, node_feat_dim) -> kwargs
    recipe: Callable[[Config, str], Recipe]  # (cfg, kind) -> how it is trained and run


# ---------------------------------------------------------------------------------------------- device


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
    """A CUDA device the installed torch supports (one per local rank), else the CPU; joins the
    process group under torchrun."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    device = devices.pick_device(local)
    if device.type == "cuda":
        torch.cuda.set_device(local)
    if world > 1 and not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    rank = dist.get_rank() if world > 1 else 0
    return Runtime(device=device, rank=rank, world=world)


def autocast(device: torch.device, precision: str) -> torch.autocast:
    """The one autocast context of training and prediction (bf16/fp16 on CUDA, else off)."""
    return devices.autocast(device, precision)


# ------------------------------------------------------------------------------------------------ data


def load_split(paths: Paths, collection: str, split: str, progress: bool = True) -> list[GraphData]:
    """Every prepared graph of a collection and split as GraphData.

    Raises:
        TpurankError: when the cache holds no graph for it.
    """
    graphs = [
        from_prepared(g)
        for g in tqdm(
            iter_prepared(paths.prepared, collection, split),
            desc=f"load {collection} {split}",
            unit="graph",
            disable=not progress,
            leave=False,
        )
    ]
    if not graphs:
        raise TpurankError(
            f"{paths.prepared}: no prepared {split} graphs for {collection}; run `python -m tpurank prepare`"
        )
    return graphs


@torch.no_grad()
def score_rows(
    model: nn.Module,
    g: GraphData,
    rows: np.ndarray,
    chunk: int,
    device: torch.device,
    precision: str = "fp32",
) -> np.ndarray:
    """Costs of the given unique-config rows of one graph, `chunk` configs per forward pass.

    Args:
        model: a ranker in eval mode.
        g: the graph.
        rows: indices into its unique configs.
        chunk: configs per pass (bounds memory; lowered further on big graphs by PASS_NODE_BUDGET).
        device: where the model is.
        precision: bf16, fp16 or fp32 (device.py), as the model was trained.
    """
    out = np.empty(len(rows), dtype=np.float64)
    chunk = max(1, min(chunk, PASS_NODE_BUDGET // max(1, len(g.opcode))))
    for start in range(0, len(rows), chunk):
        part = rows[start : start + chunk]
        with autocast(device, precision):
            cost = model(make_batch([g], [part]).to(device))
        out[start : start + len(part)] = cost.float()[0, : len(part)].cpu().numpy()
    return out


def graph_score(kind: str, cost: np.ndarray, runtime: np.ndarray) -> float:
    """The competition metric of one graph from predicted costs (tau for layout, tile score for tile)."""
    order = order_from_costs(cost)
    return tile_score(order, runtime) if kind == "tile" else kendall_tau(order, runtime)


def evaluate(
    model: nn.Module, graphs: list[GraphData], recipe: Recipe, device: torch.device, precision: str = "fp32"
) -> float:
    """Mean validation metric over graphs with something to rank (NaN graphs left out), on the
    original config lists (at most `eval_max_configs` per graph), duplicates included, each config
    against its own measurement: the competition's score, as the validation report computes it.

    Args:
        model: the ranker (switched to eval mode here, restored after).
        graphs: validation graphs.
        recipe: gives eval_max_configs and predict_chunk.
        device: where the model is.
        precision: bf16, fp16 or fp32 (as training runs).
    """
    was_training = model.training
    model.eval()
    scores = []
    for g in graphs:
        if not g.rankable:
            continue
        configs = eval_configs(g, recipe.eval_max_configs)
        rows, back = np.unique(g.inverse[configs], return_inverse=True)  # score each unique config once
        cost = score_rows(model, g, rows, recipe.predict_chunk, device, precision)[back]
        s = graph_score(g.kind, cost, g.config_runtime[configs])
        if not math.isnan(s):
            scores.append(s)
    model.train(was_training)
    return float(np.mean(scores)) if scores else math.nan


# ----------------------------------------------------------------------------------------- checkpoints


def prepared_fingerprint(paths: Paths, collection: str) -> str:
    """sha256 over (split, name, size, mtime) of the collection's prepared train and valid files.

    `prepare` rewrites a cache file only when its input or parameters change, so this changes
    exactly when the training data does; a finished model is reused only while it is unchanged.
    """
    h = hashlib.sha256()
    for split in ("train", "valid"):
        folder = paths.prepared / collection_dir(collection) / split
        for f in sorted(folder.glob("*.npz")) if folder.is_dir() else []:
            st = f.stat()
            h.update(f"{split}/{f.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
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


def load_model(spec: ModelSpec, path: Path) -> tuple[nn.Module, dict[str, Any]]:
    """Rebuild a model from its checkpoint alone (architecture from the saved arguments)."""
    ckpt = load_checkpoint(path)
    if ckpt.get("model") != spec.name:
        raise TpurankError(f"{path}: checkpoint of model {ckpt.get('model')!r}, expected {spec.name!r}")
    model = spec.build(ckpt["model_args"])
    model.load_state_dict(ckpt["state_dict"])
    model.eval()
    return model, ckpt


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model


# -------------------------------------------------------------------------------------------- training


def make_optimizer(model: nn.Module, r: Recipe) -> torch.optim.Optimizer:
    if r.optimizer == "adam":
        return torch.optim.Adam(model.parameters(), lr=r.lr)
    return torch.optim.AdamW(model.parameters(), lr=r.lr, weight_decay=r.weight_decay)


def _clip(model: nn.Module, r: Recipe) -> None:
    if r.clip_norm <= 0:
        return
    if r.clip_per_tensor:
        for p in model.parameters():
            if p.grad is not None:
                torch.nn.utils.clip_grad_norm_([p], r.clip_norm)
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), r.clip_norm)


def micro_batches(graphs: list[GraphData], rows: list[np.ndarray], max_nodes: int) -> list[Batch]:
    """One step's graphs as batches of at most `max_nodes` nodes each (a bigger graph goes alone).

    Memory grows with configs x nodes, so a step that samples several big graphs is run as
    micro-batches whose gradients add up to those of the whole step.

    Args:
        graphs: this step's graphs.
        rows: their sampled unique-config rows.
        max_nodes: node budget per micro-batch (0 = no limit).
    """
    groups: list[list[int]] = [[]]
    nodes = 0
    for i, g in enumerate(graphs):
        n = len(g.opcode)
        if groups[-1] and max_nodes > 0 and nodes + n > max_nodes:
            groups.append([])
            nodes = 0
        groups[-1].append(i)
        nodes += n
    return [make_batch([graphs[i] for i in grp], [rows[i] for i in grp]) for grp in groups]


def train_step(
    model: nn.Module,
    opt: torch.optim.Optimizer,
    batches: Batch | list[Batch],
    r: Recipe,
    device: torch.device,
    precision: str = "fp32",
    scaler: torch.amp.GradScaler | None = None,
) -> float:
    """One optimisation step over the micro-batches of one step (moved to `device`); returns the loss.

    Each micro-batch's loss (a mean over its graphs) is weighted by its share of the step's graphs,
    so the gradient equals that of one batch holding all of them.

    Args:
        model: the ranker (DDP-wrapped or not), in train mode.
        opt: its optimizer.
        batches: the sampled configs of this step's graphs (see `micro_batches`).
        r: loss, margin and clipping settings.
        device: where the model is.
        precision: bf16, fp16 or fp32 autocast (device.py).
        scaler: the fp16 gradient scaler (None or disabled: plain backward).
    """
    batches = [batches] if isinstance(batches, Batch) else batches
    total_graphs = sum(b.num_graphs for b in batches)
    opt.zero_grad(set_to_none=True)
    total = 0.0
    for i, batch in enumerate(batches):
        batch = batch.to(device)
        last = i == len(batches) - 1
        sync = (
            model.no_sync() if isinstance(model, nn.parallel.DistributedDataParallel) and not last else None
        )
        with sync or contextlib.nullcontext():
            with autocast(device, precision):
                cost = model(batch)
            loss = ranking_loss(r.loss, cost.float(), batch.runtime, batch.mask, r.margin, batch.weight)
            share = batch.num_graphs / total_graphs
            (scaler.scale(loss * share) if scaler is not None else loss * share).backward()
        total += float(loss.detach()) * share
    if scaler is not None and scaler.is_enabled():
        scaler.unscale_(opt)  # clip the true gradients
        _clip(model, r)
        scaler.step(opt)  # skips the step when a gradient overflowed
        scaler.update()
        return total
    _clip(model, r)
    opt.step()
    return total


def _step_graphs(order: np.ndarray, step: int, rt: Runtime, per_rank: int) -> list[int]:
    """This rank's graphs of one step: consecutive slices of the epoch's shuffled order, wrapping."""
    start = step * per_rank * rt.world + rt.rank * per_rank
    return [int(order[(start + i) % len(order)]) for i in range(per_rank)]


def steps_per_epoch(train: list[GraphData], r: Recipe, world: int) -> int:
    """Steps that sample about every unique config once (each step takes C configs of B graphs per process).

    A pass over the graphs alone would see a small share of their configs (graphs hold hundreds to
    100,000 configs); capped at `max_steps_per_epoch` so validation still happens regularly.
    """
    per_step = r.configs_per_graph * r.graphs_per_batch * world
    configs = sum(g.num_unique for g in train)
    graphs = math.ceil(len(train) / (r.graphs_per_batch * world))
    return max(1, min(r.max_steps_per_epoch, max(graphs, math.ceil(configs / per_step))))


def _validate_recipe(r: Recipe) -> None:
    if r.configs_per_graph < 2:
        raise TpurankError("config: configs_per_graph must be at least 2 (ranking needs pairs)")
    if r.graphs_per_batch < 1 or r.epochs < 1 or r.max_steps_per_epoch < 1:
        raise TpurankError("config: graphs_per_batch, epochs and max_steps_per_epoch must be at least 1")


def train_collection(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    train_graphs: list[GraphData] | None = None,
    valid_graphs: list[GraphData] | None = None,
    progress: bool = True,
) -> dict[str, Any]:
    """Train one collection; resumes from `last.pt` and skips when a complete `model.pt` has this config.

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config with the collection's overrides applied.
        collection: one of COLLECTIONS.
        train_graphs, valid_graphs: preloaded graphs (default: read from the prepared cache).
        progress: show progress bars.

    Returns:
        The training summary also written to `model.json` (best score, history, throughput).
    """
    check_collection(collection)
    _validate_recipe(spec.recipe(cfg, kind_of(collection)))
    rt = setup_runtime()
    final = paths.model_dir(spec.name, collection) / CHECKPOINT
    if final.exists():
        done = load_checkpoint(final)
        same_data = done.get("data") == prepared_fingerprint(paths, collection)
        if done.get("complete") and done.get("config") == to_dict(cfg) and same_data:
            if rt.main and progress:
                print(f"[{spec.name}] {collection}: {final} is up to date (same config and data); skipping")
            return done.get("summary", {})

    train = train_graphs if train_graphs is not None else load_split(paths, collection, "train", progress)
    valid = valid_graphs if valid_graphs is not None else load_split(paths, collection, "valid", progress)
    return fit(spec, paths, cfg, collection, train, valid, rt, progress)[1]


def fit(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    train: list[GraphData],
    valid: list[GraphData],
    rt: Runtime,
    progress: bool = True,
) -> tuple[nn.Module, dict[str, Any]]:
    """The training loop; writes `model.pt`, `last.pt` and `model.json` under the model folder.

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config with the collection's overrides applied.
        collection: one of COLLECTIONS.
        train, valid: the graphs.
        rt: device and process group (from `setup_runtime`).
        progress: show progress bars.

    Returns:
        The trained model (last weights, unwrapped from DDP) and the summary.
    """
    kind = kind_of(collection)
    r = spec.recipe(cfg, kind)
    _validate_recipe(r)
    out = paths.model_dir(spec.name, collection)
    cfg_dict = to_dict(cfg)
    final = out / CHECKPOINT
    train = [g for g in train if g.rankable]
    if not train:
        raise TpurankError(f"{collection}: no train graph has two configs with different runtimes")
    if train[0].kind != kind:
        raise TpurankError(f"{collection}: prepared graphs are {train[0].kind}, expected {kind}")

    torch.manual_seed(cfg.seed)
    args = spec.model_args(cfg, kind, int(train[0].node_feat.shape[1]))
    model = spec.build(args).to(rt.device)
    opt = make_optimizer(model, r)
    precision = devices.pick_precision(rt.device, r.bf16)
    scaler = devices.grad_scaler(precision)
    if rt.main and progress:
        print(f"[{spec.name}] {collection}: {devices.describe(rt.device, precision)}")
    steps = steps_per_epoch(train, r, rt.world)
    total = steps * r.epochs
    sched = (
        torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=total)
        if r.schedule == "cosine"
        else torch.optim.lr_scheduler.ConstantLR(opt, factor=1.0, total_iters=0)
    )
    start_epoch, best, bad, history = 0, -math.inf, 0, []
    data_key = prepared_fingerprint(paths, collection)
    resume = out / RESUME
    if resume.exists():
        state = load_checkpoint(resume)
        same = (state.get("config"), state.get("model_args"), state.get("data")) == (cfg_dict, args, data_key)
        if same:
            model.load_state_dict(state["state_dict"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            start_epoch, best, bad, history = (
                state["epoch"] + 1,
                state["best"],
                state["bad"],
                state["history"],
            )
            if rt.main and progress:
                print(f"[{spec.name}] {collection}: resuming after epoch {state['epoch'] + 1} from {resume}")
    if rt.world > 1:
        ids = [rt.device.index] if rt.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def state_of(epoch: int, complete: bool, resumable: bool = False) -> dict[str, Any]:
        state = {
            "model": spec.name,
            "model_args": args,
            "config": cfg_dict,
            "recipe": asdict(r),
            "collection": collection,
            "state_dict": _unwrap(model).state_dict(),
            "epoch": epoch,
            "best": best,
            "bad": bad,
            "history": history,
            "complete": complete,
            "data": data_key,
            "device": str(rt.device),
            "precision": precision,
        }
        if resumable:
            state.update(optimizer=opt.state_dict(), scheduler=sched.state_dict())
        return state

    stop = bad >= r.patience
    epoch = start_epoch - 1
    for epoch in range(start_epoch, r.epochs):
        if stop:
            break
        model.train()
        order = np.random.default_rng([cfg.seed, epoch]).permutation(len(train))  # same on every rank
        torch.manual_seed(cfg.seed * 1_000_003 + epoch * 1009 + rt.rank)  # dropout; resumable
        losses, configs_seen, t0 = [], 0, time.perf_counter()
        bar = tqdm(range(steps), desc=f"{spec.name} {collection} epoch {epoch + 1}/{r.epochs}",
                   disable=not (progress and rt.main), leave=False)  # fmt: skip
        for step in bar:
            idx = _step_graphs(order, step, rt, r.graphs_per_batch)
            rng = np.random.default_rng([cfg.seed, epoch, step, rt.rank])
            graphs = [train[i] for i in idx]
            rows = [sample_rows(g, r.configs_per_graph, rng) for g in graphs]
            batches = micro_batches(graphs, rows, r.max_batch_nodes)
            losses.append(train_step(model, opt, batches, r, rt.device, precision, scaler))
            sched.step()
            configs_seen += sum(int(b.mask.sum()) for b in batches)
            bar.set_postfix(
                loss=f"{np.mean(losses[-20:]):.4f}", val=f"{best:.4f}" if best > -math.inf else "-"
            )
        seconds = time.perf_counter() - t0
        score = evaluate(_unwrap(model), valid, r, rt.device, precision) if rt.main else 0.0
        if math.isnan(score):  # no rankable valid graph: fall back to the training loss
            score = -float(np.mean(losses))
        if rt.world > 1:
            box = [score]
            dist.broadcast_object_list(box, src=0)
            score = box[0]
        improved = score > best
        best, bad = (score, 0) if improved else (best, bad + 1)
        history.append({
            "epoch": epoch + 1,
            "train_loss": float(np.mean(losses)),
            "valid_score": score,
            "seconds": round(seconds, 3),
            "configs_per_s": round(configs_seen * rt.world / max(seconds, 1e-9), 1),
        })  # fmt: skip
        if rt.main:
            if improved:
                save_checkpoint(final, state_of(epoch, complete=False))
            save_checkpoint(resume, state_of(epoch, complete=False, resumable=True))
            if progress:
                tqdm.write(
                    f"[{spec.name}] {collection} epoch {epoch + 1}: loss {history[-1]['train_loss']:.4f} "
                    f"valid {score:.4f} (best {best:.4f}) {history[-1]['configs_per_s']:.0f} configs/s"
                )
        stop = bad >= r.patience

    summary = {"best_valid_score": best, "epochs_run": len(history), "history": history}
    if rt.main:
        ckpt = load_checkpoint(final) if final.exists() else state_of(epoch, complete=False)
        ckpt.update(complete=True, summary=summary)
        save_checkpoint(final, ckpt)
        write_sidecar(
            out / SIDECAR, cfg, paths.data, model=spec.name, collection=collection,
            device=str(rt.device), precision=precision, **summary,
        )  # fmt: skip
        resume.unlink(missing_ok=True)
    if rt.world > 1:
        dist.barrier()
    return _unwrap(model), summary


def predict_collection(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    split: str,
    graphs: list[GraphData] | None = None,
    progress: bool = True,
) -> dict[str, np.ndarray]:
    """Graph ID -> cost per original config index (lower = faster), from `model.pt`.

    Args:
        spec: the model family.
        paths: resolved paths.
        cfg: config (its `predict_chunk` is used; architecture and bf16 come from the checkpoint).
        collection: one of COLLECTIONS.
        split: train, valid or test.
        graphs: preloaded graphs (default: read from the prepared cache).
        progress: show a progress bar.
    """
    check_collection(collection)
    path = paths.model_dir(spec.name, collection) / CHECKPOINT
    model, ckpt = load_model(spec, path)
    trained = Recipe(**ckpt["recipe"])
    chunk = spec.recipe(cfg, kind_of(collection)).predict_chunk
    rt = setup_runtime()
    model.to(rt.device)
    # checkpoints from before the precision was saved: bf16 on CUDA when the recipe allowed it
    trained_precision = ckpt.get("precision") or ("bf16" if trained.bf16 else "fp32")
    precision = devices.prediction_precision(rt.device, trained_precision)
    if progress:
        print(f"[{spec.name}] predict {collection}: {devices.describe(rt.device, precision)}")
    graphs = graphs if graphs is not None else load_split(paths, collection, split, progress)
    want = ckpt["model_args"]["node_feat_dim"]
    out: dict[str, np.ndarray] = {}
    for g in tqdm(
        graphs, desc=f"{spec.name} predict {collection} {split}", unit="graph", disable=not progress
    ):
        if g.node_feat.shape[1] != want:
            raise TpurankError(
                f"{g.id}: {g.node_feat.shape[1]} node features but the model was trained on {want}; "
                "re-run prepare and train together"
            )
        unique_cost = score_rows(model, g, np.arange(g.num_unique), chunk, rt.device, precision)
        out[g.id] = unique_cost[g.inverse]
    return out
