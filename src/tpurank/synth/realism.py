"""How far synthetic runtimes and rankings sit from real ones: per-file statistics and a distance.

`compare-synth` prints, per group of files (layout default, layout random, tile), the median over
files of each statistic on both sides (scale statistics: in log space), how many real files fall in
the synthetic files' range, and a distance:

- scale statistics (runtime spread `max/min - 1`, coefficient of variation, how much slower the
  median config is than the fastest, the sd of log runtime among duplicate configs): the ratio
  synthetic / real, within
  tolerance when inside [1/RATIO_TOL, RATIO_TOL];
- rank correlations (Kendall tau with runtime) of simple rules: the heuristic (count of tensors
  not at default), an output lane-padding total, a count of MXU operands not contraction-minor
  (layout), the output tile size (tile): the difference synthetic - real, within TAU_TOL.

The padding and MXU rules restate, in a few lines, what the generator's cost model charges and what
some features compute (`features/layout.py`, `features/mxu.py`; copied, since the generator
stands below the features). A synthetic tau far stronger than the real one is the sign of a
generator that grades those features' own formulas.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
from scipy.stats import kendalltau

from tpurank.pb.convert import read_pb, tile_graphs

RATIO_TOL = 3.0  # scale statistics: same order of magnitude (the two real default files differ 5x)
TAU_TOL = 0.1  # rank correlations
LANE = 128
CONV, DOT = 26, 34
COL_DIMS, COL_OWN_MINOR = slice(21, 27), 134
COL_CONV_IN_FEATURE, COL_CONV_K_FEATURE = 94, 99


def _tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall tau-b; 0 for a rule that is constant over the file (it orders nothing)."""
    if len(x) < 3 or np.ptp(y) == 0:
        return np.nan
    return 0.0 if np.ptp(x) == 0 else float(kendalltau(x, y).statistic)


def _scale(rt: np.ndarray) -> dict[str, float]:
    rt = rt.astype(np.float64)
    lo = rt.min()
    return {
        "spread": float(rt.max() / lo - 1.0),
        "cv": float(rt.std() / rt.mean()),
        "median_slowdown": float(np.median(rt) / lo - 1.0),
    }


def tile_runtime_stats(config_feat: np.ndarray, runtime: np.ndarray, normalizers: np.ndarray) -> dict:
    """Runtime statistics of one tile kernel (runtimes normalized as scored)."""
    rt = runtime / normalizers
    if len(rt) < 2 or rt.min() <= 0:
        return {}
    out = _scale(rt)
    out["tau_tile_size"] = _tau(-np.log1p(np.maximum(config_feat[:, 15], 0)), rt)  # bigger tiles first
    return out


def layout_runtime_stats(
    feat: np.ndarray, runtime: np.ndarray, node_feat: np.ndarray, opcode: np.ndarray, inverse: np.ndarray
) -> dict:
    """Runtime statistics of one layout file.

    Args:
        feat: (c, k, 18) int8 configs.
        runtime: (c,) runtimes.
        node_feat, opcode: the configurable nodes' raw features (k, 140) and opcodes (k,).
        inverse: (c,) index of each config's distinct row (duplicates share it).
    """
    rt = runtime.astype(np.float64)
    out: dict = {"dup_noise": _dup_noise(rt, inverse)}
    if len(np.unique(inverse)) < 2 or rt.min() <= 0:
        return out  # one distinct config: its spread is measurement noise, not layouts
    out.update(_scale(rt))
    out["tau_heuristic"] = _tau((feat != -1).any(axis=2).sum(axis=1).astype(np.float64), rt)
    out["tau_padding"] = _tau(_lane_padding(feat, node_feat), rt)
    out["tau_mxu"] = _tau(_mxu_slow(feat, node_feat, opcode), rt)
    return out


def _dup_noise(rt: np.ndarray, inverse: np.ndarray) -> float:
    """Median over groups of identical configs of the sd of their log runtimes (the relative
    re-measurement noise; unlike max/min it does not grow with the group's size)."""
    counts = np.bincount(inverse)
    if not (counts > 1).any():
        return np.nan
    log = np.log(rt)
    dev = log - (np.bincount(inverse, log) / counts)[inverse]
    var = np.bincount(inverse, dev * dev)[counts > 1] / (counts[counts > 1] - 1)
    return float(np.median(np.sqrt(var)))


def _lane_padding(feat: np.ndarray, node_feat: np.ndarray) -> np.ndarray:
    """Per config: elements of the configurable nodes' outputs after padding the minor dim to 128."""
    dims = node_feat[:, COL_DIMS].astype(np.float64)
    numel = np.prod(np.where(dims > 0, dims, 1.0), axis=1)
    own = node_feat[:, COL_OWN_MINOR].astype(np.int64)
    minor = np.where(feat[:, :, 0] >= 0, feat[:, :, 0], own[None, :]).clip(0, 5)
    d = np.take_along_axis(np.broadcast_to(dims, (len(feat), *dims.shape)), minor[..., None], 2)[..., 0]
    pad = np.where(d > 0, np.ceil(np.maximum(d, 1) / LANE) * LANE / np.maximum(d, 1), 1.0)
    return (pad * numel[None, :]).sum(axis=1)


