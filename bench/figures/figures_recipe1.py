"""Figures of README's Recipe 1 at full scale and of `all` on the demo under a budget: the runs of
bench/runs/bench_all.py (`all` measured from outside: wall time, peak memory and disk per step)."""

from __future__ import annotations

import re

from figure_kit import GB, Figure, Source, figure, gb, minutes, results, table
from step_names import TRAIN_GNN, step_name

from tpurank.core.names import Model, StepCommand

H2 = "recipe1_full_2h.json"  # `--budget 2h`, each step in a process of its own
H90 = "recipe1_full_90m_declared.json"  # `--budget 90m`, each step and GNN collection in its own process
H90_BEFORE = "recipe1_full_90m_per_collection.json"  # the same, at the code before one decider
H90_ONE_GNN = "recipe1_full_90m_isolated.json"  # each step in its own process, the GNN in one
H90_FIRST = "recipe1_full_90m.json"  # the first run that held its budget, every step in one process
BUSY_5M = "budget5m_busy_side_by_side.json"  # the demo, `--budget 5m`, one core kept busy

# the rows of a step table: a label and the steps it groups (their walls joined by " / ")
ROWS = [
    ("prepare (the parent and 2 workers)", [step_name(StepCommand.PREPARE)]),
    ("features", [step_name(StepCommand.FEATURES)]),
    ("train lgbm", [step_name(StepCommand.TRAIN, Model.LGBM)]),
    ("train gnn (5 collections x 3 seeds)", [TRAIN_GNN]),
    (
        "predict random / heuristic / lgbm valid",
        [step_name(StepCommand.PREDICT, m, "valid") for m in (Model.RANDOM, Model.HEURISTIC, Model.LGBM)],
    ),
    ("predict gnn valid", [step_name(StepCommand.PREDICT, Model.GNN, "valid")]),
    (
        "train ensemble, predict ensemble valid, validate",
        [
            step_name(StepCommand.TRAIN, Model.ENSEMBLE),
            step_name(StepCommand.PREDICT, Model.ENSEMBLE, "valid"),
            step_name(StepCommand.VALIDATE),
        ],
    ),
    *(
        (f"predict {m} test", [step_name(StepCommand.PREDICT, m, "test")])
        for m in (Model.LGBM, Model.GNN, Model.ENSEMBLE)
    ),
]


def step(run: dict, name: str) -> dict:
    return next(s for s in run["steps"] if s["step"] == name)


def under(run: dict) -> str:
    """`7m42s` from the summary's `total 1h22m: 7m42s under the budget of 1h30m`."""
    return re.search(r": (\S+) under the budget", run["summary"][-1])[1]


def overall(run: dict, model: str) -> str:
    """A model's valid overall score, the last column of the summary table `all` printed."""
    line = next(x for x in run["stdout_tail"] if x.split()[:1] == [model])
    return line.split()[-1]


def checked_rows(run: dict) -> str:
    """`894 rows` when `all`'s closing check found every expected row valid and no problem."""
    for line in run["stderr_tail"]:
        if (m := re.search(r"(\d+) expected rows, (\d+) valid, 0 problem", line)) and m[1] == m[2]:
            return f"{m[1]} rows"
    raise ValueError("the submission was not checked clean")


def peak(run: dict, exclude: str | None = None) -> tuple[float, str]:
    """The highest summed RSS of any step (or of every step but one) and that step's name."""
    s = max((s for s in run["steps"] if s["step"] != exclude), key=lambda s: s["peak_rss_gb"])
    return s["peak_rss_gb"], s["step"]


def written(run: dict) -> str:
    return f"{(run['disk_bytes']['out'] + run['disk_bytes']['work']) / GB:.1f} GB"


MEMORY_TARGET_GB = 2.0  # every step of Recipe 1 within it (tree RSS)


