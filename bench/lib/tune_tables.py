"""The tables of bench_tune.py's results: tau on the configs not measured per calibration and k
(mean over programs and draws), per program, and the replayed loop."""

from __future__ import annotations

import numpy as np

LOOP_AT = (5, 10, 20, 50, 100)  # measurements at which the loop's slowdowns are reported


def _mean(values: list[float]) -> float:
    v = [x for x in values if x is not None and not np.isnan(x)]
    return float(np.mean(v)) if v else float("nan")


def calibration_table(
    records: list[dict], ks: list[int], metric: str = "tau", label=str, seconds: bool = True
) -> str:
    """Per model and variant, the mean over programs and draws of `metric` on the configs not
    measured, per k; the uncalibrated model on the same configs beside it.

    Args:
        records: the programs' records (bench_tune.py's `layout` or `tile`).
        ks: the measured counts, in order.
        metric: the score.
        label: a variant's name in the table (default: its text).
        seconds: add the mean seconds per calibration (meaningful on an idle machine only).
    """
    rows = [r | {"program": rec["program"]} for rec in records for r in rec["calibration"]]
    ks = [k for k in ks if any(r["k"] == k for r in rows)]
    head = f"| model, calibration | {' | '.join(f'k = {k}' for k in ks)} |" + (
        " seconds per calibration |" if seconds else ""
    )
    lines = [head, "|---|" + "---|" * (len(ks) + seconds)]
    for model in dict.fromkeys(r["model"] for r in rows):
        for v in dict.fromkeys(r["variant"] for r in rows if r["model"] == model):
            cells = []
            for k in ks:
                got = [r[metric] for r in rows if r["model"] == model and r["variant"] == v and r["k"] == k]
                if not got and k == 0:  # a variant at k = 0 is the uncalibrated model
                    got = [r[metric] for r in rows if r["model"] == model and r["k"] == 0]
                cells.append(f"{_mean(got):.4f}" if got else "-")
            secs = [r["s"] for r in rows if r["model"] == model and r["variant"] == v and r["k"]]
            tail = f" {_mean(secs):.2f} |" if seconds else ""
            lines.append(f"| {model}, {label(v)} | {' | '.join(cells)} |{tail}")
    return "\n".join(lines)


def per_program_table(records: list[dict], ks: list[int], model: str, variant: str) -> str:
    """One row per program: tau on the configs not measured for each k (each draw, then the mean)."""
    lines = [f"| program (configs) | {' | '.join(f'k = {k}' for k in ks)} |", "|---|" + "---|" * len(ks)]
    for rec in records:
        cells = []
        for k in ks:
            want = variant if k else "uncalibrated"
            got = [
                r["tau"] for r in rec["calibration"] if (r["model"], r["k"], r["variant"]) == (model, k, want)
            ]
            cells.append(_cell(got))
        lines.append(f"| {rec['program']} ({rec['configs']}) | {' | '.join(cells)} |")
    return "\n".join(lines)


def _cell(got: list[float]) -> str:
    """Each draw's value, then their mean (one value alone)."""
    if not got:
        return "-"
    if len(got) == 1:
        return f"{got[0]:.3f}"
    return ", ".join(f"{g:.3f}" for g in got) + f" (mean {_mean(got):.3f})"


def gain_table(records: list[dict], ks: list[int], label=str) -> str:
    """Per model and calibration, its tau minus the uncalibrated model's on the same configs (the
    same program and draw): the mean over programs and draws, their standard deviation, and how
    many of them gained (`label`: a variant's name in the table)."""
    rows = [r | {"program": rec["program"]} for rec in records for r in rec["calibration"]]
    base = {
        (r["program"], r["k"], r["draw"], r["model"]): r["tau"]
        for r in rows
        if r["variant"] == "uncalibrated"
    }
    ks = [k for k in ks if k and any(r["k"] == k for r in rows)]
    lines = [f"| model, calibration | {' | '.join(f'k = {k}' for k in ks)} |", "|---|" + "---|" * len(ks)]
    for model, v in dict.fromkeys((r["model"], r["variant"]) for r in rows if r["variant"] != "uncalibrated"):
        cells = []
        for k in ks:
            d = [
                r["tau"] - base[(r["program"], k, r["draw"], model)]
                for r in rows
                if (r["model"], r["variant"], r["k"]) == (model, v, k)
            ]
            d = [x for x in d if not np.isnan(x)]
            cells.append(
                f"{np.mean(d):+.3f} (sd {np.std(d):.3f}; {sum(x > 0 for x in d)} of {len(d)} up)"
                if d
                else "-"
            )
        lines.append(f"| {model}, {label(v)} | {' | '.join(cells)} |")
    return "\n".join(lines)


