"""The GNN calibrated on the measured configs of the program it ranks: a bounded fine-tuning.

A copy of the first trained seed member (`FineTune.members`: more of them) is loaded from its
`model.pt` (the file is only read) and takes a few optimizer steps on the program's own graph, with
the program's measured configs as the one ranking query: the member's training loss and step
(`tpurank.gnn.training.step.train_step`, the recipe's loss, optimizer and gradient clipping), a cosine
learning rate over the steps alone, never the clock (`tpurank.gnn.training.lr_schedule`), on one
torch thread (calibration runs its fits side by side, one thread each: tpurank.rank.fits), never a
count that follows the load, so a fine-tuning is the same on a busy machine; the time limit only
stops the steps early. The fine-tuned members then score every config of the graph as `predict`
scores it, and their costs are averaged as the seed members' are (`tpurank.gnn.seeds.average_costs`).

A model trained with Graph Segment Training (`gnn.segment_nodes`, off by default) takes its
fine-tuning steps on the whole graph, not on segments: measured on no real program.

docs/rank.md gives the measurements on real programs that chose the settings and the default.
"""

from __future__ import annotations

import dataclasses
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
from torch.nn.modules.dropout import _DropoutNd

from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.workers import model_threads, torch_threads
from tpurank.gnn import device as devices
from tpurank.gnn.data import GraphData, load_split
from tpurank.gnn.nets import tile_inputs
from tpurank.gnn.recipe import ModelSpec, Recipe
from tpurank.gnn.scoring import score_rows
from tpurank.gnn.seeds import average_costs
from tpurank.gnn.training.checkpoints import load_model
from tpurank.gnn.training.lr_schedule import make_scheduler
from tpurank.gnn.training.step import make_optimizer, micro_batches, train_step

MIN_MEASURED = 2  # configs of different runtimes: fewer hold no order to learn


@dataclass(frozen=True)
class FineTune:
    """How a GNN learns from a program's measured configs (each seed member the same way).

    Args:
        steps: optimizer steps per seed member (>= 1).
        seconds: the time limit of all members' steps together (> 0): a calibration on a slow
            machine or a big graph stops there, before its learning rate has decayed. Scoring the
            graph afterwards is not counted. Deterministic for a seed as long as the steps end first
            (the learning rate follows the steps alone).
        lr: the peak learning rate (> 0), decayed by a cosine to 0 at the end.
        members: the seed members fine-tuned, the first this many (None: all); the calibrated GNN
            ranks by their average. Each member costs its steps and a scoring of every config.
    """

    steps: int = 50  # real layout programs: of 5, 20 and 50, 50 gained most at k = 20 and 50 (docs/rank.md)
    seconds: float = 60.0  # what an autotuner can wait a round; bounds a slow machine or a huge graph
    lr: float = 5e-4  # a quarter of the cpu profile's training peak: at 20 steps it ranked above the peak
    members: int | None = 1  # the member the held-out folds check (docs/rank.md: no lower than all)

    def __post_init__(self) -> None:
        if not (isinstance(self.steps, int) and self.steps >= 1):
            raise TpurankError(f"GNN fine-tuning steps must be an integer >= 1, got {self.steps!r}")
        if not (self.seconds > 0 and math.isfinite(self.seconds)):
            raise TpurankError(f"GNN fine-tuning seconds must be a positive number, got {self.seconds}")
        if not (self.lr > 0 and math.isfinite(self.lr)):
            raise TpurankError(f"GNN fine-tuning lr must be a positive number, got {self.lr}")
        if self.members is not None and not (isinstance(self.members, int) and self.members >= 1):
            raise TpurankError(f"GNN fine-tuning members must be an integer >= 1, got {self.members!r}")


