"""Rules for how far a calibration is trusted, compared on the saved fits of the real programs
(`bench/runs/calibration_fits.py`): no fitting, so a rule is scored on every program, k and draw in seconds.

A rule turns one record (the measured configs, each member's trained costs, whole fit and
out-of-fold ranks) into each model's final costs; each is scored on the configs not measured
(layout: Kendall tau; tile: tau and the competition's tile score) beside the model as trained on
the same configs.

    .venv/bin/python bench/runs/calibration_rules.py /tmp/fits --rules "" "l=20" "l=20:c=5"
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import zlib
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import provenance  # noqa: E402

from tpurank.core.metrics import kendall_tau, order_from_costs, tile_score  # noqa: E402
from tpurank.rank.calibrate import Calibration  # noqa: E402
from tpurank.rank.finetune import FineTune  # noqa: E402
from tpurank.rank.program import MemberFits, Program  # noqa: E402


class Record:
    """One measured set of one program, read from a saved fits file."""

    def __init__(self, data: dict, key: str, kind: str = "layout") -> None:
        self.key, self.kind = key, kind
        self.source, k, draw = key.split("|")
        self.k, self.draw = int(k), int(draw)
        self.positions = data[f"{key}|positions"]
        self.label = data[f"{key}|label"]
        self.members = [str(m) for m in data["members"]]
        self.trained = {
            m: data[f"trained:{m}"] for m in [*self.members, "ensemble"] if f"trained:{m}" in data
        }
        self.whole = {n.split(":")[-1]: v for n, v in data.items() if n.startswith(f"{key}|whole:")}
        self.oof = {n.split(":")[-1]: v for n, v in data.items() if n.startswith(f"{key}|oof:")}
        self.weights = data.get("weights")
        self.normalize = str(data["normalize"]) if "normalize" in data else "rank"


Rule = Callable[[Record], dict[str, np.ndarray]]


class _Fit:
    """A learner that answers from the saved fits: the whole fit, and its out-of-fold ranks, which
    `Replayed._fits` reads."""

    def __init__(self, whole: np.ndarray | None, oof: np.ndarray | None) -> None:
        self.whole, self.oof = whole, oof

    def __call__(
        self, positions: np.ndarray, runtime: np.ndarray, scored: np.ndarray | None
    ) -> np.ndarray | None:
        return self.whole


@dataclasses.dataclass
class Replayed(Program):
    """A program whose members learn by reading the saved fits: `Program.calibrate` runs as shipped."""

    fits: dict[str, _Fit] = dataclasses.field(default_factory=dict)

    def _learners(self, how: Calibration) -> dict:
        lgbm = "lgbm" in self.fits and self.model in ("lgbm", "ensemble")
        gnn = "gnn" in self.fits and how.gnn is not None and self.model in ("gnn", "ensemble")
        return {m: (self.fits[m], self.fits[m]) for m, on in (("lgbm", lgbm), ("gnn", gnn)) if on}

    def _fits(
        self,
        learners: dict,
        positions: np.ndarray,
        label: np.ndarray,
        fold: np.ndarray | None,
        wholes: set[str],
    ) -> dict[str, MemberFits]:
        """The saved fits of the learners: the out-of-fold ranks where there are folds, the whole fit
        where asked."""
        nothing = np.full(len(positions), np.nan)
        return {
            m: MemberFits(
                self.fits[m].oof if fold is not None and self.fits[m].oof is not None else nothing,
                self.fits[m].whole if m in wholes else None,
            )
            for m in learners
        }


def shipped(how: Calibration, fits: dict[str, str] | None = None) -> Rule:
    """The rule `Program.calibrate` applies with `how`, on the saved fits (`fits`: member -> the saved
    fit it reads, default its own)."""
    fits = fits or {}

    def rule(r: Record) -> dict[str, np.ndarray]:
        saved = {m: _Fit(r.whole.get(fits.get(m, m)), r.oof.get(fits.get(m, m))) for m in r.members}
        saved = {m: f for m, f in saved.items() if f.whole is not None}
        weights = None
        if r.weights is not None:
            weights = {"members": r.members, "weights": list(r.weights), "normalize": r.normalize}
        out = {}
        for model in r.trained:
            if model == "ensemble" and weights is None:
                continue
            collection = "tile:xla" if r.kind == "tile" else "layout:xla:default"  # Calibration.for_kind
            p = Replayed(_Named(r.key), collection, model, dict(r.trained), weights, fits=saved)
            out[model] = p.calibrate(r.positions, r.label, dataclasses.replace(how, seed=r.draw))[0]
        return out

    return rule


class _Named:
    def __init__(self, name: str) -> None:
        self.name, self.normalizer = name, None


RULES: dict[str, Rule] = {}
COLUMNS = ("program", "kind", "source", "k", "draw", "model", "rule", "tau", "tile")  # a saved row


def variant(text: str) -> Calibration:
    """`l=20:t=100:g=5:c=5:m=1:a` -> the default calibration with lgbm_prior 20, tile_lgbm_prior 100,
    gnn_prior 5, checked from 5, margin 1; `a`: LightGBM's fit on the measured query alone."""
    keys = {
        "l": ("lgbm_prior", float),
        "t": ("tile_lgbm_prior", float),
        "g": ("gnn_prior", float),
        "c": ("checked_from", int),
        "w": ("weights_from", int),
        "m": ("margin", float),
        "wm": ("weights_margin", float),
    }
    keys |= {"reach": ("reach", float)}
    kw = {}
    for part in text.split(":"):
        if part in ("", "a"):
            continue
        k, _, v = part.partition("=")
        name, kind = keys[k]
        kw[name] = kind(v)
    return Calibration(gnn=FineTune(), **kw)


