"""The training loop shared by the GNN rankers, read top to bottom: `fit` = `build` (model,
optimizer, schedule; loop_state.py) -> `resume` (from `last.pt`; loop_state.py) -> `loop` (`step_once`;
`loss_row`, a training-loss row of `metrics.csv`, every `loss_interval` steps; `score_and_record`:
`score_valid` and `record`, every `eval_interval` steps) -> `finetune` (GST only) -> `finish`
(`model.pt` complete, `model.json`).

Sampling, losses, AdamW/Adam, the cosine schedule, early stopping on the validation metric,
resumable checkpoints, CUDA + mixed precision (`gnn/device.py`) and DDP: under `torchrun
--nproc_per_node=N` every process trains on its own graphs of each step and
DistributedDataParallel averages the gradients (gloo on CPU, nccl on GPU); process 0 validates,
decides early stopping for all, and writes the files.
"""

from __future__ import annotations

import math
import sys
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch
import torch.distributed as dist
from torch import nn

from tpurank.core.config import Config
from tpurank.core.memory import fit_mmap_threshold, release_free_memory, release_if_grown
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.provenance import write_sidecar
from tpurank.gnn.data import GraphData, batch_rows
from tpurank.gnn.device import Runtime, unwrap
from tpurank.gnn.nets import tile_inputs
from tpurank.gnn.recipe import ModelSpec
from tpurank.gnn.scoring import evaluate
from tpurank.gnn.training import run_log
from tpurank.gnn.training.checkpoints import load_checkpoint, save_checkpoint
from tpurank.gnn.training.loop_state import LoopState, Training, build, patience_ends, resume
from tpurank.gnn.training.pacing import (
    budget_share,
    closing_estimate,
    eval_interval,
    out_of_time,
    step_graphs,
    synced_seconds,
    validation_work,
)
from tpurank.gnn.training.segment_step import SegmentStep, finetune_head
from tpurank.gnn.training.step import micro_batches, train_step

SIDECAR = "model.json"


class Fitted(NamedTuple):
    """What `fit` returns: the trained model (last weights, unwrapped from DDP) and the summary."""

    model: nn.Module
    summary: dict[str, Any]


class StepDone(NamedTuple):
    """One optimizer step: its loss, the configs it saw and those configs times their graphs' nodes."""

    loss: float
    configs: int
    node_configs: int


@dataclass
class Since:
    """The steps since the last validation: their losses, those since the last training-loss row
    (`window`), the configs they saw, and when the first began (`start`, on the loop's clock)."""

    start: float
    losses: list[float] = field(default_factory=list)
    window: list[float] = field(default_factory=list)
    configs: int = 0

    def add(self, done: StepDone) -> None:
        self.losses.append(done.loss)
        self.window.append(done.loss)
        self.configs += done.configs


def fit(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    train: list[GraphData],
    valid: list[GraphData],
    rt: Runtime,
    progress: bool = True,
) -> Fitted:
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
    train = [g for g in train if g.rankable]
    training = build(spec, paths, cfg, collection=collection, train=train, rt=rt, progress=progress)
    before = run_log.previous_plan(training.out / SIDECAR)  # the finished model's, if this retrains one
    st = resume(training)
    if rt.world > 1:
        ids = [rt.device.index] if rt.device.type == "cuda" else None
        training.model = nn.parallel.DistributedDataParallel(training.model, device_ids=ids)
    loop(training, st, train, valid)
    if training.segmented is not None and training.recipe.finetune_steps > 0 and training.final.exists():
        finetune(training, st, train, valid)
    summary = finish(training, st, paths, before)
    return Fitted(unwrap(training.model), summary)


def step_once(training: Training, st: LoopState, train: list[GraphData], every: int) -> StepDone:
    """One optimizer step on this step's graphs (seeded by the step: a resume repeats it exactly)."""
    r, rt = training.recipe, training.rt
    training.model.train()
    rnd, pos = divmod(st.step, every)
    order = np.random.default_rng([training.cfg.seed, rnd]).permutation(len(train))  # same on every rank
    torch.manual_seed(training.cfg.seed * 1_000_003 + st.step * 1009 + rt.rank)  # dropout; resumable
    rng = np.random.default_rng([training.cfg.seed, st.step, rt.rank])
    graphs = [train[i] for i in step_graphs(order, pos, rt, r.graphs_per_batch)]
    rows = [batch_rows(g, r.configs_per_graph, rng) for g in graphs]
    if training.segmented is not None:  # Graph Segment Training (segment_step.py)
        inputs = SegmentStep(training.segmented, graphs, rows, rng)
    else:
        inputs = micro_batches(graphs, rows, r.max_batch_nodes, tile_inputs.wanted(unwrap(training.model)))
    hidden = int(getattr(unwrap(training.model), "hidden", 0))
    node_configs = sum(len(x) * len(g.opcode) for g, x in zip(graphs, rows, strict=True))
    if rt.device.type == "cpu":  # the step's tensors reuse the last step's heap (tpurank.core.memory)
        fit_mmap_threshold(node_configs * hidden * 4)
    loss = train_step(
        training.model,
        training.opt,
        inputs,
        r,
        rt.device,
        precision=training.precision,
        scaler=training.scaler,
    )
    training.sched.step()
    if rt.device.type == "cpu":
        release_if_grown()  # the heap's holes would keep growing (tpurank.core.memory)
    st.step += 1
    return StepDone(loss, sum(len(x) for x in rows), node_configs)