@figure("readme_recipe1")
def readme_recipe1() -> Figure:
    a = results(H2)
    assert a["exit"] == 0 and a["submission"]
    pa, sa = peak(a)
    text = (
        f"synthetic, {a['disk_bytes']['data'] / GB:.1f} GB of npz, {a['provenance']['cores']} cores: "
        f"`--budget 2h` ended in {minutes(a['seconds'])}, {under(a)} under its budget, with a checked "
        f"submission ({checked_rows(a)}) and {written(a)} written; each step in a process of its own, "
        f"peak memory {gb(pa)} in {sa} (RSS summed over every process)"
    )
    return Figure(text, (Source(H2),))


@figure("recipe1_2h_memory")
def memory_2h() -> Figure:
    """Every step of the 2-hour run against the 2 GB target, as measured."""
    a = results(H2)
    pa, sa = peak(a)
    over = [s["step"] for s in a["steps"] if s["peak_rss_gb"] > MEMORY_TARGET_GB]
    where = f"over it in {', '.join(over)}" if over else "every step within it"
    text = f"{where}; the highest, {sa}, peaked at {gb(pa)} (RSS summed over its process tree)"
    return Figure(f"target {gb(MEMORY_TARGET_GB)} a step, {text}", (Source(H2),))


@figure("recipe1_where_it_stands")
def where_it_stands() -> Figure:
    a, b = results(H2), results(H90)
    (pa, sa), (pb, sb) = peak(a), peak(b)
    text = (
        f"`--budget 2h` ended in {minutes(a['seconds'])} and `--budget 90m` in {minutes(b['seconds'])}, "
        f"each with a checked submission. With each step in a process of its own, memory peaked at "
        f"**{gb(pa)}** RSS summed over the whole process tree in the 2-hour run ({sa}) and at {gb(pb)} in "
        f"the 90-minute one ({sb})"
    )
    return Figure(text, (Source(H2), Source(H90)))


def steps_table(run: dict) -> str:
    rows = []
    for label, names in ROWS:
        s = [step(run, n) for n in names]
        walls = [f"{x['seconds'] / 60:.1f}" for x in s]
        wall = f"{walls[0]} min each" if len(s) > 1 and len(set(walls)) == 1 else " / ".join(walls) + " min"
        rows.append([label, wall, gb(max(x["peak_rss_gb"] for x in s)), gb(max(x["peak_pss_gb"] for x in s))])
    return table(["step", "wall", "peak RSS (tree)", "peak PSS (tree)"], rows)


@figure("recipe1_90m_headline")
def headline_90m() -> Figure:
    b = results(H90)
    text = (
        f"**{minutes(b['seconds'])}, {under(b)} under its budget, exit {b['exit']}, a checked submission "
        f"({checked_rows(b)}) on {b['disk_bytes']['data'] / GB:.2f} GB of npz; no step above {gb(peak(b)[0])}:**"
    )
    return Figure(text, (Source(H90),))


@figure("recipe1_90m_steps")
def steps_90m() -> Figure:
    return Figure(steps_table(results(H90)), (Source(H90),))


def disk_and_scores(run: dict) -> str:
    return (
        f"Disk: {gb(run['disk_bytes']['work'], GB)} in the work folder, "
        f"{run['disk_bytes']['out'] / 1e6:.0f} MB in the out folder. Valid overall (synthetic, in-sample for "
        f"the ensemble): lgbm {overall(run, 'lgbm')}, gnn {overall(run, 'gnn')}, ensemble {overall(run, 'ensemble')}."
    )


@figure("recipe1_90m_disk_scores")
def disk_scores_90m() -> Figure:
    b = results(H90)
    text = disk_and_scores(b) + f" `all`'s own process held {gb(step(b, 'data and plan')['peak_rss_gb'])}."
    return Figure(text, (Source(H90),))


