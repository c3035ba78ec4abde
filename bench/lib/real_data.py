"""The pieces of `bench_real.py` that are cheap and tested (tests/project/test_bench_real.py): the temporary
data roots of symlinks to the real sample files, the kernel-grouped folds of the tile benchmark,
and scoring a split's costs with the competition metric.

Every scored graph sits in the `test/` split of its data root, so no model sees it while training
or uses it to choose a checkpoint (LightGBM's early stopping and the GNNs' best-of-validations
read `valid/`). `valid/` holds links to the train graphs (prefix `fit_`): the trainers need a
validation split, and validating on a train graph selects on the fit to the training data only.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from tpurank.core.metrics import graph_metrics, mean_score, order_from_costs
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.dataset import discover
from tpurank.models.ensemble import combine, fit_weights
from tpurank.submission.score import load_runtimes, restrict

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
LAYOUT = "layout:xla:default"
TILE = "tile:xla"
LAYOUT_TRAIN = "layout/xla/default/train/unet3d.npz"
LAYOUT_SCORED = "layout/xla/default/valid/unet_3d.4x4.bf16.npz"
# the other real layout train file: 20 configs, all identical (ORIGIN.md), so no ranking to learn
LAYOUT_EXTRA = "layout/xla/random/train/openai_v0_rnn_optimized.npz"
TILE_PB = "pb/op_tuning_data.pb"
FIT_PREFIX = "fit_"  # valid/ links to train graphs carry it (a graph's stem is unique per collection)


def missing_sample(shared: Path = SHARED) -> str | None:
    """Why the benchmark cannot run here (None when every real file it needs is present)."""
    need = [NPZ_SUBDIR / LAYOUT_TRAIN, NPZ_SUBDIR / LAYOUT_SCORED, Path(TILE_PB), Path("eval_indices")]
    absent = [str(shared / p) for p in need if not (shared / p).exists()]
    return (
        f"real sample files not found: {', '.join(absent)} (../shared is absent on a fresh clone)"
        if absent
        else None
    )


def _link(target: Path, link: Path) -> None:
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    link.symlink_to(target.resolve())


def layout_root(folder: Path, shared: Path = SHARED, extra_train: bool = False) -> Path:
    """A data root of symlinks: the real unet3d graph in train/ (and its `fit_` twin in valid/), the
    real unet_3d.4x4.bf16 valid graph in test/ (scored; seen by no model).

    Args:
        folder: the root to (re)build.
        shared: the real sample folder.
        extra_train: also train on the xla:random train file (its configs are all identical).
    """
    npz = folder / NPZ_SUBDIR / "layout/xla/default"
    for split in ("train", "valid", "test"):
        for old in (npz / split).glob("*.npz"):
            old.unlink()
    train = [shared / NPZ_SUBDIR / LAYOUT_TRAIN] + (
        [shared / NPZ_SUBDIR / LAYOUT_EXTRA] if extra_train else []
    )
    for src in train:
        _link(src, npz / "train" / src.name)
        _link(src, npz / "valid" / f"{FIT_PREFIX}{src.name}")
    scored = shared / NPZ_SUBDIR / LAYOUT_SCORED
    _link(scored, npz / "test" / scored.name)
    return folder


def kernel_folds(n_kernels: int, folds: int, seed: int = 0) -> list[np.ndarray]:
    """Held-out kernel indices of each fold: every kernel held out exactly once (grouped k-fold,
    a kernel is one group; `folds == n_kernels` is leave-one-kernel-out).

    Args:
        n_kernels: how many kernels.
        folds: 2..n_kernels.
        seed: shuffles which kernels share a fold.

    The folds are scikit-learn's `KFold(folds, shuffle=True, random_state=seed)` test folds, drawn
    the same way, so results measured with it hold their folds.
    """
    if not 2 <= folds <= n_kernels:
        raise ValueError(f"folds must be in 2..{n_kernels}, got {folds}")
    order = np.arange(n_kernels)
    np.random.RandomState(seed).shuffle(order)
    sizes = np.full(folds, n_kernels // folds)
    sizes[: n_kernels % folds] += 1
    return [np.sort(f) for f in np.split(order, np.cumsum(sizes)[:-1])]


def tile_root(folder: Path, kernels: Sequence[Path], held_out: Sequence[int]) -> Path:
    """A data root of symlinks for one fold: the held-out kernels in test/ (scored), the others in
    train/ and, with the `fit_` prefix, in valid/."""
    npz = folder / NPZ_SUBDIR / "tile/xla"
    for split in ("train", "valid", "test"):
        for old in (npz / split).glob("*.npz"):
            old.unlink()
    out = set(int(i) for i in held_out)
    for i, k in enumerate(kernels):
        if i in out:
            _link(k, npz / "test" / k.name)
        else:
            _link(k, npz / "train" / k.name)
            _link(k, npz / "valid" / f"{FIT_PREFIX}{k.name}")
    return folder


def scored_graphs(root: Path, collection: str) -> dict[str, Path]:
    """Graph ID -> npz of the scored (test/) graphs of a data root."""
    return {f.id: f.path for f in discover(root / NPZ_SUBDIR, [collection], ["test"])}


def score_costs(
    costs: Mapping[str, np.ndarray],
    files: Mapping[str, Path],
    collection: str,
    subsets: Mapping[str, np.ndarray] | None = None,
) -> dict[str, float]:
    """Graph ID -> the competition score of its costs (lower cost = predicted faster): Kendall tau
    for layout (on the official subset when `subsets` lists the graph's stem), the tile score
    `2 - slowdown@5` for tile.

    Args:
        costs: graph ID -> cost per original config index.
        files: graph ID -> its npz (the measured runtimes).
        collection: decides the metric.
        subsets: graph stem -> official config indices (layout only).
    """
    out = {}
    for gid, path in files.items():
        runtime = load_runtimes(path, collection)
        order = order_from_costs(costs[gid])
        subset = (subsets or {}).get(path.stem)
        if subset is not None:
            order, runtime = restrict(order, runtime, subset, f"official subset of {path.stem}")
        out[gid] = graph_metrics(collection, order, runtime)["score"]
    return out


def truth_of(files: Mapping[str, Path], collection: str) -> dict[str, np.ndarray]:
    """Graph ID -> measured runtime per config (tile: divided by the normalizers), as scored."""
    return {g: load_runtimes(p, collection) for g, p in files.items()}


def mean_of(scores: Mapping[str, float]) -> float:
    return mean_score(scores.values())[0]


def equal_weight(member_costs: Sequence[Mapping[str, np.ndarray]], how: str) -> dict[str, np.ndarray]:
    """The ensemble with equal weights: the mean of the members' per-graph normalized costs (no
    weight is fitted, so nothing is learned from the scored graphs)."""
    ids = sorted(set.intersection(*(set(m) for m in member_costs)))
    w = np.full(len(member_costs), 1 / len(member_costs))
    return {g: combine([m[g] for m in member_costs], w, how) for g in ids}


def fold_fitted(
    member_costs: Sequence[Mapping[str, np.ndarray]],
    truth: Mapping[str, np.ndarray],
    folds: Sequence[Sequence[str]],
    collection: str,
    how: str,
) -> tuple[dict[str, np.ndarray], list[list[float]]]:
    """The ensemble with weights fitted out of fold: each fold's graphs are combined with the
    weights that score best (ensemble.fit_weights) on the OTHER folds' graphs, so no graph's own
    runtimes choose its weights. Returns (graph ID -> combined cost, the weights of each fold).

    Args:
        member_costs: per member, graph ID -> out-of-fold cost per config.
        truth: graph ID -> measured runtime per config (tile: normalized; see `truth_of`).
        folds: the graph IDs of each fold.
        collection: decides the metric.
        how: per-graph normalization ("rank" or "zscore").
    """
    out, weights = {}, []
    for fold in folds:
        others = {g: truth[g] for f in folds if f is not fold for g in f}
        if not others:
            raise ValueError("fold_fitted needs at least two folds")
        w, _ = fit_weights(collection, list(member_costs), others, how)
        weights.append([float(x) for x in w])
        for g in fold:
            out[g] = combine([m[g] for m in member_costs], w, how)
    return out, weights


def stage(argv: list[str], log: Path) -> float:
    """Run `python -m tpurank <argv>` from the checkout, its output to `log`; its seconds, or stop
    with the log's tail on failure (the real-data benches run every stage as a user would)."""
    return measured_stage(argv, log)[0]


def measured_stage(argv: list[str], log: Path, checkout: Path | None = None) -> tuple[float, float]:
    """`stage`, and its process's peak RSS in GB: (seconds, GB); `checkout`: run that checkout's code
    (a clone at another commit) instead of this one's."""
    root = checkout or ROOT
    env = {**os.environ, "PYTHONPATH": str(root / "src")}
    t = time.perf_counter()
    with open(log, "a") as f:
        f.write(f"$ tpurank {' '.join(argv)}\n")
        f.flush()
        child = subprocess.Popen(
            [sys.executable, "-m", "tpurank", *argv], stdout=f, stderr=subprocess.STDOUT, cwd=root, env=env
        )
        _, status, usage = os.wait4(child.pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        tail = log.read_text().splitlines()[-15:]
        raise SystemExit(f"tpurank {argv[0]} failed (exit {rc}); log {log}:\n" + "\n".join(tail))
    return time.perf_counter() - t, usage.ru_maxrss / 2**20  # ru_maxrss: KB on Linux
