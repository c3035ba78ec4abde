"""Training loop shared by the GNN rankers: sampling, losses, AdamW/Adam, cosine schedule, early
stopping on the validation metric, resumable checkpoints, CUDA + mixed precision (device.py) and DDP.

Training length is a budget (`Recipe.max_steps` optimizer steps, `Recipe.time_budget_min`
minutes), not epochs: collections differ 80-fold in size, so an epoch means nothing across them.
Graphs stream: only their structure is held, configs are decoded per batch from the cache
(`tpurank.prepare.store.ConfigStore`), so memory does not grow with a collection's configs.

Files in `models/<name>/<collection>/`: `model.pt` (best weights; `complete` once training ended),
`last.pt` (state after the latest validation, for resuming), `model.json` (provenance and history).

Distributed: under `torchrun --nproc_per_node=N` every process trains on its own graphs of each
step and DistributedDataParallel averages the gradients (gloo on CPU, nccl on GPU); process 0
validates, decides early stopping for all, and writes the files.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from tpurank.config import Config, to_dict
from tpurank.dataset import check_collection, kind_of
from tpurank.errors import TpurankError
from tpurank.gnn import device as devices
from tpurank.gnn import gst
from tpurank.gnn.checkpoints import (
    CHECKPOINT,
    RESUME,
    load_checkpoint,
    prepared_fingerprint,
    save_checkpoint,
    unwrap,
)
from tpurank.gnn.data import GraphData, load_split, sample_rows
from tpurank.gnn.device import Runtime, setup_runtime
from tpurank.gnn.recipe import ModelSpec, Recipe
from tpurank.gnn.schedule import make_scheduler
from tpurank.gnn.scoring import evaluate
from tpurank.gnn.step import make_optimizer, micro_batches, train_step
from tpurank.memory import release_free_memory
from tpurank.paths import Paths
from tpurank.progress import tqdm
from tpurank.provenance import write_sidecar

__all__ = [
    "ModelSpec",
    "Recipe",
    "fit",
    "load_split",
    "setup_runtime",
    "train_collection",
]

SIDECAR = "model.json"
AUTO_EVAL_MAX = 200  # eval_every = 0: about one pass over the train configs, but at most this many steps


# -------------------------------------------------------------------------------------------- training


def _step_graphs(order: np.ndarray, step: int, rt: Runtime, per_rank: int) -> list[int]:
    """This rank's graphs of one step: consecutive slices of the round's shuffled order, wrapping."""
    start = step * per_rank * rt.world + rt.rank * per_rank
    return [int(order[(start + i) % len(order)]) for i in range(per_rank)]


def eval_interval(train: list[GraphData], r: Recipe, world: int) -> int:
    """Steps between validations: `eval_every`, or (0) about one pass over the unique train configs
    (each step takes C configs of B graphs per process), at most AUTO_EVAL_MAX and `max_steps`."""
    if r.eval_every > 0:
        return min(r.eval_every, r.max_steps)
    per_step = r.configs_per_graph * r.graphs_per_batch * world
    configs = sum(g.num_unique for g in train)
    graphs = math.ceil(len(train) / (r.graphs_per_batch * world))
    return max(1, min(AUTO_EVAL_MAX, r.max_steps, max(graphs, math.ceil(configs / per_step))))


def _validate_recipe(r: Recipe) -> None:
    if r.configs_per_graph < 2:
        raise TpurankError("config: configs_per_graph must be at least 2 (ranking needs pairs)")
    if r.graphs_per_batch < 1 or r.max_steps < 1 or r.eval_every < 0 or r.patience < 1:
        raise TpurankError(
            "config: graphs_per_batch, max_steps and patience must be at least 1, eval_every at least 0"
        )
    if r.time_budget_min < 0:
        raise TpurankError(f"config: time_budget_min must be >= 0 (0 = no limit), got {r.time_budget_min}")


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


def _out_of_time(r: Recipe, seconds: float, rt: Runtime) -> bool:
    """True once the time budget is spent (the same answer on every rank)."""
    late = r.time_budget_min > 0 and seconds >= r.time_budget_min * 60
    if rt.world > 1:
        flag = torch.tensor([float(late)], device=rt.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        late = bool(flag.item())
    return late


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

    Runs until `max_steps`, the time budget, or `patience` validations without a gain, validating
    every `eval_interval` steps and at the end. Resumes from `last.pt` (steps and seconds spent
    carry over) when it was written with the same config, model and data.

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
    model = spec.build(args)
    if spec.fit_train is not None:
        spec.fit_train(model, train)  # statistics of the train graphs only (saved in the state dict)
    model = model.to(rt.device)
    opt = make_optimizer(model, r)
    segmented = gst.GstState(r, args["hidden"]) if r.segment_nodes and kind == "layout" else None
    if segmented is not None and args.get("layer_attention"):
        raise TpurankError(
            "config: gnn.segment_nodes (GST) cannot be combined with gnn.layer_attention: a segment's "
            "embedding would depend on the other configs of the step, not only its own (on by default for the "
            f'default collections: --set collections."{collection}".gnn.layer_attention=false)'
        )
    precision = devices.pick_precision(rt.device, r.bf16)
    scaler = devices.grad_scaler(precision)
    if rt.main and progress:
        print(f"[{spec.name}] {collection}: {devices.describe(rt.device, precision)}")
    every = eval_interval(train, r, rt.world)
    sched = make_scheduler(opt, r)
    step, spent, best, bad, history = 0, 0.0, -math.inf, 0, []
    data_key = prepared_fingerprint(paths, collection)
    resume = out / RESUME
    if resume.exists():
        state = load_checkpoint(resume)
        same = (state.get("config"), state.get("model_args"), state.get("data")) == (cfg_dict, args, data_key)
        if same and "step" in state:
            model.load_state_dict(state["state_dict"])
            opt.load_state_dict(state["optimizer"])
            sched.load_state_dict(state["scheduler"])
            step, spent, best, bad, history = (
                state["step"], state["seconds"], state["best"], state["bad"], state["history"]
            )  # fmt: skip
            if rt.main and progress:
                print(f"[{spec.name}] {collection}: resuming after step {step} from {resume}")
    if rt.world > 1:
        ids = [rt.device.index] if rt.device.type == "cuda" else None
        model = nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def state_of(complete: bool, resumable: bool = False) -> dict[str, Any]:
        state = {
            "model": spec.name,
            "model_args": args,
            "config": cfg_dict,
            "recipe": asdict(r),
            "collection": collection,
            "state_dict": unwrap(model).state_dict(),
            "step": step,
            "seconds": spent,
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

    stopped = "patience" if bad >= r.patience else ""
    bar = tqdm(total=r.max_steps, initial=step, desc=f"{spec.name} {collection}", unit="step",
               disable=not (progress and rt.main), leave=False)  # fmt: skip
    losses, configs_seen, t0, clock = [], 0, time.perf_counter(), time.perf_counter()
    while step < r.max_steps and not stopped:
        model.train()
        rnd, pos = divmod(step, every)
        order = np.random.default_rng([cfg.seed, rnd]).permutation(len(train))  # same on every rank
        torch.manual_seed(cfg.seed * 1_000_003 + step * 1009 + rt.rank)  # dropout; resumable
        rng = np.random.default_rng([cfg.seed, step, rt.rank])
        graphs = [train[i] for i in _step_graphs(order, pos, rt, r.graphs_per_batch)]
        rows = [sample_rows(g, r.configs_per_graph, rng) for g in graphs]
        if segmented is not None:  # Graph Segment Training (gst.py)
            args_ = (unwrap(model), opt, segmented, graphs, rows, r, rt.device, precision, scaler, rng)
            losses.append(gst.train_step(*args_))
        else:
            batches = micro_batches(graphs, rows, r.max_batch_nodes)
            losses.append(train_step(model, opt, batches, r, rt.device, precision, scaler))
        sched.step()
        if rt.device.type == "cpu":
            release_free_memory()  # the heap's holes would keep growing (tpurank.memory)
        step += 1
        configs_seen += sum(len(x) for x in rows)
        bar.update()
        bar.set_postfix(loss=f"{np.mean(losses[-20:]):.4f}", val=f"{best:.4f}" if best > -math.inf else "-")
        late = _out_of_time(r, spent + time.perf_counter() - clock, rt)
        if step % every and step < r.max_steps and not late:
            continue
        seconds = time.perf_counter() - t0
        score = evaluate(unwrap(model), valid, r, rt.device, precision) if rt.main else 0.0
        if rt.device.type == "cpu":
            release_free_memory()  # else the next step's tensors stack on validation's freed heap
        if math.isnan(score):  # no rankable valid graph: fall back to the training loss
            score = -float(np.mean(losses))
        if rt.world > 1:
            box = [score]
            dist.broadcast_object_list(box, src=0)
            score = box[0]
        improved = score > best
        best, bad = (score, 0) if improved else (best, bad + 1)
        spent += time.perf_counter() - clock
        clock = time.perf_counter()
        history.append({
            "step": step,
            "train_loss": float(np.mean(losses)),
            "valid_score": score,
            "seconds": round(seconds, 3),
            "configs_per_s": round(configs_seen * rt.world / max(seconds, 1e-9), 1),
        })  # fmt: skip
        stopped = "patience" if bad >= r.patience else "time budget" if late else ""
        if rt.main:
            if improved:
                save_checkpoint(final, state_of(complete=False))
            save_checkpoint(resume, state_of(complete=False, resumable=True))
            if progress:
                tqdm.write(
                    f"[{spec.name}] {collection} step {step}/{r.max_steps}: loss {history[-1]['train_loss']:.4f} "
                    f"valid {score:.4f} (best {best:.4f}) {history[-1]['configs_per_s']:.0f} configs/s"
                )
        losses, configs_seen, t0 = [], 0, time.perf_counter()
    bar.close()
    if segmented is not None and r.finetune_steps > 0 and final.exists():  # GST: fine-tune the head
        unwrap(model).load_state_dict(load_checkpoint(final)["state_dict"])
        t0 = time.perf_counter()
        tune = gst.finetune_head(
            unwrap(model), segmented, train, r, rt.device, precision, cfg.seed, sample_rows
        )
        score = evaluate(unwrap(model), valid, r, rt.device, precision) if rt.main else 0.0
        tuned = {"finetune_loss": float(np.mean(tune)), "seconds": round(time.perf_counter() - t0, 3)}
        history.append({"step": step, "valid_score": score, **tuned})
        if rt.main and score > best:
            best = score
            save_checkpoint(final, state_of(complete=False))

    summary = {
        "best_valid_score": best,
        "steps_run": step,
        "evals_run": len(history),
        "seconds": round(spent, 3),
        "stopped_by": stopped or "max_steps",
        "history": history,
    }
    if segmented is not None:
        summary["history_table"] = segmented.table.stats()
    if rt.main:
        ckpt = load_checkpoint(final) if final.exists() else state_of(complete=False)
        ckpt.update(complete=True, summary=summary)
        save_checkpoint(final, ckpt)
        write_sidecar(
            out / SIDECAR, cfg, paths.data, model=spec.name, collection=collection,
            device=str(rt.device), precision=precision, **summary,
        )  # fmt: skip
        resume.unlink(missing_ok=True)
    if rt.world > 1:
        dist.barrier()
    return unwrap(model), summary