def rule_of(text: str) -> Rule:
    if text not in RULES:
        fits = {"lgbm": "lgbm_alone"} if "a" in text.split(":") else None
        RULES[text] = shipped(variant(text), fits)
    return RULES[text]


def scores(costs: np.ndarray, truth: np.ndarray, left: np.ndarray, tile: bool) -> dict[str, float]:
    """Kendall tau (tile: and the tile score) on the configs of `left`, to 5 decimals (the results
    file holds every record)."""
    order = order_from_costs(costs[left])
    out = {"tau": round(kendall_tau(order, truth[left]), 5)}
    if tile:
        out["tile"] = round(tile_score(order, truth[left]), 5)
    return out


MIN_LEFT = 10  # configs left to score, as bench_tune.py and calibration_fits.py ask
FEW = (1, 2)  # measured configs too few to learn from: no fit saved, the rules rank as trained
DRAWS = 5


def few_measured(data: dict, program: str) -> list[str]:
    """Records of 1 and 2 measured configs (uniform draws and each model's own top), added to `data`
    without fits: the shipped rule must rank them as trained, and the table shows that it does."""
    known = np.flatnonzero(data["truth"] > 0)
    keys = []
    for k in [k for k in FEW if len(known) - k >= MIN_LEFT]:
        for draw in range(DRAWS):
            rng = np.random.default_rng([draw, k, zlib.crc32(program.encode())])
            sets = {"uniform": np.sort(rng.choice(known, size=k, replace=False))}
            for m in [*data["members"], "ensemble"]:
                if f"trained:{m}" in data:
                    order = [p for p in order_from_costs(data[f"trained:{m}"]) if data["truth"][p] > 0]
                    sets[f"top:{m}"] = np.sort(np.asarray(order[:k], dtype=np.int64))
            for source, positions in sets.items():
                key = f"{source}|{k}|{draw}"
                data[f"{key}|positions"], data[f"{key}|label"] = positions, data["truth"][positions]
                keys.append(key)
    return keys


def evaluate(folder: Path, rules: list[str], kinds: tuple[str, ...] = ("layout", "tile")) -> list[dict]:
    """One row per (program, record, model, rule) and per (program, record, model) as trained; every
    rule reads the saved folds (`Replayed._fits`)."""
    return _evaluate(folder, rules, kinds)


