"""Every calibration fit of the real programs, saved once, so that rules for how far to trust them
can be compared without fitting again (`bench/runs/calibration_rules.py` reads what this writes).

For each real program of `bench_tune.py` (its models trained there: `--work` of a `bench_tune.py`
run, reused), each k and draw, and two ways of choosing the k measured configs:

- `uniform`: k configs drawn at random among those with a runtime (`bench_tune.draws`);
- `top:<model>`: the model's own k best-ranked configs, as an autotuner measures them first (one
  set; the draws vary the calibration's seed instead),

each learning member (LightGBM; the GNN where it is fine-tuned) is calibrated on the measured
configs (the whole fit, every config scored) and on held-out folds of them (`select.out_of_fold`:
each measured config ranked by a fit that never saw it). Saved per program to
`<out>/<program>.npz`: the truth, each member's trained costs, and per record the measured
positions, their labels, each member's whole fit and out-of-fold ranks.

    .venv/bin/python bench/runs/calibration_fits.py --work /tmp/bt --out /tmp/fits
    # LightGBM's fits again after a change to it alone, the GNN's kept from an earlier run:
    .venv/bin/python bench/runs/calibration_fits.py --work /tmp/bt --out /tmp/fits2 --members lgbm --base /tmp/fits
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import bench_tune as bt  # noqa: E402
import provenance  # noqa: E402
import real_data as rd  # noqa: E402
import tune_programs  # noqa: E402

from tpurank.core.metrics import order_from_costs  # noqa: E402
from tpurank.rank import select  # noqa: E402
from tpurank.rank.calibrate import Calibration  # noqa: E402
from tpurank.tune.tuner import Tuner  # noqa: E402

STAMP = provenance.stamp()  # the code the fits were made with: read when the script starts


def top_positions(costs: np.ndarray, known: np.ndarray, k: int) -> np.ndarray:
    """The k best-ranked configs with a runtime."""
    order = [p for p in order_from_costs(costs) if known[p]]
    return np.sort(np.asarray(order[:k], dtype=np.int64))


def fits(
    program, positions: np.ndarray, seed: int, only: str | None, members: list[str] | None
) -> dict[str, np.ndarray]:  # noqa: ANN001
    """Each learning member's whole fit and out-of-fold ranks on the measured configs (`only`: that
    member's fits alone; None: every member's; `members`: of those, only these)."""
    how = Calibration(seed=seed).for_kind("tile" if program.candidates.normalizer is not None else "layout")
    runtime = program.candidates.runtime[positions].astype(np.float64)
    label = (
        runtime
        if program.candidates.normalizer is None
        else runtime / np.maximum(program.candidates.normalizer[positions], 1)
    )
    out = {"label": label}
    if len(np.unique(label)) < 2:
        return out
    fold = select.fold_of(len(positions), how.folds, seed)
    learners = {m: pair for m, pair in program._learners(how).items()}
    if program.lgbm is not None and program.lgbm.training is not None:  # LightGBM on the measured query alone
        alone = dataclasses.replace(program.lgbm, training=None)

        def learn_alone(p: np.ndarray, r: np.ndarray, s: np.ndarray | None) -> np.ndarray | None:
            return alone.calibrated(p, r, how, s)

        learners["lgbm_alone"] = (learn_alone, learn_alone)
    for m, (learn, in_fold) in learners.items():
        if (only is not None and not m.startswith(only)) or (members is not None and m not in members):
            continue
        whole = learn(positions, label, None)
        if whole is None:
            continue
        out[f"whole:{m}"] = whole.astype(np.float32)
        held = {f: fit() for f, fit in select.held_out(in_fold, positions, label, fold)}
        out[f"oof:{m}"] = select.out_of_fold(held, fold)
    return out


def with_base(saved: dict[str, np.ndarray], base: Path | None) -> dict[str, np.ndarray]:
    """`saved` with the fits of an earlier run (`base`, None: none) that it does not hold: the other
    learners' fits of the same records. The records must be drawn alike (same models, ks, draws)."""
    if base is None:
        return saved
    with np.load(base) as old:
        records = [str(k) for k in saved["index"]]
        for key in records:  # the same measured configs, record by record
            if not np.array_equal(old[f"{key}|positions"], saved[f"{key}|positions"]):
                raise SystemExit(f"{base}: record {key} measured other configs: not the same draws")
        wanted = set(records)
        kept = {
            n: old[n]
            for n in old.files
            if n not in saved and "|" in n and "|".join(n.split("|")[:3]) in wanted
        }
    return {**saved, **kept}