@figure("recipe1_90m_before")
def before_90m() -> Figure:
    b, old = results(H90), results(H90_BEFORE)
    diff = max(abs(step(b, s["step"])["peak_rss_gb"] - s["peak_rss_gb"]) for s in old["steps"])
    same = overall(b, "lgbm") == overall(old, "lgbm")
    scores = "the same LightGBM scores" if same else f"LightGBM {overall(old, 'lgbm')} overall"
    text = f"ended in {minutes(old['seconds'])} with the same peaks within {diff:.2f} GB and {scores}"
    return Figure(text, (Source(H90_BEFORE), Source(H90)))


@figure("recipe1_90m_one_gnn_process")
def one_gnn_process() -> Figure:
    r = results(H90_ONE_GNN)
    g = step(r, TRAIN_GNN)
    text = (
        f"({minutes(r['seconds'])}, {under(r)} under): its GNN step peaked at {gb(g['peak_rss_gb'])} RSS / "
        f"{gb(g['peak_pss_gb'])} PSS"
    )
    return Figure(text, (Source(H90_ONE_GNN),))


@figure("recipe1_2h_headline")
def headline_2h() -> Figure:
    a = results(H2)
    text = (
        f"**{minutes(a['seconds'])}, {under(a)} under its budget, exit {a['exit']}, a checked submission "
        f"({checked_rows(a)}) on {a['disk_bytes']['data'] / GB:.2f} GB of npz.**"
    )
    return Figure(text, (Source(H2),))


@figure("recipe1_2h_steps")
def steps_2h() -> Figure:
    return Figure(steps_table(results(H2)), (Source(H2),))


@figure("recipe1_2h_disk_scores")
def disk_scores_2h() -> Figure:
    first = results(H90_FIRST)
    text = (
        disk_and_scores(results(H2)) + " An earlier run of the same command with `--budget 90m` ended in "
        f"{minutes(first['seconds'])}, {under(first)} under its budget."
    )
    return Figure(text, (Source(H2), Source(H90_FIRST)))


@figure("budget5m_busy")
def budget5m_busy() -> Figure:
    """`all --budget 5m` on the demo after a first run, one core kept busy by another program."""
    r = results(BUSY_5M)
    total = re.search(r"total (\S+): (\S+) under the budget of (\S+)", r["summary"][-1])
    edges = ("data and plan", "submission and summary")  # `all`'s own work before and after the steps
    ran = [s["step"] for s in r["steps"] if not s["skipped"] and s["step"] not in edges]
    text = (
        f"`all --budget 5m` with {r['busy_cores']} core kept busy by another program: {total[1]}, "
        f"{total[2]} under the budget; ran again: {', '.join(ran)}"
    )
    return Figure(text, (Source(BUSY_5M),))


# `train --model gnn` (3 seeds x 40 steps) and `predict --model gnn --split valid` of the full-scale
# xla:random tree with the `cpu` profile, each alone (bench_steps_memory.py), at three commits
MEMORY_FULL = {
    "now": "memory_full_xla_random.json",
    "with the heap kept between full-scale steps (before this bound)": "memory_full_xla_random_heap_kept.json",
    "before the GNN's pace work": "memory_full_xla_random_pace_before.json",
}


@figure("memory_full_xla_random")
def memory_full_xla_random() -> Figure:
    """The GNN's training and its valid predictions on the full xla:random tree: peak RSS of the
    process tree and seconds, now and at the two commits before, against Recipe 1's 2 GB a step."""
    rows = []
    for what, name in MEMORY_FULL.items():
        train, predict = results(name)
        rows.append(
            [
                what,
                f"{train['peak_rss_gb']:.2f} GB",
                f"{train['seconds']:.0f} s",
                f"{predict['peak_rss_gb']:.2f} GB",
                f"{predict['seconds']:.0f} s",
            ]
        )
    head = ["code", "train gnn: peak RSS", "seconds", "predict gnn valid: peak RSS", "seconds"]
    text = (
        "The `cpu` profile's GNN on the full-scale layout:xla:random tree, each command alone (3 seeds of 40 "
        "steps, validated every 20; then the valid graphs scored):\n\n" + table(head, rows)
    )
    return Figure(text, tuple(Source(n) for n in MEMORY_FULL.values()))
