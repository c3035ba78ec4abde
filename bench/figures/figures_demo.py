"""Figures of the demo: a new user's first `./run.sh all` on a fresh clone (bench/runs/bench_first_run.py:
its time with the `.venv` setup and its validation table, in the README and docs/validation.md), the
setup alone with uv and with pip (bench/runs/bench_setup.py, in docs/usage.md), the demo data's generation
(bench/runs/bench_synth.py --demo, in docs/data.md) and LightGBM on the demo data (bench/runs/bench_lgbm.py,
in docs/models.md)."""

from __future__ import annotations

import re
import statistics

from figure_kit import Figure, Source, figure, results, table

FIRST = "first_run.json"  # bench_first_run.py: a fresh clone's `./run.sh all`, the setup included
LGBM = "lgbm_demo.json"  # bench_lgbm.py on the demo data, one LightGBM thread
SETUP = "setup.json"  # bench_setup.py: `./run.sh setup` with uv and with pip, side by side
SYNTH_DEMO = "synth_demo.json"  # bench_synth.py --demo: the demo tree with one process and two


def min_s(seconds: float) -> str:
    """`3 min 59 s`: a run of minutes as the docs give it."""
    m, s = divmod(round(seconds), 60)
    return f"{m} min {s} s" if m else f"{s} s"


def first_run() -> dict:
    """The fresh clone's run, refused where it failed or printed no validation table."""
    r = results(FIRST)
    assert r["exit"] == 0 and r["validation"]["rows"], f"{FIRST}: the run failed"
    return r


def cross_fitted(r: dict) -> dict[str, float]:
    """The cross-fitted ensemble's scores with an `overall`: the mean over the collections, as `all`
    computes the overall of the other rows (the cross-fitted line it prints has none)."""
    cross = dict(r["validation"]["cross_fitted"])
    cross["overall"] = statistics.fmean(cross.values())
    return cross


def budget(r: dict) -> str:
    """`10s under the demo's budget of 4m30s` (or `24s over`), from the line `all` ends with."""
    m = re.search(r"total \S+: (.+ the budget of \S+)", r["budget_line"] or "")
    return m[1].replace("OVER", "over").replace("the budget", "the demo's budget") if m else "no budget line"


def stopped(r: dict) -> str:
    """How the GNNs stopped: `no GNN ...`, `3 of 5 GNNs ...` or `all 5 GNNs stopped by the time budget`
    (where the budget binds, the scores depend on the machine's speed and load)."""
    why = [g["stopped"] for g in r["gnn"]]
    timed = sum("time" in w for w in why)
    if not timed:
        return "no GNN stopped by the time budget"
    return f"{'all ' if timed == len(why) else f'{timed} of '}{len(why)} GNNs stopped by the time budget"


def load(r: dict) -> str:
    """`1-minute load average 3.4 at the start, 8.5 at the end`: how busy the cores were, which the
    GNN's steps depend on where the budget binds."""
    return f"1-minute load average {r['load_start'][0]:.1f} at the start, {r['load_end'][0]:.1f} at the end"


def pipeline(r: dict, sep: str) -> str:
    """`3 min 35 s<sep>55s under the demo's budget of 4m30s; no GNN stopped by the time budget`."""
    return f"{min_s(r['pipeline_s'])}{sep}{budget(r)}; {stopped(r)}"


@figure("readme_first_run")
def readme_first_run() -> Figure:
    r = first_run()
    ens = r["validation"]["rows"]["ensemble"]["overall"]
    text = (
        f"{min_s(r['wall_s_with_venv_setup'])} with the `.venv` setup (the pipeline {pipeline(r, ', ')}); "
        f"valid overall: ensemble {ens:.3f} *in-sample*, {cross_fitted(r)['overall']:.3f} cross-fitted"
    )
    return Figure(text, (Source(FIRST),))


@figure("usage_setup")
def usage_setup() -> Figure:
    r = results(SETUP)
    runs = len(r["pip_over_uv"])
    text = (
        f"with uv {min_s(r['median_s']['uv'])}, with pip {min_s(r['median_s']['pip'])} (medians of "
        f"{runs} runs each, in turn; pip took {r['median_pip_over_uv']:.1f}x uv's time, pair by pair "
        f"{min(r['pip_over_uv']):.1f}x to {max(r['pip_over_uv']):.1f}x)"
    )
    return Figure(text, (Source(SETUP),))


