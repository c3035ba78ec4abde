"""Figures of the CPU profile's GNN recipe, change by change: bench/runs/bench_budget.py's runs of 10
minutes per collection on full-scale synthetic data (bench/results/budget.json, one record per run),
quoted in docs/validation.md and docs/models.md."""

from __future__ import annotations

import statistics

from figure_kit import Figure, Source, figure, mean_std, results, signed, span, table

BUDGET = "budget.json"
XLA, NLP = "layout:xla:random", "layout:nlp:default"
# the rows each collection's verdict compares, run back to back within each seed (the machine's
# speed drifts between batches of runs, and a 10-minute run's steps with it)
PAIRS = {XLA: ("xla-speed", "before-speed"), NLP: ("shipped-paired", "before-paired")}
# the docs' table: what each row changes, and its --rows name; the bold cells: the profile as measured
RECIPES = [
    (
        "peak rate 1e-3, which stays near its peak for the whole 10 minutes (the cosine spans `max_steps`, which 10 minutes never reach); patience may stop a run at any time",
        "before",
    ),
    ("the same at peak rate 2e-3: the control that tells the rate from the decay", "before+lr2"),
    ("warm-up and cosine over the minutes available, peak 2e-3", "schedule"),
    ("and no early stop before half the budget (`gnn.min_train_share = 0.5`)", "early-stop"),
    ("and the tile-aware inputs on both collections", "features"),
    (
        "`early-stop` with the tile-aware inputs on nlp:default only, and no early stop at all (`min_train_share = 1`)",
        "per-collection",
    ),
    ("the first row, run back to back with the next one within each seed", "before-paired"),
    ("`per-collection`, run back to back with the row above", "shipped-paired"),
    ("the first row, run back to back with the next one within each seed", "before-speed"),
    (
        "`per-collection` with more steps in xla:random's minutes: its layers kept for the backward pass, a validation every 100 steps instead of 50",
        "xla-speed",
    ),
]
BOLD = {("xla-speed", XLA), ("shipped-paired", NLP)}


def runs(row: str, collection: str) -> list[dict]:
    """A row's runs on a collection, by seed."""
    out = [r for r in results(BUDGET) if r["row"] == row and r["collection"] == collection]
    return sorted(out, key=lambda r: r["seed"])


def scores(row: str, collection: str) -> list[float]:
    return [r["score"] for r in runs(row, collection)]


def steps(row: str, collection: str) -> list[int]:
    return [r["model"]["steps_run"] for r in runs(row, collection)]


def source(*rows: str) -> Source:
    """budget.json's records of these rows."""
    wanted = set(rows)
    return Source(BUDGET, records=lambda r: r["row"] in wanted)


def cell(row: str, collection: str) -> str:
    s = scores(row, collection)
    if not s:
        return "-"
    value = mean_std(s) if len(s) > 1 else f"{s[0]:.4f}"
    value = f"**{value}**" if (row, collection) in BOLD else value
    return f"{value} ({len(s)}, {statistics.fmean(steps(row, collection)):.0f} steps)"


@figure("budget_seed_spread")
def seed_spread() -> Figure:
    """How far the GNN's seeds of one recipe land apart: the largest range (highest minus lowest
    valid tau) over the rows with more than one seed, per collection (LightGBM's rows left out)."""
    spread = {}
    for collection in (XLA, NLP):
        rows = {r["row"] for r in results(BUDGET) if r["collection"] == collection}
        ranges = [
            max(v) - min(v)
            for row in rows
            if not row.startswith("lgbm") and len(v := scores(row, collection)) > 1
        ]
        spread[collection] = max(ranges)
    text = (
        f"the seeds of one recipe land up to {spread[XLA]:.3f} tau apart on xla:random and "
        f"{spread[NLP]:.3f} on nlp:default at 10 minutes per collection"
    )
    return Figure(text, (Source(BUDGET, records=lambda r: not r["row"].startswith("lgbm")),))


@figure("budget_recipe_table")
def recipe_table() -> Figure:
    rows = [[what, f"`{row}`", cell(row, XLA), cell(row, NLP)] for what, row in RECIPES]
    header = ["recipe", "`--rows`", XLA, NLP]
    return Figure(table(header, rows), (source(*(row for _, row in RECIPES)),))


def gains() -> dict[str, list[float]]:
    """Per collection, each seed's gain of the profile's row over the row run back to back with it."""
    return {
        c: [a - b for a, b in zip(scores(row, c), scores(base, c), strict=True)]
        for c, (row, base) in PAIRS.items()
    }


@figure("budget_gain")
def gain() -> Figure:
    """The profile's gain, one line (docs/models.md's training section)."""
    g = {c: statistics.fmean(v) for c, v in gains().items()}
    text = (
        f"{signed(g[XLA])} tau on xla:random and {signed(g[NLP])} on nlp:default "
        f"({signed(statistics.fmean(g.values()))} on the mean)"
    )
    return Figure(text, (source(*(r for pair in PAIRS.values() for r in pair)),))


def per_seed(values: list[float]) -> str:
    return ", ".join(signed(v) for v in values)


def above_every(row: str, base: str, collection: str) -> str:
    """`every seed above every seed of the first row` where that holds."""
    if min(scores(row, collection)) > max(scores(base, collection)):
        return ": every seed above every seed of the first row"
    return ""