def loop_table(records: list[dict], model: str) -> str:
    """The loop's best found over the true best after m measurements (mean over programs), beside
    random search and the uncalibrated model; then the measurements each needed."""
    lines = [
        "| measured | loop | random search (expected) | uncalibrated model | programs "
        "| tau of the loop on the rest | tau uncalibrated, same configs |",
        "|---|---|---|---|---|---|---|",
    ]
    for m in LOOP_AT:
        looped = [rec["loop"][model]["rounds"] for rec in records if model in rec["loop"]]
        got = [g for g in (next((r for r in rounds if r["measured"] == m), None) for rounds in looped) if g]
        if got:
            cells = [f"{_mean([g[c] for g in got]):.4f}" for c in ("tuner", "random", "model")]
            taus = [f"{_mean([g[c] for g in got]):.4f}" for c in ("tau", "tau_model")]
            lines.append(f"| {m} | {' | '.join(cells)} | {len(got)} | {' | '.join(taus)} |")
    lines += [
        "",
        "| program (configs) | loop | random search (expected) | uncalibrated model |",
        "|---|---|---|---|",
    ]
    for rec in records:
        n = rec["loop"].get(model, {}).get("needed")
        if n:
            loop_n = "-" if n["tuner"] is None else n["tuner"]
            lines.append(
                f"| {rec['program']} ({rec['configs']}) | {loop_n} | {n['random']:.1f} | {n['model']} |"
            )
    needed = [rec["loop"][model]["needed"] for rec in records if model in rec["loop"]]
    fewer = sum(n["tuner"] is not None and n["tuner"] < n["random"] for n in needed)
    more = sum(n["tuner"] is None or n["tuner"] > n["random"] for n in needed)
    lines.append(f"\nthe loop needed fewer than random search on {fewer} programs, more on {more}")
    reached = [n["tuner"] for n in needed if n["tuner"] is not None]
    lines.append(
        f"\nmeasurements to come within 0.5% of the best (mean over {len(needed)} programs): loop "
        f"{_mean(reached):.1f} (reached by {len(reached)} of {len(needed)}), random search "
        f"{_mean([n['random'] for n in needed]):.1f} (expected), uncalibrated model "
        f"{_mean([n['model'] for n in needed]):.1f}"
    )
    return "\n".join(lines)


def report(res: dict) -> str:
    out = []
    for kind in ("layout", "tile"):
        if kind not in res:
            continue
        recs = res[kind]
        out.append(f"## {kind}: tau on the configs not measured (mean over programs and draws)\n")
        out.append(calibration_table(recs, res["ks"]))
        out.append(f"\n## {kind}: tau calibrated minus uncalibrated, same program and draw\n")
        out.append(gain_table(recs, res["ks"]))
        pairs = dict.fromkeys((r["model"], r["variant"]) for rec in recs for r in rec["calibration"])
        for model, variant in (p for p in pairs if p[1] != "uncalibrated"):
            out.append(f"\n## {kind}: per program, {model}, {variant}\n")
            out.append(per_program_table(recs, res["ks"], model, variant))
        for model in dict.fromkeys(m for rec in recs for m in rec["loop"]):
            out.append(f"\n## {kind}: the loop ({model}, {res['variants'][0]})\n")
            out.append(loop_table(recs, model))
    return "\n".join(out)


def weights_rows(rows: list[dict], grid: list[str]) -> tuple[list[str], list[list[str]]]:
    """calibration_weights.py's rows as a table (head, rows): per program and k, the better calibrated
    member, the ensemble at each fixed LightGBM weight minus it (means over draws), and in how many
    draws the member with the higher held-out tau is the better one on the rest (ties left out)."""
    by: dict[tuple[str, int], list[dict]] = {}
    for x in rows:
        by.setdefault((x["program"], x["k"]), []).append(x)
    out = []
    for (program, k), xs in sorted(by.items()):
        best = max(("lgbm", "gnn"), key=lambda m: _mean([x["calibrated"][m] for x in xs]))
        top = _mean([x["calibrated"][best] for x in xs])
        cells = [f"{_mean([x['fixed'][w] for x in xs]) - top:+.3f}" for w in grid]
        told = [
            (x["held_out"]["lgbm"] > x["held_out"]["gnn"])
            == (x["calibrated"]["lgbm"] > x["calibrated"]["gnn"])
            for x in xs
            if x["held_out"]["lgbm"] != x["held_out"]["gnn"]
        ]
        out.append([program, str(k), best, *cells, f"{sum(told)} of {len(told)}"])
    head = [
        "program",
        "k",
        "better member",
        *(f"LightGBM's weight {w}" for w in grid),
        "folds pick the better",
    ]
    return head, out
