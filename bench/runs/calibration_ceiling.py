"""How much order a program's own measurements hold: a model fitted on n of its configs, ranking the rest.

Calibration learns from k measured configs of a program on top of a model trained on others. What
it can reach is bounded by how much of the program's runtime order its configs explain at all. This
fits LightGBM (a regression on log runtime) on n configs of each real layout program, from their
config values alone (the graph is the same for every config of a program, so its features add
nothing within it), and scores Kendall tau on the rest, for n = 20, 50, 100, 200 and four fifths
of the program, over seeded draws. It also prints how far the program's runtimes spread.

Configs with the same values are one config at their mean runtime (as `prepare` merges them), so no
config is both fitted and scored.

    .venv/bin/python bench/runs/calibration_ceiling.py [--draws 5] [--out bench/results/calibration_ceiling.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import lightgbm as lgb
import numpy as np
from scipy.stats import kendalltau

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import provenance  # noqa: E402
import real_data as rd  # noqa: E402
from tune_programs import LAYOUT_PB  # noqa: E402

from tpurank.core.paths import NPZ_SUBDIR  # noqa: E402
from tpurank.data.npz import load_graph  # noqa: E402
from tpurank.pb.convert import layout_graph, read_pb  # noqa: E402

SIZES = (20, 50, 100, 200)  # configs fitted on; then four fifths of the program
SHARE = 0.8
MIN_LEFT = 10  # configs left to score, as the calibration benches ask
# a small forest for a few hundred rows: shallow trees, leaves of a few configs
PARAMS = {"objective": "regression", "learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 3}
PARAMS |= {"verbose": -1, "deterministic": True, "num_threads": 1}
ROUNDS = 300


def programs() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each real layout program: (one row of config values per config, its runtime)."""
    out = {}
    for name, rel in (("unet_3d.4x4.bf16 (npz)", rd.LAYOUT_SCORED), ("unet3d (npz)", rd.LAYOUT_TRAIN)):
        g = load_graph(rd.SHARED / NPZ_SUBDIR / rel)
        out[name] = (g.node_config_feat.reshape(len(g.config_runtime), -1), g.config_runtime)
    pb = rd.SHARED / LAYOUT_PB
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the runs the converter leaves out are not the point here
        g = layout_graph(pb, read_pb(pb, "layout")[1])
    out["unet_3d.4x4.bf16 (pb runs)"] = (
        g.node_config_feat.reshape(len(g.config_runtime), -1),
        g.config_runtime,
    )
    return out


def merged(x: np.ndarray, runtime: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Configs of the same values as one, at their mean runtime."""
    unique, inverse = np.unique(x, axis=0, return_inverse=True)
    inverse = inverse.ravel()
    mean = np.bincount(inverse, weights=runtime.astype(np.float64)) / np.bincount(inverse)
    return unique.astype(np.float32), mean


def fitted_tau(x: np.ndarray, y: np.ndarray, n: int, draw: int) -> float:
    """Tau on the configs left after fitting on `n` drawn ones (seeded by `draw`)."""
    order = np.random.default_rng(draw).permutation(len(y))
    fit, rest = order[:n], order[n:]
    params = PARAMS | {"seed": draw}
    model = lgb.train(params, lgb.Dataset(x[fit], np.log(y[fit])), num_boost_round=ROUNDS)
    return float(kendalltau(model.predict(x[rest]), y[rest]).statistic)


def measure(draws: int) -> dict[str, dict]:
    out = {}
    for name, (x, runtime) in programs().items():
        x, y = merged(x, runtime)
        sizes = [n for n in (*SIZES, int(SHARE * len(y))) if n <= len(y) - MIN_LEFT]
        taus = {str(n): [round(fitted_tau(x, y, n, d), 5) for d in range(draws)] for n in sizes}
        out[name] = {
            "configs": int(len(runtime)),
            "distinct": int(len(y)),
            "spread_cv": float(np.std(y) / np.mean(y)),
            "spread_max_over_min": float(y.max() / y.min()),
            "four_fifths": int(SHARE * len(y)),
            "tau": taus,
        }
        cells = "  ".join(f"n={n}: {np.mean(v):.3f}" for n, v in taus.items())
        print(f"{name:28} {len(y):5} distinct, runtimes cv {out[name]['spread_cv']:.4f}  {cells}", flush=True)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--draws", type=int, default=5)
    p.add_argument("--out", type=Path, help="save the taus and the provenance here (.json)")
    a = p.parse_args()
    if (why := rd.missing_sample()) is not None:
        raise SystemExit(f"calibration_ceiling: {why}")
    stamp = provenance.stamp()
    res = {"what": __doc__.splitlines()[0], "draws": a.draws, "rounds": ROUNDS, "params": PARAMS}
    res["programs"] = measure(a.draws)
    res["provenance"] = stamp
    if a.out is not None:
        a.out.write_text(json.dumps(res, indent=1) + "\n")
        print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