@figure("budget_reading")
def reading() -> Figure:
    g = gains()
    xla_row, xla_base = PAIRS[XLA]
    es, rerun = scores("early-stop", XLA), scores("early-stop-rerun", XLA)
    late = [a - b for a, b in zip(es, rerun, strict=False)]
    text = f"""
- **The `cpu` profile gains {signed(statistics.fmean(statistics.fmean(v) for v in g.values()))} tau on the mean of both
  collections** over the first row, each collection run back to back with it, seed by seed. On
  xla:random {signed(statistics.fmean(g[XLA]))} (per seed {per_seed(g[XLA])}{above_every(xla_row, xla_base, XLA)}).
  On nlp:default {signed(statistics.fmean(g[NLP]))} (per seed {per_seed(g[NLP])}).
- **Only rows run back to back are compared.** The machine's speed drifted between batches of
  runs, and a 10-minute run's steps with it. The same recipe (`early-stop`) trained
  {span(steps("early-stop", XLA)[: len(rerun)], "{:.0f}")} steps on xla:random in one batch and
  {span(steps("early-stop-rerun", XLA), "{:.0f}")} in a later one (`early-stop-rerun`), and scored
  {span(late)} lower there.
- **Most of the gain on xla:random is steps.** `{xla_row}` trained {span(steps(xla_row, XLA), "{:.0f}")}
  steps where the first row, beside it, trained {span(steps(xla_base, XLA), "{:.0f}")}. Its training peaks at
  {span(r["train_peak_rss_gb"] for r in runs(xla_row, XLA))} GB instead of
  {span(r["train_peak_rss_gb"] for r in runs(xla_base, XLA))} GB."""
    return Figure(text, (source(*PAIRS[XLA], *PAIRS[NLP], "early-stop", "early-stop-rerun"),))


@figure("budget_reading_more")
def reading_more() -> Figure:
    before, lr2, es = (runs(r, XLA)[0]["score"] for r in ("before", "before+lr2", "early-stop"))
    stopped = next(r for r in runs("before", NLP) if r["model"]["stopped_by"] == "patience")
    m = stopped["model"]
    feat = [a - b for a, b in zip(scores("per-collection", NLP), scores("early-stop", NLP), strict=True)]
    fewer = [1 - a / b for a, b in zip(steps("per-collection", NLP), steps("early-stop", NLP), strict=True)]
    xla_feat = [a - b for a, b in zip(scores("features", XLA), scores("early-stop", XLA), strict=True)]
    lower = sum(d < 0 for d in xla_feat)
    text = f"""
- **The higher peak rate gives most of the early gain.** At seed 0, the rate alone (`before+lr2`)
  takes {(lr2 - before) / (es - before):.0%} of `early-stop`'s gain on xla:random.
- **Early stopping fired on noise.** In the first row, patience stopped one nlp:default run after
  {m["steps_run"]} steps ({m["seconds"]:.0f} s), on a best from step {m["best_step"]}.
- **The tile-aware inputs help nlp:default and cost xla:random steps.** On nlp:default, seed by
  seed, {per_seed(feat)} (`per-collection` against `early-stop`), with {span((100 * f for f in fewer), "{:.0f}")}%
  fewer steps. On xla:random (`features` against `early-stop`) they were lower on {lower} of
  {len(xla_feat)} seeds ({per_seed(xla_feat)})."""
    sources = (source("before", "before+lr2", "early-stop", "per-collection", "features"),)
    return Figure(text, sources)


@figure("budget_mxu")
def mxu() -> Figure:
    """LightGBM's MXU columns on the two collections (fixed rounds: the machine's speed does not enter)."""
    parts, sides = [], []
    for c in (XLA, NLP):
        off, on = scores("lgbm", c), scores("lgbm+mxu", c)
        parts.append(f"{c.split(':', 1)[1]} {mean_std(off)} -> {mean_std(on)}")
        sides.append(
            all(a > b for a, b in zip(on, off, strict=True))
            or all(a < b for a, b in zip(on, off, strict=True))
        )
    same = ", every seed on the same side" if all(sides) else ""
    return Figure(", ".join(parts) + same, (source("lgbm", "lgbm+mxu"),))


@figure("budget_tile_inputs")
def tile_inputs() -> Figure:
    """docs/models.md: the tile-aware inputs at the `cpu` profile's 10 minutes."""
    nlp = [a - b for a, b in zip(scores("per-collection", NLP), scores("early-stop", NLP), strict=True)]
    pairs = list(zip(scores("early-stop", XLA), scores("features", XLA), strict=True))
    lower = sum(b < a for a, b in pairs)
    text = (
        f"they raised nlp:default from {mean_std(scores('early-stop', NLP))} to "
        f"{mean_std(scores('per-collection', NLP))} ({len(nlp)} seeds; seed by seed {per_seed(nlp)}). "
        f"They lowered layout:xla:random on {lower} of {len(pairs)} seeds ("
        + ", ".join(f"{a:.4f} -> {b:.4f}" for a, b in pairs)
        + ")"
    )
    return Figure(text, (source("early-stop", "per-collection", "features"),))