def score_valid(training: Training, valid: list[GraphData], losses: list[float]) -> float:
    """The validation score (process 0 scores, the others receive it); the training loss, negated,
    where no valid graph is rankable."""
    r, rt = training.recipe, training.rt
    score = (
        evaluate(unwrap(training.model), valid, r, device=rt.device, precision=training.precision)
        if rt.main
        else 0.0
    )
    if rt.device.type == "cpu":
        release_free_memory()  # else the next step's tensors stack on validation's freed heap
    if math.isnan(score):
        score = -float(np.mean(losses))
    if rt.world > 1:
        box = [score]
        dist.broadcast_object_list(box, src=0)
        score = box[0]
    return score


def record(
    training: Training,
    st: LoopState,
    score: float,
    losses: list[float],
    seconds: float,
    configs: int,
    late: bool,
) -> None:
    """Keep a validation (history, `metrics.csv`), the best weights (`model.pt`) and the resumable
    state (`last.pt`), and decide whether to stop (patience, time budget). A progress line only at
    each tenth of the budget and at the end: the progress bar shows every step, so a training prints
    at most a dozen lines however often it validates."""
    r, rt = training.recipe, training.rt
    improved = score > st.best
    st.best, st.bad = (score, 0) if improved else (st.best, st.bad + 1)
    st.history.append(
        {
            "step": st.step,
            "train_loss": float(np.mean(losses)),
            "valid_score": score,
            "seconds": round(seconds, 3),
            "elapsed": round(st.seconds, 3),
            "lr": training.opt.param_groups[0]["lr"],
            "configs_per_s": round(configs * rt.world / max(seconds, 1e-9), 1),
        }
    )
    st.stopped = "time budget" if late else "patience" if patience_ends(r, st) else ""
    if rt.main:
        if improved:
            save_checkpoint(training.final, training.checkpoint(st, complete=False))
        save_checkpoint(training.resume_file, training.checkpoint(st, complete=False, resumable=True))
        run_log.write_metrics(training.out / run_log.METRICS, st.curve)
        run_log.log_scalars(training.board, st.curve[-1])
    mark = run_log.log_mark(budget_share(r, st.step, training.spent))
    if mark > training.logged or st.stopped or st.step >= r.max_steps:  # a tenth of the budget, or the end
        training.logged = mark
        training.say(
            run_log.progress_line(f"{training.spec.name} {training.collection}", r.max_steps, st.history)
        )


def loop(training: Training, st: LoopState, train: list[GraphData], valid: list[GraphData]) -> None:
    """Train until max_steps, the time budget or patience; validate every `eval_interval` steps."""
    r, rt = training.recipe, training.rt
    every, loss_every = eval_interval(train, r, rt.world), run_log.loss_interval(r.max_steps)
    bar = _progress_bar(training, st)
    since, clock = Since(start=time.perf_counter()), time.perf_counter()
    training.spent = st.seconds  # a resume: the seconds spent before carry over (the time cap)
    work, trained, trained_s = validation_work(valid, r), 0, 0.0
    # the process's first step pays one-time costs (the first touch of the data, the allocator's
    # growth: 16 s against 0.05 s for the next on full-scale tile): the training rate that sizes the
    # closing validation is measured from the steps after it, or a short share ends after one step
    warm_up = True
    while st.step < r.max_steps and not st.stopped:
        started = time.perf_counter()
        done = step_once(training, st, train, every)
        if not warm_up:
            trained, trained_s = trained + done.node_configs, trained_s + time.perf_counter() - started
        warm_up = False
        if not training.closing:  # the same on every rank, as `late` must be
            training.closing_guess = synced_seconds(closing_estimate(work, trained, trained_s), rt)
        since.add(done)
        bar.update()
        best = f"{st.best:.4f}" if st.best > -math.inf else "-"
        bar.set_postfix(loss=f"{np.mean(since.losses[-20:]):.4f}", val=best)
        training.spent = synced_seconds(st.seconds + time.perf_counter() - clock, rt)
        # a time budget ends the steps a validation's length before it runs out, so the validation that
        # closes the training (and keeps the best model) fits in it, not after it
        late = out_of_time(r, training.spent + training.reserved)
        if st.step % every and st.step < r.max_steps and not late:
            if st.step % loss_every == 0:
                loss_row(training, st, since)
            continue
        clock = score_and_record(training, st, valid, since, clock, late)
        since = Since(start=time.perf_counter())
    bar.close()


