"""docs/rank.md's guarantee, as far as it was measured: each model calibrated by the default rule
against the same model as trained, on the configs not measured, per k, for a uniform draw and for
the model's own top k, on every real program (bench/runs/calibration_rules.py on the fits of
bench/runs/calibration_fits.py), and the replayed loop round by round (bench_tune.py)."""

from __future__ import annotations

from collections import defaultdict

import numpy as np
import tune_tables as tt
from figure_kit import Figure, Source, figure, results, table

CALIBRATION = "calibration_real.json"
LOOPS = ("tune_loop_layout_10x5.json", "tune_loop_layout_5x4.json")
DEFAULT = ""  # the rule of `Calibration()` in calibration_rules.py's variant syntax
MODELS = ("lgbm", "gnn", "ensemble")
MEASURES = {"uniform": "a uniform draw", "top": "its own top k"}


def records(name: str) -> list[dict]:
    """A results file's rows as records (calibration_rules.py saves them as lists under `columns`),
    without the scores a row lacks (tile's score on layout)."""
    r = results(name)
    return [{c: v for c, v in zip(r["columns"], row, strict=True) if v is not None} for row in r["rows"]]


def gains(
    kind: str, metric: str = "tau", rule: str = DEFAULT, name: str = CALIBRATION
) -> dict[tuple[str, str, int], dict[str, list[float]]]:
    """(measure, model, k) -> program -> a rule's gain over as trained, one value per draw."""
    rows = records(name)
    base, got = {}, {}
    for r in rows:
        if r["kind"] != kind or metric not in r or r["rule"] not in ("trained", rule):
            continue
        measure = "uniform" if r["source"] == "uniform" else "top"
        if measure == "top" and r["source"][4:] != r["model"]:
            continue  # each model is scored on its own top k only
        key = (measure, r["model"], r["k"], r["program"], r["draw"])
        (base if r["rule"] == "trained" else got)[key] = r[metric]
    out: dict[tuple[str, str, int], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for key, value in got.items():
        out[key[:3]][key[3]].append(value - base[key])
    return out


def guarantee_table(kind: str, measure: str, metric: str = "tau", models: tuple[str, ...] = MODELS) -> str:
    """Per model and k: the mean gain over programs (each the mean of its draws) and the lowest
    program's mean gain."""
    g = gains(kind, metric)
    ks = sorted({k for (m, _, k) in g if m == measure})
    rows = []
    for model in models:
        cells = []
        for k in ks:
            per = g.get((measure, model, k))
            if not per:
                cells.append("-")
                continue
            means = [float(np.mean(v)) for v in per.values()]
            cells.append(f"{np.mean(means):+.3f} (lowest {min(means):+.3f})")
        if any(c != "-" for c in cells):
            rows.append([model, *cells])
    return table(["model", *(f"k = {k}" for k in ks)], rows)


def draws_text(kind: str) -> str:
    """How many programs and draws the cells average."""
    g = gains(kind)
    programs = {p for per in g.values() for p in per}
    counts = sorted({len(v) for per in g.values() for v in per.values()})
    span = f"{counts[0]}" if counts[0] == counts[-1] else f"{counts[0]} to {counts[-1]}"
    return f"{len(programs)} programs, {span} draws each"


@figure("calibration_guarantee_layout")
def layout() -> Figure:
    parts = [
        f"Layout ({draws_text('layout')}); tau calibrated minus as trained, on the configs not measured:"
    ]
    for measure, what in MEASURES.items():
        parts += ["", f"Measured: {what}.", "", guarantee_table("layout", measure)]
    return Figure("\n".join(parts), (Source(CALIBRATION),))


@figure("calibration_guarantee_tile")
def tile() -> Figure:
    parts = [
        f"Tile ({draws_text('tile')}: the kernels with 10 configs left at a k); the tile score calibrated "
        "minus as trained, on the configs not measured (the GNN of a tile kernel is not fine-tuned by default):"
    ]
    for measure, what in MEASURES.items():
        parts += [
            "",
            f"Measured: {what}.",
            "",
            guarantee_table("tile", measure, "tile", ("lgbm", "ensemble")),
        ]
    return Figure("\n".join(parts), (Source(CALIBRATION),))


def per_program_table(kind: str, measure: str, model: str, metric: str = "tau") -> str:
    """One row per program: the gain at each k, each draw's and their mean."""
    g = gains(kind, metric)
    ks = sorted({k for (m, mod, k) in g if m == measure and mod == model})
    programs = sorted({p for (m, mod, _), per in g.items() if m == measure and mod == model for p in per})
    rows = []
    for p in programs:
        cells = []
        for k in ks:
            v = g.get((measure, model, k), {}).get(p)
            cells.append("-" if not v else f"{np.mean(v):+.3f} ({', '.join(f'{x:+.2f}' for x in v)})")
        rows.append([p, *cells])
    return table(["program", *(f"k = {k}" for k in ks)], rows)


TRIED = "calibration_rules_tried.json"
RULE_NAMES = {
    "": (
        "**the default**: LightGBM's prior 20 (tile 100), the GNN's 5 until checked, checked from 20, "
        "weights from 5 (half the margin below 20)"
    ),
    "g=0:t=20:wm=1": "the rule before: the GNN's fine-tuning whole, LightGBM's prior 20 on tile too, the whole margin",
    "l=0:c=10:w=10:g=0:t=20:wm=1": "the rule before that: every calibration whole below 10, checked from 10",
    "wm=1": "the weights' whole margin below 20",
    "l=10": "LightGBM's prior 10",
    "l=40": "LightGBM's prior 40",
    "g=10": "the GNN's prior 10 until checked",
    "w=20": "the ensemble's weights chosen from 20",
    "t=40": "LightGBM's prior 40 on tile",
    "t=70": "LightGBM's prior 70 on tile",
}
TILE_RULES = ("", "g=0:t=20:wm=1", "t=40", "t=70")  # the rules that differ on tile kernels


def _rules_table(kind: str, model: str, rules: list[str], metric: str) -> str:
    """One row per rule: its mean gain over the programs and the lowest program's, per k above 2."""
    rows, ks = [], []
    for rule in rules:
        g = gains(kind, metric, rule=rule, name=TRIED)
        ks = sorted({k for (m, mod, k) in g if m == "uniform" and mod == model and k > 2})
        cells = []
        for k in ks:
            means = [float(np.mean(v)) for v in g[("uniform", model, k)].values()]
            cells.append(f"{np.mean(means):+.3f} (lowest {min(means):+.3f})")
        rows.append([RULE_NAMES.get(rule, rule), *cells])
    return table(["rule", *(f"k = {k}" for k in ks)], rows)


@figure("calibration_rules_tried")
def rules_tried() -> Figure:
    """Each rule tried, per model and k (uniform draws): layout's tau, and tile's score of LightGBM
    for the rules that differ there; the mean gain and the lowest program's."""
    rules = results(TRIED)["rules"]
    layout_rules = [r for r in rules if not r.startswith("t=")]  # a tile prior alone changes no layout cell
    parts = []
    for model in MODELS:
        parts += [
            f"Layout, {model}, a uniform draw (tau):",
            "",
            _rules_table("layout", model, layout_rules, "tau"),
            "",
        ]
    tile = [r for r in rules if r in TILE_RULES]
    if tile:
        parts += [
            "Tile, lgbm, a uniform draw (the tile score):",
            "",
            _rules_table("tile", "lgbm", tile, "tile"),
        ]
    return Figure("\n".join(parts).rstrip(), (Source(TRIED),))


@figure("calibration_per_program_layout")
def per_program_layout() -> Figure:
    parts = []
    for measure, what in MEASURES.items():
        for model in MODELS:
            parts += [f"{model}, measured: {what}.", "", per_program_table("layout", measure, model), ""]
    return Figure("\n".join(parts).rstrip(), (Source(CALIBRATION),))


def _loop_runs(name: str) -> list[dict]:
    """Every replay of a loop results file: one per program and calibration seed."""
    return [run for rec in results(name)["layout"] for run in rec.get("loops", {}).get("ensemble", [])]


@figure("calibration_loop_layout")
def loop_layout() -> Figure:
    """The loop after each round against the model as trained on the configs not yet measured, and
    the TpuGraphs paper's top-K error of the loop, the model as trained and random search."""
    parts = []
    for name in LOOPS:
        runs = _loop_runs(name)
        res = results(name)
        head = f"{res['rounds']} rounds of {res['per_round']} ({len(runs)} replays: programs x seeds)"
        rows = []
        for i in range(max(len(r["rounds"]) for r in runs)):
            got = [r["rounds"][i] for r in runs if len(r["rounds"]) > i]
            tau = np.mean([g["tau"] for g in got])
            model = np.mean([g["tau_model"] for g in got])
            rows.append([str(got[0]["measured"]), f"{tau:.4f}", f"{model:.4f}", f"{tau - model:+.4f}"])
        parts += [head + ":", "", table(["measured", "tau of the loop", "tau as trained", "gain"], rows), ""]
        errors = []
        for k in ("1", "5", "10"):
            cells = []
            for who in ("tuner", "model", "random"):
                v = [r["top_k_error"][who][k] for r in runs if r["top_k_error"][who][k] is not None]
                cells.append(f"{np.mean(v):.4f}" if v else "-")
            errors.append([f"K = {k}", *cells])
        parts += [table(["top-K error", "loop", "model as trained", "random search"], errors), ""]
    return Figure("\n".join(parts).rstrip(), tuple(Source(n) for n in LOOPS))


def _absolute(kind: str) -> dict[tuple[int, str, str], list[float]]:
    """(k, program, model) -> the calibrated tau of each uniform draw (the default rule)."""
    out: dict[tuple[int, str, str], list[float]] = defaultdict(list)
    for r in records(CALIBRATION):
        if r["kind"] == kind and r["source"] == "uniform" and r["rule"] == DEFAULT:
            out[(r["k"], r["program"], r["model"])].append(r["tau"])
    return out


@figure("calibration_ensemble_vs_members")
def ensemble_vs_members() -> Figure:
    """The calibrated ensemble's tau minus its better calibrated member's, per layout program and k
    (uniform draws, each program's mean over its draws): what re-weighting on the measured configs
    recovers of the better member."""
    tau = _absolute("layout")
    ks = sorted({k for k, _, _ in tau if k > 2})
    programs = sorted({p for _, p, _ in tau})
    rows = []
    for p in programs:
        cells = []
        for k in ks:
            mean = {m: float(np.mean(tau[(k, p, m)])) for m in MODELS}
            best = max(("lgbm", "gnn"), key=lambda m: mean[m])
            cells.append(f"{mean['ensemble'] - mean[best]:+.3f} ({best})")
        rows.append([p, *cells])
    text = (
        "The calibrated ensemble's tau minus its better calibrated member's (named), a uniform draw, "
        "each program's mean over its draws:\n\n" + table(["program", *(f"k = {k}" for k in ks)], rows)
    )
    return Figure(text, (Source(CALIBRATION),))


UNCUT = "calibration_real_uncut.json"


def _mean_sd(values: list[float]) -> str:
    """A cell: the mean and standard deviation of the draws' values ("-": none)."""
    return (
        f"{np.mean(values):+.3f} (sd {np.std(values):.3f})" if values else "-"
    )  # the same rule on LightGBM's fits with the shipped queries whole


@figure("calibration_anchor_cut")
def anchor_cut() -> Figure:
    """What cutting the shipped training queries to 100 rows did to the calibrated rankings: per
    layout program, k and model, the calibrated tau with the cut minus without it, the same draws
    (mean and standard deviation over draws). Only LightGBM's fits changed."""

    def taus(name: str) -> dict[tuple, float]:
        return {
            (r["program"], r["source"], r["k"], r["draw"], r["model"]): r["tau"]
            for r in records(name)
            if r["kind"] == "layout" and r["rule"] == DEFAULT and r["k"] >= 5
        }

    new, old = taus(CALIBRATION), taus(UNCUT)
    diff: dict[tuple, list[float]] = defaultdict(list)
    for key, value in new.items():
        program, source, k, _, model = key
        if model != "gnn" and source in ("uniform", f"top:{model}"):
            diff[(model, "uniform" if source == "uniform" else "top", program, k)].append(value - old[key])
    ks = sorted({key[3] for key in diff})
    rows = [
        [model, MEASURES[measure], program]
        + [_mean_sd(diff.get((model, measure, program, k), [])) for k in ks]
        for model, measure, program in sorted({key[:3] for key in diff})
    ]
    text = (
        "Tau calibrated with LightGBM's shipped queries cut to 100 rows minus with them whole, the same "
        "measured configs (mean over draws, and its standard deviation):\n\n"
        + table(["model", "measured", "program", *(f"k = {k}" for k in ks)], rows)
    )
    return Figure(text, (Source(CALIBRATION), Source(UNCUT)))


CEILING = "calibration_ceiling.json"
WEIGHTS = "calibration_weights.json"


@figure("calibration_ceiling")
def ceiling() -> Figure:
    """Per real layout program: how far its runtimes spread, the tau on the rest of a model fitted on n
    of its own configs, and the ensemble at 20 measured configs as trained and calibrated (uniform
    draws, means over draws): how much of the +0.25 a calibration on 20 configs could reach."""
    res = results(CEILING)["programs"]
    trained, calibrated = defaultdict(list), _absolute("layout")
    for r in records(CALIBRATION):
        at_20 = r["kind"] == "layout" and r["source"] == "uniform" and r["k"] == 20
        if at_20 and r["rule"] == "trained" and r["model"] == "ensemble":
            trained[r["program"]].append(r["tau"])
    sizes = sorted({n for p in res.values() for n in p["tau"] if int(n) != p["four_fifths"]}, key=int)
    rows = []
    for name, p in sorted(res.items()):
        fitted = [f"{np.mean(p['tau'][n]):.3f}" if n in p["tau"] else "-" for n in sizes]
        whole = f"{np.mean(p['tau'][str(p['four_fifths'])]):.3f} ({p['four_fifths']})"
        base = float(np.mean(trained[name]))
        cal = float(np.mean(calibrated[(20, name, "ensemble")]))
        rows.append(
            [
                name,
                str(p["distinct"]),
                f"{p['spread_cv']:.4f}",
                *fitted,
                whole,
                f"{base:.3f}",
                f"{cal:.3f}",
                f"{base + 0.25:.3f}",
            ]
        )
    head = ["program", "distinct configs", "runtimes' spread (sd / mean)", *(f"fitted on {n}" for n in sizes)]
    head += ["fitted on four fifths", "ensemble as trained", "calibrated on 20", "as trained + 0.25"]
    text = (
        "Kendall tau on the rest of a program's configs: LightGBM fitted on n of them (their config values, "
        "mean over draws), and the ensemble at 20 measured configs (a uniform draw), as trained and "
        "calibrated:\n\n" + table(head, rows)
    )
    return Figure(text, (Source(CEILING), Source(CALIBRATION)))


@figure("calibration_weights")
def weights_told() -> Figure:
    """Per real layout program and k: the ensemble at each fixed LightGBM weight minus its better
    calibrated member, and in how many draws the member the held-out folds rank higher is the better
    one on the rest."""
    res = results(WEIGHTS)
    head, rows = tt.weights_rows(res["rows"], [str(w) for w in res["grid"]])
    text = (
        "The calibrated ensemble at a fixed LightGBM weight (the GNN the rest) minus its better calibrated "
        "member, on the configs not measured (a uniform draw, mean over draws); and in how many draws the "
        "member with the higher held-out tau on the measured configs is the better one on the rest (draws "
        "where the two tie are left out):\n\n" + table(head, rows)
    )
    return Figure(text, (Source(WEIGHTS),))