@dataclass
class GnnInputs:
    """What fine-tuning one program's GNN needs; the graph is read from the work tree when first used.

    Args:
        spec: the model family.
        files: each seed member's `model.pt` (only read).
        normalize: how the members' costs are normalised before averaging (None: one member, its
            costs as they are, as `predict` gives them).
        paths: the work tree whose prepared cache holds the program's graph.
        collection: its collection.
        graph_id: its ID in the cache (`collection:name`).
        chunk: configs per scoring pass (the config's `predict_chunk`).
    """

    spec: ModelSpec
    files: list[Path]
    normalize: str | None
    paths: Paths
    collection: str
    graph_id: str
    chunk: int
    _graph: GraphData | None = None
    _side_by_side: bool | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def side_by_side(self) -> bool:
        """Whether its fine-tunings may run side by side in threads (tpurank.rank.fits): on the CPU,
        with no step drawing from torch's one global generator (dropout of p > 0), whose draws would
        interleave. Read from the first member."""
        if self._side_by_side is None:
            with torch.random.fork_rng(devices=[]):  # building the model draws from the generator
                model = load_model(self.spec, self.files[0], self.collection).model
            drops = any(_drops(m) for m in model.modules())
            self._side_by_side = devices.pick_device(0).type == "cpu" and not drops
        return self._side_by_side

    def graph(self, dim_features: bool) -> GraphData:
        """The program's prepared graph, as the members read it (read once, whichever fit asks first)."""
        with self._lock:
            return self._read_graph(dim_features)

    def _read_graph(self, dim_features: bool) -> GraphData:
        if self._graph is None:
            if not self.paths.prepared.is_dir():
                raise TpurankError(
                    f"{self.paths.prepared}: gone (the Ranker or Tuner was closed): calibrate before"
                )
            found = [
                g
                for g in load_split(self.paths, self.collection, "test", False, dim_features=dim_features)
                if g.id == self.graph_id
            ]
            if not found:
                raise TpurankError(f"{self.paths.prepared}: no prepared graph {self.graph_id}")
            self._graph = found[0]
        return self._graph

    def calibrated(
        self,
        positions: np.ndarray,
        runtime: np.ndarray,
        how: FineTune,
        seed: int,
        scored: np.ndarray | None = None,
        members: int | None = None,
        threads: int | None = None,
    ) -> np.ndarray | None:
        """Each config's cost (the graph's order) from the members fine-tuned on the measured configs
        (None: fewer than two of them of different runtimes, no order to learn).

        Args:
            positions: the measured configs (positions in the graph's config order).
            runtime: their runtimes (tile: divided by their normalizers), > 0.
            how: steps, time limit and learning rate.
            seed: seeds the configs each step samples (member k: `seed + k`).
            scored: the positions whose costs are returned (None: every config).
            members: fine-tune only the first this many seed members (None: as `how` says).
            threads: at most this many torch threads (None: the cores this process may use); each
                member takes those it trained on (`model_threads`), the caller's count restored after.
        """
        if len(np.unique(runtime)) < MIN_MEASURED:  # nothing to learn: no model or graph read
            return None
        costs, start = [], time.perf_counter()
        files = self.files[: min(n for n in (members, how.members, len(self.files)) if n is not None)]
        for k, file in enumerate(files):
            left = how.seconds - (time.perf_counter() - start)
            share = max(left, 0.0) / (len(files) - k)  # what the earlier members left, shared
            member = self._member(file, positions, runtime, how, seed + k, share, scored, threads)
            if member is None:
                return None
            costs.append(member)
        if self.normalize is None or len(costs) == 1:
            return costs[0].astype(np.float32)
        return average_costs(costs, self.normalize).astype(np.float32)

    def _member(
        self,
        file: Path,
        positions: np.ndarray,
        runtime: np.ndarray,
        how: FineTune,
        seed: int,
        seconds: float,
        scored: np.ndarray | None,
        threads: int | None,
    ) -> np.ndarray | None:
        """One member fine-tuned on a copy of its weights, then every config of the graph scored, on
        its training's torch threads (at most `threads`); the caller's torch generator is left as
        it was (building the model draws from it)."""
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model, ckpt = load_model(self.spec, file, self.collection)
            trained = Recipe.from_saved(ckpt["recipe"])
            g = self.graph(trained.dim_features)
            target = measured_target(g, positions, runtime)
            if target is None:
                return None
            device = devices.pick_device(0)
            precision = devices.prediction_precision(device, ckpt.get("precision") or "fp32")
            model.to(device)
            count = model_threads(ckpt.get("threads"), threads)
            with torch_threads(count):
                fit(model, target, trained, how, seconds, seed, device, precision)
        model.eval()
        rows, back = np.unique(g.inverse if scored is None else g.inverse[scored], return_inverse=True)
        with torch_threads(count):
            cost = score_rows(
                model, g, rows, self.chunk, device, precision=precision, segment_nodes=trained.segment_nodes
            )
        return cost[back]


def _drops(module: torch.nn.Module) -> bool:
    """Whether the module draws random numbers in training: a dropout of p > 0, or an attention's."""
    if isinstance(module, _DropoutNd):
        return module.p > 0
    return isinstance(module, torch.nn.MultiheadAttention) and module.dropout > 0


def measured_target(g: GraphData, positions: np.ndarray, runtime: np.ndarray) -> GraphData | None:
    """The graph with the measured configs as its only training target: each measured unique config
    at its mean measured runtime (duplicates count once, as training counts them), 0 elsewhere (never
    sampled). None: fewer than two measured unique configs of different runtimes."""
    rows = g.inverse[np.asarray(positions, dtype=np.int64)]
    unique, codes = np.unique(rows, return_inverse=True)
    mean = np.bincount(codes, weights=np.asarray(runtime, np.float64)) / np.bincount(codes)
    if len(unique) < MIN_MEASURED or np.ptp(mean) <= 0:
        return None
    target = np.zeros(g.num_unique, dtype=np.float64)
    target[unique] = mean
    return dataclasses.replace(g, runtime=target, is_test=False, eval_rows=unique)


def fit(
    model: torch.nn.Module,
    g: GraphData,
    trained: Recipe,
    how: FineTune,
    seconds: float,
    seed: int,
    device: torch.device,
    precision: str,
) -> int:
    """Fine-tune `model` in place on the measured configs of `g` (`measured_target`: `eval_rows`);
    returns the steps taken.

    Each step is one training step of the trained recipe (its loss, margin, clipping, node budget)
    on at most `configs_per_graph` measured configs (all of them when they fit, else a seeded draw).
    """
    r = dataclasses.replace(
        trained,
        lr=how.lr,
        max_steps=how.steps,
        warmup_steps=0,
        schedule="cosine",
    )
    opt = make_optimizer(model, r)
    start = time.perf_counter()
    sched = make_scheduler(opt, r)  # the steps alone: the same fine-tuning however busy the machine
    rng = np.random.default_rng(seed)
    measured, per_step = g.eval_rows, trained.configs_per_graph
    tile = tile_inputs.wanted(model)
    model.train()
    steps = 0
    while steps < how.steps and time.perf_counter() - start < seconds:
        rows = measured if len(measured) <= per_step else rng.choice(measured, per_step, replace=False)
        batches = micro_batches([g], [rows], r.max_batch_nodes, tile)
        train_step(model, opt, batches, r, device, precision=precision)
        sched.step()
        steps += 1
    return steps
