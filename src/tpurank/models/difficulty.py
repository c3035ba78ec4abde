"""How hard a data root is to rank: per-graph runtime statistics and the Kendall tau of simple rankers.

`compare-synth` puts the real sample's only train/valid pairs beside synthetic files of the
same sizes. Each side is scored the same way: the train/valid files are prepared into a temporary
cache, and three rankers order each valid graph's configs:

- `random`: the seeded random baseline (mean tau over RANDOM_SEEDS seeds: one seed is noise);
- `heuristic`: the no-learning rule of `tpurank.models.untrained`;
- `lgbm`: the project's LightGBM ranker on its tabular features, trained on the train files for a
  fixed LGBM_ROUNDS rounds (no early stopping: with one valid graph, stopping on it would tune to the
  graph being scored).

Tau is over all configs of a valid graph (tile: normalized runtimes), as `tpurank.core.metrics` computes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import tempfile
from pathlib import Path

import numpy as np

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.metrics import kendall_tau, order_from_costs
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.features import io as tab_io
from tpurank.features.stage import build_features
from tpurank.lgbm import model as lgbm
from tpurank.models.untrained import heuristic_costs, random_costs
from tpurank.prepare.cache import PreparedGraph, iter_prepared
from tpurank.prepare.stage import prepare_dataset
from tpurank.synth.counterpart import layout_counterpart, real_tile_root, synthetic_tile_root

RANKERS = ("random", "heuristic", "lgbm")
RANDOM_SEEDS = 5
LGBM_ROUNDS = 200


def runtime_stats(runtime: np.ndarray) -> dict[str, float]:
    """Spread (max/min), coefficient of variation and share of distinct values of one graph's runtimes."""
    rt = np.asarray(runtime, dtype=np.float64)
    if len(rt) == 0 or rt.min() <= 0:
        return {"spread": np.nan, "cv": np.nan, "distinct": np.nan}
    return {
        "spread": float(rt.max() / rt.min()),
        "cv": float(rt.std() / rt.mean()),
        "distinct": len(np.unique(rt)) / len(rt),
    }


def _lgbm_costs(paths: Paths, cfg: Config, collection: str) -> dict[str, np.ndarray]:
    """Train the LightGBM ranker on the train split (fixed rounds) and score the valid split."""
    cfg = cfg.for_collection(collection)
    cfg = dataclasses.replace(cfg, lgbm=dataclasses.replace(cfg.lgbm, num_boost_round=LGBM_ROUNDS, threads=1))
    with contextlib.redirect_stdout(io.StringIO()):  # stage chatter would break the table
        build_features(paths, cfg, [collection], ["train", "valid"])
        booster, info = lgbm.fit(tab_io.read_table(paths, collection, "train"), None, cfg, collection)
        lgbm.save(paths, cfg, collection, booster, info)
        return lgbm.predict(paths, cfg, collection, "valid")


def ranker_taus(root: Path, collection: str, cfg: Config | None = None) -> list[dict]:
    """Per valid graph of `collection` under `root`: runtime statistics and each ranker's tau.

    Args:
        root: a data root holding train and valid files of the collection (real or synthetic).
        collection: one of COLLECTIONS.
        cfg: the config (default: `Config()`, seed 0).

    Returns:
        One dict per valid graph: stem, configs, spread, cv, distinct, tau_random, tau_heuristic, tau_lgbm.
    """
    cfg = cfg or Config()
    with tempfile.TemporaryDirectory(prefix="tpurank-difficulty-") as tmp:
        paths = Paths(data=root, out=Path(tmp))
        with contextlib.redirect_stdout(io.StringIO()):
            prepare_dataset(paths, cfg, [collection], ["train", "valid"], jobs=1, progress=False)
        graphs: list[PreparedGraph] = list(iter_prepared(paths.prepared, collection, "valid"))
        lgbm_costs = _lgbm_costs(paths, cfg, collection)
        rows = []
        for g in graphs:
            rt = g.config_runtime
            rec: dict = {"stem": g.stem, "configs": len(rt), **runtime_stats(rt)}
            rec["tau_random"] = float(
                np.nanmean(
                    [kendall_tau(order_from_costs(random_costs(g, s)), rt) for s in range(RANDOM_SEEDS)]
                )
            )
            rec["tau_heuristic"] = kendall_tau(order_from_costs(heuristic_costs(g)), rt)
            rec["tau_lgbm"] = kendall_tau(order_from_costs(lgbm_costs[g.id]), rt)
            rows.append(rec)
        return rows


LAYOUT_PAIR = ("layout:xla:default", "train/unet3d.npz", "valid/unet_3d.4x4.bf16.npz")
TILE_PB = "pb/op_tuning_data.pb"
COLUMNS = ("spread", "cv", "distinct", "tau_random", "tau_heuristic", "tau_lgbm")
MAX_GAP = 0.1  # realism target: each synthetic tau within this of the real one