def _evaluate(folder: Path, rules: list[str], kinds: tuple[str, ...]) -> list[dict]:
    rows = []
    for f in sorted(folder.glob("*.npz")):
        meta = json.loads(f.with_suffix(".json").read_text())
        if meta["kind"] not in kinds:
            continue
        data = dict(np.load(f, allow_pickle=False))
        truth = data["truth"]
        tile = meta["kind"] == "tile"
        for key in [*data["index"], *few_measured(data, meta["program"])]:
            r = Record(data, str(key), meta["kind"])
            left = truth > 0
            left[r.positions] = False
            base = {
                "program": meta["program"],
                "kind": meta["kind"],
                "source": r.source,
                "k": r.k,
                "draw": r.draw,
            }
            for m, c in r.trained.items():
                rows.append(base | {"model": m, "rule": "trained", **scores(c, truth, left, tile)})
            for name in rules:
                for m, c in rule_of(name)(r).items():
                    rows.append(base | {"model": m, "rule": name, **scores(c, truth, left, tile)})
    return rows


def summary(rows: list[dict], rules: list[str], metric: str = "tau") -> str:
    """Per kind, source kind (uniform / top), model and k: each rule's mean gain over as trained
    (mean over programs and draws), and its worst program's mean gain."""
    cell: dict[tuple, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    base = {}
    for x in rows:
        if metric not in x:
            continue
        src = "uniform" if x["source"] == "uniform" else "top"
        if src == "top" and x["source"][4:] != x["model"]:
            continue  # a model scored on another model's top-k: not the case asked for
        key = (x["kind"], src, x["model"], x["k"], x["program"], x["draw"])
        if x["rule"] == "trained":
            base[key] = x[metric]
        else:
            cell[key][x["rule"]].append(x[metric])
    agg: dict[tuple, dict[str, dict[str, list[float]]]] = defaultdict(
        lambda: defaultdict(lambda: defaultdict(list))
    )
    for key, per in cell.items():
        for rule, vals in per.items():
            agg[key[:4]][rule][key[4]].append(vals[0] - base[key])
    lines = [f"{'kind':6} {'draw':7} {'model':8} {'k':>3}  " + "  ".join(f"{r:>16}" for r in rules)]
    for key in sorted(agg):
        parts = []
        for rule in rules:
            progs = agg[key][rule]
            if not progs:
                parts.append(f"{'-':>16}")
                continue
            means = [float(np.mean(v)) for v in progs.values()]
            parts.append(f"{np.mean(means):+7.3f} ({min(means):+6.3f})")
        lines.append(f"{key[0]:6} {key[1]:7} {key[2]:8} {key[3]:>3}  " + "  ".join(parts))
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("fits", type=Path)
    p.add_argument("--rules", nargs="+", default=[""], help="calibration variants (`variant`)")
    p.add_argument("--metric", default="tau")
    p.add_argument("--kinds", nargs="+", choices=["layout", "tile"], default=["layout", "tile"])
    p.add_argument("--uniform-only", action="store_true", help="score only the uniform draws' records")
    p.add_argument("--out", type=Path, help="save every score, the tables and the provenance here (.json)")
    a = p.parse_args()
    rows = evaluate(a.fits, a.rules, tuple(a.kinds))
    if a.uniform_only:
        rows = [r for r in rows if r["source"] == "uniform"]
    text = summary(rows, a.rules, a.metric)
    print(text)
    if a.out is not None:
        fits = sorted(
            json.loads(f.read_text()).get("provenance", {}).get("commit", "?") for f in a.fits.glob("*.json")
        )
        res = {"command": " ".join(["bench/runs/calibration_rules.py", *sys.argv[1:]]), "rules": a.rules}
        res |= {
            "fits_commits": sorted(set(fits)),
            "columns": list(COLUMNS),  # rows as lists: thousands of records, each key once
            "rows": [[r.get(c) for c in COLUMNS] for r in rows],
            "report": {m: summary(rows, a.rules, m) for m in ("tau", "tile")},
        }
        res["provenance"] = provenance.stamp()
        a.out.write_text(json.dumps(res, separators=(",", ":")) + "\n")  # one line: thousands of records
        print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
