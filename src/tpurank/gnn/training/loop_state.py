"""One training as the loop sees it: what `fit` builds once (`Training`: model, optimizer, schedule,
device, files) and where the training stands (`LoopState`), new or resumed from `last.pt`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from tpurank.core.collections import kind_of
from tpurank.core.config import Config, to_dict
from tpurank.core.declared import starting_points
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.staleness import current
from tpurank.gnn import device as devices
from tpurank.gnn.data import GraphData
from tpurank.gnn.device import Runtime, unwrap
from tpurank.gnn.gst.state import GstState
from tpurank.gnn.nets.gnn_ranker import GnnRanker
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.recipe import ModelSpec, Recipe, check_recipe
from tpurank.gnn.training import run_log
from tpurank.gnn.training.checkpoints import (
    CHECKPOINT,
    CHECKPOINT_FORMAT,
    RESUME,
    load_init_weights,
    load_resume_state,
    training_key,
)
from tpurank.gnn.training.lr_schedule import make_scheduler
from tpurank.gnn.training.pacing import step_share
from tpurank.gnn.training.step import make_optimizer


@dataclass
class LoopState:
    """Where a training stands: what a resume restores, and what the summary reports.

    Args:
        step: optimizer steps taken.
        seconds: training seconds spent (validation included), carried over on resume.
        best: the best validation score so far (its weights are in `model.pt`).
        bad: validations since the last gain (early stopping counts these).
        history: one record per validation.
        curve: the rows of `metrics.csv` (training loss every `loss_interval` steps, and each validation).
        stopped: why the loop ended ("patience", "time budget"; "" while running).
    """

    step: int = 0
    seconds: float = 0.0
    best: float = -math.inf
    bad: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)
    curve: list[dict[str, Any]] = field(default_factory=list)
    stopped: str = ""


@dataclass
class Training:
    """What one `fit` builds once and every phase reads: the model, its optimizer and schedule,
    where it runs and where its files go."""

    spec: ModelSpec
    cfg: Config
    collection: str
    recipe: Recipe
    model_args: dict[str, Any]
    model: nn.Module
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler | None
    segmented: GstState | None
    rt: Runtime
    precision: str
    scaler: torch.amp.GradScaler | None
    key: str  # training_key: a checkpoint is up to date, or resumable, while it is the same
    out: Path
    progress: bool
    spent: float = 0.0  # training seconds spent, as of the last step (the same on every rank)
    closing: float = 0.0  # the last validation's seconds (every rank's slowest): reserved for the closing one
    closing_guess: float = 0.0  # its estimate until a validation ran (pacing.closing_estimate)
    board: Any = None  # a TensorBoard writer when $TPURANK_TENSORBOARD is set (run_log.py)
    logged: int = -1  # the tenth of the budget of the last progress line (run_log.log_mark)

    @property
    def reserved(self) -> float:
        """Seconds kept for the validation that closes the training: the last one's, else the estimate."""
        return self.closing or self.closing_guess

    @property
    def final(self) -> Path:
        return self.out / CHECKPOINT

    @property
    def resume_file(self) -> Path:
        return self.out / RESUME

    def say(self, text: str) -> None:
        """A progress line, from process 0 only."""
        if self.rt.main and self.progress:
            tqdm.write(text)

    def checkpoint(self, st: LoopState, complete: bool, resumable: bool = False) -> dict[str, Any]:
        """The checkpoint of the model as it stands: weights, config, constructor arguments, loop
        state, and the torch threads it trained on (its predictions and fine-tunings take as many:
        tpurank.core.workers.model_threads)."""
        state = {
            "format": CHECKPOINT_FORMAT,
            "model": self.spec.name,
            "model_args": self.model_args,
            "config": to_dict(self.cfg),
            "recipe": asdict(self.recipe),
            "collection": self.collection,
            "state_dict": unwrap(self.model).state_dict(),
            "step": st.step,
            "seconds": st.seconds,
            "best": st.best,
            "bad": st.bad,
            "history": st.history,
            "curve": st.curve,
            "complete": complete,
            "key": self.key,
            "device": str(self.rt.device),
            "precision": self.precision,
            "threads": torch.get_num_threads(),
        }
        if resumable:
            state.update(optimizer=self.opt.state_dict(), scheduler=self.sched.state_dict())
        return state