@figure("validation_demo_table")
def validation_demo_table() -> Figure:
    r = first_run()
    cols, rows = r["validation"]["columns"], r["validation"]["rows"]
    label = {"ensemble": "ensemble (weights fitted on valid: in-sample)"}
    body = [[label.get(m, m), *(f"{v[c]:.4f}" for c in cols)] for m, v in rows.items()]
    cross = cross_fitted(r)
    body.append(["ensemble, cross-fitted (half/half)", *(f"{cross[c]:.4f}" for c in cols)])
    return Figure(table(["model", *cols], body), (Source(FIRST),))


@figure("validation_demo_time")
def validation_demo_time() -> Figure:
    r = first_run()
    text = (
        f"It took {min_s(r['wall_s_with_venv_setup'])} with the `.venv` setup, the pipeline "
        f"{pipeline(r, ' (')}), on {r['provenance']['cores']} cores: {load(r)}"
    )
    return Figure(text, (Source(FIRST),))


@figure("scale_first_run")
def scale_first_run() -> Figure:
    """docs/scale.md: the first run's steps, and each GNN collection's minutes and how it stopped."""
    r = first_run()
    steps = r["steps_s"]
    gnns = ", ".join(f"{g['collection']} {g['minutes']:.1f} min ({g['stopped']})" for g in r["gnn"])
    rows = r["validation"]["rows"]
    text = (
        f"{min_s(r['wall_s_with_venv_setup'])} with the `.venv` setup: the pipeline {r['pipeline_s']:.1f} s, "
        f"of it the GNN's training {steps['train gnn']:.1f} s and its predictions "
        f"{steps['predict gnn valid'] + steps['predict gnn test']:.1f} s; two collections at a time, each "
        f"on one thread: {gnns}; valid overall gnn {rows['gnn']['overall']:.4f}, ensemble "
        f"{rows['ensemble']['overall']:.4f} in-sample"
    )
    return Figure(text, (Source(FIRST),))


@figure("models_lgbm_demo_table")
def models_lgbm_demo_table() -> Figure:
    head = [
        "collection",
        "graphs",
        "rows",
        "features s",
        "train s",
        "train MB",
        "rounds",
        "predict s",
        "lgbm",
        "heuristic",
        "random",
    ]
    body = [
        [
            r["collection"],
            str(r["graphs"]),
            str(r["rows"]),
            f"{r['features_s']:.1f}",
            f"{r['train_s']:.1f}",
            str(r["train_mb"]),
            str(r["rounds"]),
            f"{r['predict_s']:.2f}",
            *(f"{r[m]:.4f}" for m in ("lgbm", "heuristic", "random")),
        ]
        for r in results(LGBM)["rows"]
    ]
    return Figure(table(head, body), (Source(LGBM),))


@figure("models_lgbm_demo_run")
def models_lgbm_demo_run() -> Figure:
    r = results(LGBM)
    text = (
        f"an idle process importing tpurank and LightGBM peaks at {r['idle_import_mb']} MB; the targets "
        f"(lgbm beats both untrained rankers everywhere, tile >= 0.9): {'met' if r['targets_met'] else 'NOT met'}; "
        f"the whole run took {r['total_s']:.0f} s"
    )
    return Figure(text, (Source(LGBM),))


@figure("data_synth_demo")
def data_synth_demo() -> Figure:
    """docs/data.md's generation time of the demo tree, with one process and with two."""
    d = results(SYNTH_DEMO)
    assert d["same_bytes"] and d["files"] > 0, f"{SYNTH_DEMO}: one process and two wrote different files"
    text = (
        f"{d['median_s']['1']:.1f} s with one process, {d['median_s']['2']:.1f} s with `--jobs 2` "
        f"(the same bytes; medians of {len(d['seconds']['1'])} runs each), {d['files']} files, "
        f"{d['npz_mb']:.0f} MB, {max(d['peak_rss_mb'].values())} MB peak memory (the largest process)"
    )
    return Figure(text, (Source(SYNTH_DEMO),))