def _mxu_slow(feat: np.ndarray, node_feat: np.ndarray, opcode: np.ndarray) -> np.ndarray:
    """Per config: conv/dot operands whose set layout does not put the contracted dimension minor
    (a dot in canonical form contracts its input's last and its kernel's second-to-last dim)."""
    conv, dot = (opcode == CONV)[None, :], (opcode == DOT)[None, :]
    inp, ker = feat[:, :, 6:12], feat[:, :, 12:18]
    c_in = np.where(dot, (inp != -1).sum(-1) - 1, node_feat[None, :, COL_CONV_IN_FEATURE])
    c_k = np.where(dot, np.maximum((ker != -1).sum(-1) - 2, 0), node_feat[None, :, COL_CONV_K_FEATURE])
    slow_in = (conv | dot) & (inp[..., 0] != -1) & (inp[..., 0] != c_in)
    slow_k = (conv | dot) & (ker[..., 0] != -1) & (ker[..., 0] != c_k)
    return (slow_in.sum(1) + slow_k.sum(1)).astype(np.float64)


def pb_tile_stats(pb: Path) -> list[dict]:
    """Tile runtime statistics of the kernels of a raw TuningData (the real sample's 15 kernels)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graphs = tile_graphs(pb, read_pb(pb, "tile")[1])
    return [
        {
            "collection": "tile:xla",
            "split": "pb",
            **tile_runtime_stats(g.config_feat, g.config_runtime, g.config_runtime_normalizers),
        }
        for g in graphs.values()
    ]


GROUPS = {
    "layout default": lambda r: r["collection"].endswith(":default"),
    "layout random": lambda r: r["collection"].endswith(":random"),
    "tile": lambda r: r["collection"] == "tile:xla",
}
STATS = (  # (key, label, kind): kind "ratio" (scale) or "tau"
    ("spread", "runtime max/min - 1", "ratio"),
    ("cv", "runtime CV", "ratio"),
    ("median_slowdown", "median config / fastest - 1", "ratio"),
    ("dup_noise", "duplicate configs: sd of log runtime", "ratio"),
    ("tau_heuristic", "tau(heuristic, runtime)", "tau"),
    ("tau_padding", "tau(output lane padding, runtime)", "tau"),
    ("tau_mxu", "tau(MXU operands not contraction-minor, runtime)", "tau"),
    ("tau_tile_size", "tau(-log tile size, runtime)", "tau"),
)


def _values(recs: list[dict], group: str, key: str) -> np.ndarray:
    v = [r.get(key, np.nan) for r in recs if GROUPS[group](r) and r.get("split") != "test"]
    v = np.array([x for x in v if x == x], dtype=np.float64)
    return v


def _center(v: np.ndarray, kind: str) -> float:
    """The median; for scale statistics taken in log space (two real files 100x apart give their
    geometric mean, not the larger one's half)."""
    if not len(v):
        return np.nan
    if kind == "ratio" and (v > 0).all():
        return float(np.exp(np.median(np.log(v))))
    return float(np.median(v))


def _cell(v: np.ndarray, kind: str) -> str:
    fmt = "{:+.3f}" if kind == "tau" else "{:.3g}"
    if not len(v):
        return "-"
    if len(v) == 1:
        return fmt.format(v[0])
    return f"{fmt.format(_center(v, kind))} ({fmt.format(v.min())} to {fmt.format(v.max())}, n={len(v)})"


def _covered(s: np.ndarray, r: np.ndarray) -> str:
    """How many real values lie within the synthetic files' range."""
    if not len(s) or not len(r):
        return "-"
    return f"{int(((r >= s.min()) & (r <= s.max())).sum())} of {len(r)}"


def distance(syn: float, real: float, kind: str) -> tuple[str, float | None]:
    """(the distance as shown, its size in tolerances: <= 1 is within tolerance; None: no data).

    Taus: the difference synthetic - real, over TAU_TOL. Scale statistics: the ratio synthetic /
    real, its |log| over log(RATIO_TOL).
    """
    if not (np.isfinite(syn) and np.isfinite(real)):
        return "-", None
    if kind == "tau":
        return f"{syn - real:+.3f}", abs(syn - real) / TAU_TOL
    if real <= 0 or syn <= 0:
        return "-", None
    ratio = syn / real
    return f"x{ratio:.3g}", float(abs(np.log(ratio)) / np.log(RATIO_TOL))


def realism_table(synth: list[dict], real: list[dict]) -> str:
    """Markdown table of per-file runtime and ranking statistics with a distance, and a summary."""
    lines = [
        "| group | statistic | synthetic | real | distance | real in synthetic range |",
        "|---|---|---|---|---|---|",
    ]
    judged: list[tuple[float, str]] = []
    for group in GROUPS:
        for key, label, kind in STATS:
            s, r = _values(synth, group, key), _values(real, group, key)
            if not len(s) and not len(r):
                continue
            shown, size = distance(_center(s, kind), _center(r, kind), kind)
            cells = [group, label, _cell(s, kind), _cell(r, kind), shown, _covered(s, r)]
            lines.append("| " + " | ".join(cells) + " |")
            if size is not None:
                judged.append((size, f"{group}, {label}: {shown}"))
    lines += ["", summary_line(judged)]
    return "\n".join(lines)


def summary_line(judged: list[tuple[float, str]]) -> str:
    """One line: how many statistics with real data are within tolerance, and the farthest.

    Args:
        judged: (distance in tolerances, description) per statistic that has both sides.
    """
    if not judged:
        return "runtime and ranking: no statistic has both synthetic and real values"
    ok = sum(size <= 1.0 for size, _ in judged)
    worst = max(judged, key=lambda j: j[0])
    return (
        f"runtime and ranking: {ok} of {len(judged)} statistics with real data within tolerance "
        f"(ratio {1 / RATIO_TOL:.2g} to {RATIO_TOL:g}, tau within {TAU_TOL}); farthest: {worst[1]}"
    )