def build(
    spec: ModelSpec,
    paths: Paths,
    cfg: Config,
    collection: str,
    train: list[GraphData],
    rt: Runtime,
    progress: bool,
) -> Training:
    """A new model (seeded), its optimizer, schedule and precision; checks what cannot train."""
    kind = kind_of(collection)
    r = spec.recipe(cfg, kind)
    check_trainable(r, collection, kind, train)
    model = new_model(spec, cfg, collection, train, rt.device)
    opt = make_optimizer(model, r)
    segmented = segment_state(r, kind, model, collection)
    precision = devices.pick_precision(rt.device, r.bf16)
    training = Training(
        spec=spec,
        cfg=cfg,
        collection=collection,
        recipe=r,
        model_args=model.saved_args(),
        model=model,
        opt=opt,
        sched=None,
        segmented=segmented,
        rt=rt,
        precision=precision,
        scaler=devices.grad_scaler(precision),
        key=training_key(spec, paths, cfg, collection),
        out=paths.model_dir(spec.name, collection),
        progress=progress,
    )
    # over the planned steps alone: the clock never changes the rate (a time budget only caps the steps)
    training.sched = make_scheduler(opt, r)
    if rt.main:
        member = training.out.name if training.out.name.startswith("seed-") else "seed-0"
        training.board = run_log.tensorboard(spec.name, collection, member)
    if rt.main and progress:
        print(f"[{spec.name}] {collection}: {devices.describe(rt.device, precision)}")
    return training


def check_trainable(r: Recipe, collection: str, kind: str, train: list[GraphData]) -> None:
    """One-line errors, before any model is built, for a recipe or train graphs that cannot train.

    Args:
        r: the recipe of the collection.
        collection: the collection trained.
        kind: its kind.
        train: its train graphs.
    """
    check_recipe(r)
    if not train:
        raise TpurankError(f"{collection}: no train graph has two configs with different runtimes")
    if train[0].kind != kind:
        raise TpurankError(f"{collection}: prepared graphs are {train[0].kind}, expected {kind}")


def new_model(
    spec: ModelSpec, cfg: Config, collection: str, train: list[GraphData], device: torch.device
) -> RankerNet:
    """The network training starts from, on `device`: built from `cfg` after seeding torch, fitted
    to the train graphs (`ModelSpec.fit_train`), and given any starting weights (`init_from`).

    Args:
        spec: the model family.
        cfg: the collection's config.
        collection: the collection trained.
        train: its train graphs (their node features set the network's input width).
        device: where it trains.
    """
    torch.manual_seed(cfg.seed)
    model = spec.new_network(cfg, kind_of(collection), int(train[0].node_feat.shape[1]))
    spec.fit_train(model, train)  # statistics of the train graphs only (saved in the state dict)
    for start in starting_points(cfg, spec.section, [collection]):
        load_init_weights(model, start, spec, model.saved_args())
    return model.to(device)


def segment_state(r: Recipe, kind: str, model: RankerNet, collection: str) -> GstState | None:
    """Graph Segment Training's state when the recipe segments the graphs (layout only), else None.

    Raises:
        TpurankError: GST asked of a network whose layers attend across configs.
    """
    if not (r.segment_nodes and kind == "layout"):
        return None
    if isinstance(model, GnnRanker) and model.layer_attention is not None:
        raise TpurankError(
            "config: gnn.segment_nodes (GST) cannot be combined with gnn.layer_attention: a segment's "
            "embedding would depend on the other configs of the step, not only its own (on by default for the "
            f'default collections: --set collections."{collection}".gnn.layer_attention=false)'
        )
    return GstState(r, model.hidden)


def resume(training: Training) -> LoopState:
    """The loop state of `last.pt` when it was written with the same key (config and data) and
    model (its weights, optimizer and schedule loaded), else a fresh one."""
    state = load_resume_state(training.resume_file)  # None: absent, or unreadable (a one-line warning)
    if state is None:
        return LoopState()
    if not current(
        state.get("key"),
        training.key,
        whole=state.get("model_args") == training.model_args and "step" in state,
    ):
        return LoopState()
    training.model.load_state_dict(state["state_dict"])
    training.opt.load_state_dict(state["optimizer"])
    training.sched.load_state_dict(state["scheduler"])
    st = LoopState(
        step=state["step"],
        seconds=state["seconds"],
        best=state["best"],
        bad=state["bad"],
        history=state["history"],
        curve=state.get("curve", state["history"]),
    )
    st.stopped = "patience" if patience_ends(training.recipe, st) else ""
    if training.rt.main and training.progress:
        print(
            f"[{training.spec.name}] {training.collection}: resuming after step {st.step} from {training.resume_file}"
        )
    return st


def patience_ends(r: Recipe, st: LoopState) -> bool:
    """`patience` validations without a gain, once at least `min_train_share` of the planned steps
    ran and while some are left: a training that ran them all stopped for its steps, not patience.
    Counted in steps, never seconds, so where patience stops does not depend on the clock."""
    return st.bad >= r.patience and r.min_train_share <= step_share(r, st.step) < 1