def _progress_bar(training: Training, st: LoopState) -> tqdm:
    """The bar of the training's optimizer steps (from the resumed step; process 0 only)."""
    return tqdm(
        total=training.recipe.max_steps,
        initial=st.step,
        desc=f"{training.spec.name} {training.collection}",
        unit="step",
        disable=not (training.progress and training.rt.main),
        leave=False,
    )


def loss_row(training: Training, st: LoopState, since: Since) -> None:
    """A training-loss row of `metrics.csv` (and TensorBoard) over the steps since the last row."""
    lr = training.opt.param_groups[0]["lr"]
    st.curve.append(run_log.curve_row(st.step, training.spent, lr, since.window))
    run_log.log_scalars(training.board, st.curve[-1])  # None on ranks > 0
    since.window = []


def score_and_record(
    training: Training, st: LoopState, valid: list[GraphData], since: Since, clock: float, late: bool
) -> float:
    """`score_valid`, then `record` the validation with the steps since the last one; returns the
    clock the next steps' seconds count from (the validation's own seconds are in `st.seconds`).

    Args:
        training, st: the training and its state.
        valid: the validation graphs.
        since: the steps since the last validation.
        clock: when the seconds not yet in `st.seconds` began.
        late: the time budget ends the training here.
    """
    r, rt = training.recipe, training.rt
    seconds, scoring = time.perf_counter() - since.start, time.perf_counter()
    score = score_valid(training, valid, since.losses)
    training.closing = synced_seconds(time.perf_counter() - scoring, rt)  # every rank stops at one step
    st.seconds += time.perf_counter() - clock
    clock = time.perf_counter()
    # a validation that ends within the closing one's length of the budget closes the training itself:
    # one more step would end it a step and a validation past its budget
    late = late or out_of_time(r, synced_seconds(st.seconds, rt) + training.reserved)
    lr = training.opt.param_groups[0]["lr"]
    st.curve.append(run_log.curve_row(st.step, st.seconds, lr, since.window, score))
    record(training, st, score=score, losses=since.losses, seconds=seconds, configs=since.configs, late=late)
    return clock


def finetune(training: Training, st: LoopState, train: list[GraphData], valid: list[GraphData]) -> None:
    """GST: fine-tune the prediction head of the best weights on fresh segment embeddings."""
    r, rt, model = training.recipe, training.rt, unwrap(training.model)
    model.load_state_dict(load_checkpoint(training.final)["state_dict"])
    t0 = time.perf_counter()
    tune = finetune_head(
        model,
        training.segmented,
        train,
        r=r,
        device=rt.device,
        precision=training.precision,
        seed=training.cfg.seed,
    )
    score = evaluate(model, valid, r, device=rt.device, precision=training.precision) if rt.main else 0.0
    tuned = {"finetune_loss": float(np.mean(tune)), "seconds": round(time.perf_counter() - t0, 3)}
    st.history.append({"step": st.step, "valid_score": score, **tuned})
    if rt.main and score > st.best:
        st.best = score
        save_checkpoint(training.final, training.checkpoint(st, complete=False))


def finish(
    training: Training, st: LoopState, paths: Paths, before: dict[str, Any] | None = None
) -> dict[str, Any]:
    """Mark `model.pt` complete with the summary and its plan, write `model.json`, drop `last.pt`;
    the one line says how the plan differs from `before`, the replaced model's."""
    r = training.recipe
    summary = {
        "best_valid_score": st.best,
        "steps_run": st.step,
        "evals_run": len(st.history),
        "seconds": round(st.seconds, 3),
        "stopped_by": st.stopped or "max_steps",
        "plan": run_log.plan_of(r.max_steps, r.warmup_steps, r.schedule, r.time_budget_min),
        "history": st.history,
    }
    if training.segmented is not None:
        summary["history_table"] = training.segmented.table.stats()
    rt = training.rt
    if rt.main:
        ckpt = (
            load_checkpoint(training.final)
            if training.final.exists()
            else training.checkpoint(st, complete=False)
        )
        ckpt.update(complete=True, summary=summary)
        save_checkpoint(training.final, ckpt)
        write_sidecar(
            training.out / SIDECAR,
            training.cfg,
            paths.data,
            model=training.spec.name,
            collection=training.collection,
            device=str(rt.device),
            precision=training.precision,
            **summary,
        )
        training.resume_file.unlink(missing_ok=True)
        if training.board is not None:
            training.board.close()
        print(
            run_log.end_line(
                f"{training.spec.name} {training.collection}",
                st.step,
                st.seconds,
                st.stopped,
                st.history,
                plan=summary["plan"],
                before=before,
            ),
            file=sys.stderr,
        )
    if rt.world > 1:
        dist.barrier()
    return summary
