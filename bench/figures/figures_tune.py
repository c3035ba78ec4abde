"""docs/rank.md's measurements on real programs: calibration checked on held-out measured configs
against the models as trained and calibrated whole, the replayed loop and the cost (bench_tune.py,
bench_tune_cost.py), every number from its results file."""

from __future__ import annotations

import tune_tables as tt
from figure_kit import Figure, Source, figure, results, table

KS = [0, 10, 20, 50]  # from 10 measured configs the default checks the calibration on held-out folds
LAYOUT = ("tune_select_layout_a.json", "tune_select_layout_b.json")  # the two model pairs' programs
LAYOUT_K5 = "tune_select_layout_k5.json"  # below 10: the default, unchecked over the span, at k = 5
TRIED = ("tune_select_trained_first_layout_a.json", "tune_select_trained_first_layout_b.json")
TILE = "tune_select_tile.json"
TILE_LOOP = "tune_select_tile_loop.json"  # the default's loop, and the tile kernels at k = 5
TILE_TRIED = "tune_select_trained_first_tile.json"
EXPLORE = "tune_select_tile_explore.json"
LAYOUT_LOOP = "tune_select_layout_loop.json"  # the default's loop on the real layout programs
MEMBERS = "tune_members_layout.json"  # the GNN of 3 seed members: one fine-tuned, or all three
COST = "tune_cost.json"
WHOLE = "used whole (`--no-select`)"
CHECKED = {  # the runs from 10 measured configs, by what a variant adds to the default calibration
    "": "checked at margin 0.5",
    "m=1": "**checked at margin 1** (the default from k = 10)",
    "reach=inf": "checked at margin 0.5, trusted beyond the span",
}
BELOW_10 = {"": "**the default** (below 10: unchecked, over the span)"}
FIRST = {  # the rule tried first: the trained order unless a calibrated blend beat it
    "": "trained unless beaten at margin 0.5",
    "m=0": "trained unless beaten at margin 0",
    "loc=0": "trained unless beaten at margin 0.5, trusted everywhere",
    "m=0:loc=0": "trained unless beaten at margin 0, trusted everywhere",
}


def labeller(names: dict[str, str]):  # noqa: ANN201
    """A variant's name in a table: `names` by the settings it adds to the default (`m=1`,
    `reach=inf`), WHOLE for `sel=0`."""

    def label(variant: str) -> str:
        if variant == "uncalibrated":
            return variant
        extra = [p for p in variant.split(":")[1:] if p.split("=")[0] not in ("w", "r", "g", "lr", "e")]
        return WHOLE if "sel=0" in extra else names[":".join(extra)]

    return label


def _records(names: tuple[str, ...], kind: str) -> list[dict]:
    return [rec for n in names for rec in results(n)[kind]]


def _sources(names: tuple[str, ...]) -> tuple[Source, ...]:
    return tuple(Source(n) for n in names)


@figure("tune_layout_checked")
def layout_checked() -> Figure:
    records = _records(LAYOUT, "layout")
    text = tt.calibration_table(records, KS, label=labeller(CHECKED), seconds=False)
    k5 = tt.calibration_table(results(LAYOUT_K5)["layout"], [5], label=labeller(BELOW_10), seconds=False)
    return Figure(f"{text}\n\nAt k = 5:\n\n{k5}", (*_sources(LAYOUT), Source(LAYOUT_K5)))


@figure("tune_layout_gains")
def layout_gains() -> Figure:
    text = tt.gain_table(_records(LAYOUT, "layout"), KS, label=labeller(CHECKED))
    k5 = tt.gain_table(results(LAYOUT_K5)["layout"], [5], label=labeller(BELOW_10))
    return Figure(f"{text}\n\n{k5}", (*_sources(LAYOUT), Source(LAYOUT_K5)))


@figure("tune_layout_tried")
def layout_tried() -> Figure:
    text = tt.calibration_table(
        _records(TRIED, "layout"), [0, 5, *KS[1:]], label=labeller(FIRST), seconds=False
    )
    return Figure(text, _sources(TRIED))


@figure("tune_tile_checked")
def tile_checked() -> Figure:
    records, k5 = results(TILE)["tile"], results(TILE_LOOP)["tile"]
    text = tt.gain_table(records, KS, label=labeller(CHECKED))
    text += "\n\nAt k = 5:\n\n" + tt.gain_table(k5, [5], label=labeller(BELOW_10))
    return Figure(text, (Source(TILE), Source(TILE_LOOP)))


@figure("tune_tile_tried")
def tile_tried() -> Figure:
    text = tt.gain_table(results(TILE_TRIED)["tile"], [5, *KS[1:]], label=labeller(FIRST))
    return Figure(text, (Source(TILE_TRIED),))


@figure("tune_tile_loop")
def tile_loop() -> Figure:
    parts = []
    for name, explore in ((TILE_LOOP, "0"), (EXPLORE, "0.4")):
        for model in ("lgbm", "ensemble"):
            parts.append(
                f"**{model}, `explore={explore}`**\n\n" + tt.loop_table(results(name)["tile"], model)
            )
    return Figure("\n\n".join(parts), (Source(TILE_LOOP), Source(EXPLORE)))


@figure("tune_layout_loop")
def layout_loop() -> Figure:
    return Figure(tt.loop_table(results(LAYOUT_LOOP)["layout"], "ensemble"), (Source(LAYOUT_LOOP),))


@figure("tune_layout_members")
def layout_members() -> Figure:
    names = {"": "every seed member fine-tuned", "gm=1": "**the first seed member fine-tuned** (the default)"}
    text = tt.calibration_table(
        results(MEMBERS)["layout"], [5, 10, 20, 50], label=labeller(names), seconds=False
    )
    return Figure(text, (Source(MEMBERS),))


@figure("tune_layout_members_cost")
def layout_members_cost() -> Figure:
    """What fine-tuning one GNN seed member costs against all three: the mean seconds of the GNN's
    calibrations (fine-tuning and scoring) over every program, k and draw of the same run."""
    secs: dict[bool, list[float]] = {True: [], False: []}
    for program in results(MEMBERS)["layout"]:
        for r in program["calibration"]:
            if r["model"] == "gnn" and r["variant"] != "uncalibrated":
                secs[r["variant"].endswith(":gm=1")].append(r["s"])
    one, every = (sum(secs[k]) / len(secs[k]) for k in (True, False))
    text = (
        f"cost {one / every:.0%} of three members' ({one:.1f} s against {every:.1f} s a calibration, "
        "on average)"
    )
    return Figure(text, (Source(MEMBERS),))


@figure("tune_cost")
def cost() -> Figure:
    r = results(COST)
    names = ("rank", "rank --measured", "rank --measured --no-select")
    rows = [[f"`{n}`", f"{r[n]['seconds']:.1f}", f"{r[n]['peak_rss_gb']:.2f} GB"] for n in names]
    head = [f"`rank` ({r['configs']} configs, {r['k']} measured, {r['training_rows']} training rows shipped)"]
    head += ["seconds", "peak RSS"]
    if "ratio" in r:  # measured side by side with an earlier commit, in alternating pairs
        head += [f"seconds at commit {r['against'][:7]}", "this commit's time / its, per pair"]
        for row, n in zip(rows, names, strict=True):
            row += [f"{r[f'against {n}']['seconds']:.1f}", ", ".join(f"{x:.2f}" for x in r["ratio"][n])]
    return Figure(table(head, rows), (Source(COST),))