def _layout_side(sample_root: Path, seed: int | None) -> list[dict]:
    """The real pair (seed None) or its synthetic counterpart of one seed, scored."""
    collection, train, valid = LAYOUT_PAIR
    real_dir = sample_root / NPZ_SUBDIR / "layout" / "xla" / "default"
    if seed is None:
        return ranker_taus(sample_root, collection)
    with tempfile.TemporaryDirectory(prefix="tpurank-counterpart-") as tmp:
        for rel in (train, valid):
            layout_counterpart(real_dir / rel, Path(tmp), collection, split=rel.split("/")[0], seed=seed)
        return ranker_taus(Path(tmp), collection)


def _tile_side(sample_root: Path, seed: int | None) -> list[dict]:
    """The real kernels of the tile protobuf (seed None) or synthetic kernels of their sizes."""
    with tempfile.TemporaryDirectory(prefix="tpurank-tile-") as tmp:
        sizes = real_tile_root(sample_root / TILE_PB, Path(tmp))
        if seed is None:
            return ranker_taus(Path(tmp), "tile:xla")
    with tempfile.TemporaryDirectory(prefix="tpurank-tile-") as tmp:
        synthetic_tile_root(sizes, Path(tmp), seed)
        return ranker_taus(Path(tmp), "tile:xla")


def difficulty_rows(sample_root: Path, seeds: int = 5) -> list[dict]:
    """Real vs synthetic (`seeds` counterparts) difficulty of the layout pair and the tile kernels.

    Returns:
        One dict per (task, side): task, side, graphs, and per column the mean over valid graphs
        (and over seeds), with `<column>_sd` the spread across seeds for the synthetic side.
    """
    if seeds < 0:
        raise TpurankError(f"--difficulty-seeds must be 0 or more, got {seeds}")
    real_dir = sample_root / NPZ_SUBDIR / "layout" / "xla" / "default"
    for need in (real_dir / LAYOUT_PAIR[1], real_dir / LAYOUT_PAIR[2], sample_root / TILE_PB):
        if not need.is_file():
            raise TpurankError(
                f"{need}: missing; the difficulty comparison needs the real sample's xla default "
                "train/valid pair and its tile protobuf (--difficulty-seeds 0 skips it)"
            )
    out = []
    for task, side_fn in (("layout xla default", _layout_side), ("tile (pb kernels)", _tile_side)):
        real = side_fn(sample_root, None)
        out.append({"task": task, "side": "real", "graphs": len(real), **_means(real)})
        per_seed = [_means(side_fn(sample_root, s)) for s in range(seeds)]
        rec = {"task": task, "side": f"synthetic ({seeds} seeds)", "graphs": len(real)}
        for c in COLUMNS:
            v = np.array([p[c] for p in per_seed])
            rec[c], rec[f"{c}_sd"] = float(np.nanmean(v)), float(np.nanstd(v))
        out.append(rec)
    return out


def _means(rows: list[dict]) -> dict[str, float]:
    return {c: float(np.nanmean([r[c] for r in rows])) for c in COLUMNS}


def difficulty_table(rows: list[dict]) -> str:
    """Markdown table of `difficulty_rows`: real and synthetic rows, a distance row per task
    (ratio for runtime spread (max/min - 1) and CV, difference for the rest), and a summary line
    counting the taus within MAX_GAP of the real ones."""
    head = "| task | data | valid graphs | runtime max/min | CV | distinct runtimes | tau random | tau heuristic | tau lgbm |"
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    gaps: list[tuple[float, str]] = []
    for real, syn in zip(rows[::2], rows[1::2], strict=True):
        for r in (real, syn):
            cells = [f"{r[c]:.3f}" + (f" ± {r[c + '_sd']:.3f}" if c + "_sd" in r else "") for c in COLUMNS]
            lines.append(f"| {r['task']} | {r['side']} | {r['graphs']} | " + " | ".join(cells) + " |")
        lines.append(
            f"| {real['task']} | distance | | " + " | ".join(_distance(syn, real, c) for c in COLUMNS) + " |"
        )
        gaps += [(syn[c] - real[c], f"{real['task']} {c}") for c in COLUMNS[3:]]
    within = sum(abs(g) <= MAX_GAP for g, _ in gaps)
    worst_gap, worst = max(gaps, key=lambda g: abs(g[0]) if np.isfinite(g[0]) else -1.0)
    lines += [
        "",
        f"difficulty: {within} of {len(gaps)} synthetic taus within {MAX_GAP} of the real ones; farthest: {worst} {worst_gap:+.3f}",
    ]
    return "\n".join(lines)


def _distance(syn: dict, real: dict, column: str) -> str:
    """Synthetic against real for one column: x ratio of the spread's excess (max/min - 1) and of
    CV, a difference for shares and taus."""
    s, r = syn[column], real[column]
    if not (np.isfinite(s) and np.isfinite(r)):
        return "-"
    if column in ("spread", "cv"):
        s, r = (s - 1.0, r - 1.0) if column == "spread" else (s, r)
        return f"x{s / r:.3g}" if r > 0 and s > 0 else "-"
    return f"{s - r:+.3f}"