def program_records(program, a: argparse.Namespace, save) -> None:  # noqa: ANN001
    """Every record of one program, flattened into named arrays and saved (`save`) after each draw:
    draw 0 of every cell first, so that an interrupted run has every cell."""
    truth = bt.truth_of(program)
    known = truth > 0
    members = list(program.weights["members"]) if program.weights else ["lgbm"]
    saved: dict[str, np.ndarray] = {"truth": truth, "members": np.array(members)}
    saved |= {f"trained:{m}": program.costs[m] for m in [*members, "ensemble"] if m in program.costs}
    if program.weights:
        saved["weights"] = np.asarray(program.weights["weights"], dtype=np.float64)
        saved["normalize"] = np.array(program.weights["normalize"])
    index = []
    tops = [f"top:{m}" for m in [*members, "ensemble"] if m in program.costs]
    sources = (["uniform"] if "uniform" in a.measure else []) + (tops if "top" in a.measure else [])
    for draw in range(a.draws):
        for k in a.ks:
            if known.sum() - k < bt.MIN_LEFT:
                continue
            for source in sources:
                if source == "uniform":
                    positions = bt.draws(program, k, draw)
                else:
                    positions = top_positions(program.costs[source[4:]], known, k)
                t = time.perf_counter()
                only = None if source in ("uniform", "top:ensemble") else source[4:]
                rec = fits(program, positions, draw, only, a.members)
                key = f"{source}|{k}|{draw}"
                saved[f"{key}|positions"] = positions
                saved |= {f"{key}|{name}": v for name, v in rec.items()}
                index.append(key)
                print(f"    {program.name} {key}: {time.perf_counter() - t:.1f} s", flush=True)
        saved["index"] = np.array(index)
        save(saved)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, required=True, help="a bench_tune.py --work with its models trained")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--only", choices=["layout", "tile"])
    p.add_argument("--ks", type=int, nargs="+", default=[5, 10, 20, 50])
    p.add_argument("--draws", type=int, default=5)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--programs", nargs="+", metavar="NAME", help="only the programs whose names start so")
    p.add_argument("--measure", nargs="+", choices=["uniform", "top"], default=["uniform", "top"])
    p.add_argument("--members", nargs="+", help="fit only these learners (lgbm, gnn, lgbm_alone)")
    p.add_argument("--base", type=Path, help="an earlier --out: its fits of the other learners are kept")
    a = p.parse_args()
    if a.members and not a.base:
        p.error("--members needs --base: the fits of the other learners come from there")
    if reason := rd.missing_sample(rd.SHARED):
        print(f"calibration_fits: skipped: {reason}")
        return 0
    # what bench_tune's training reads: its defaults, so the models it trained are reused as they are
    t = argparse.Namespace(
        work=a.work, gnn_steps=300, gnn_seeds=1, seed=0, set=[], tile_folds=5, forward_only=False
    )
    a.out.mkdir(parents=True, exist_ok=True)
    bt.memoize()
    for kind in ("layout", "tile"):
        if a.only not in (None, kind):
            continue
        programs = tune_programs.layout_programs(t) if kind == "layout" else tune_programs.tile_programs(t)
        for name, file, models, prepared in programs:
            if a.programs and not any(name.startswith(p) for p in a.programs):
                continue
            stem = re.sub(r"[^A-Za-z0-9._-]+", "_", name)

            def save(saved: dict, stem: str = stem, name: str = name, kind: str = kind) -> None:
                tmp = a.out / f"{kind}-{stem}.tmp.npz"
                np.savez_compressed(tmp, **with_base(saved, a.base and a.base / f"{kind}-{stem}.npz"))
                tmp.replace(a.out / f"{kind}-{stem}.npz")
                meta = {"program": name, "kind": kind, "provenance": STAMP}
                (a.out / f"{kind}-{stem}.json").write_text(json.dumps(meta))

            with Tuner.load(models, prepared=prepared) as tuner:
                col = rd.LAYOUT if kind == "layout" else None
                program = tuner.programs(file, kind, col)[0]
                if a.threads and program.lgbm is not None:
                    program.lgbm.params["num_threads"] = a.threads
                program_records(program, a, save)
            print(f"  {kind} {name}: saved", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
