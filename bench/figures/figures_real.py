"""Figures of the real measurements (bench/runs/bench_real.py on the real sample): the tables and
readings of docs/validation.md and their echoes in docs/models.md. Each results file holds each
model's score per seed; the figures are means ± population std over seeds [min, max]."""

from __future__ import annotations

import statistics
from collections.abc import Iterable

import real_table
from figure_kit import Figure, Source, figure, mean_std, results, signed, span, table

MEAN = "real_mean.json"  # every model at the defaults, both halves merged
LAYOUT_MEAN, TILE_MEAN = "real_layout_mean.json", "real_tile_mean.json"  # its two halves
SUM_LAYOUT, SUM_TILE = "real_layout_issue25.json", "real_tile_issue25.json"  # the same, gnn.aggr = "sum"
W64 = ("real_layout_w64.json", "real_layout_w64_s345.json")  # tile-aware inputs off, seeds 0-2, 3-5
W64_ON = ("real_layout_w64_features.json", "real_layout_w64_features_s345.json")  # and on
NAMES = {"gnn": "the GNN", "lgbm": "LightGBM", "ensemble": "the ensemble"}


def per_seed(name: str, model: str, subset: bool = False) -> list[float]:
    """A model's score per seed: layout tau (on all configs, or on the official subset) or the tile score."""
    data = results(name)
    if "layout" in data:
        return data["layout"]["per_seed"]["subset" if subset else "all"][model]
    return data["tile"]["per_seed"][model]


def ranged(values: list[float]) -> str:
    """`0.1765 ± 0.0267 [0.1567, 0.2142]`."""
    return f"{mean_std(values)} [{min(values):.4f}, {max(values):.4f}]"


def mean(values: list[float]) -> float:
    return statistics.fmean(values)


def minutes(name: str) -> str:
    return f"{results(name)['seconds'] / 60:.1f} min"


@figure("real_mean_intro")
def real_mean_intro() -> Figure:
    text = f"{minutes(LAYOUT_MEAN)} for the layout half, {minutes(TILE_MEAN)} for the tile half"
    return Figure(text, (Source(LAYOUT_MEAN), Source(TILE_MEAN)))


@figure("real_mean_table")
def real_mean_table() -> Figure:
    """bench_real.py's own table of the merged run, the ensemble first (real_table.table)."""
    return Figure(real_table.table(results(MEAN), results(MEAN)["models"]), (Source(MEAN),))


def above_both(ens: list[float], a: list[float], b: list[float]) -> int:
    """On how many seeds the ensemble scored above both members."""
    return sum(e > max(x, y) for e, x, y in zip(ens, a, b, strict=True))


@figure("real_mean_read")
def real_mean_read() -> Figure:
    lg, gn, en = (per_seed(MEAN, m) for m in ("lgbm", "gnn", "ensemble"))
    sub = [per_seed(MEAN, m, subset=True) for m in ("ensemble", "lgbm", "gnn")]
    n = len(en)
    tile = {
        m: mean(per_seed(TILE_MEAN, m))
        for m in ("lgbm", "gnn", "heuristic", "ensemble", "ensemble_fold_fitted")
    }
    best = max(("lgbm", "gnn"), key=tile.get)
    beat = [m for m in ("lgbm", "gnn", "ensemble") if tile[m] > tile["heuristic"]]
    text = (
        f"Read: on the real layout graph the GNN ranks at {mean(gn):.3f} tau, LightGBM at {mean(lg):.3f}. The "
        f"equal-weight ensemble of the two is **above both members on {above_both(en, lg, gn)} of {n} seeds** "
        f"on all configs ({span(en, '{:.3f}')}) and on {above_both(*sub)} of {n} on the official subset: the two "
        f"make errors that do not coincide. On the 15 tile kernels the best member is {NAMES[best]} "
        f"({tile[best]:.4f}); the ensemble scores {tile['ensemble']:.4f} with equal weights and "
        f"{tile['ensemble_fold_fitted']:.4f} with weights fitted on the other folds. The untrained heuristic "
        f"(larger tiles first) scores {tile['heuristic']:.4f} there, LightGBM {tile['lgbm']:.4f}: on these "
        f"kernels {' and '.join(NAMES[m] for m in beat) or 'no model'} beat the rule. The circular row shows how much a fit on the scored graphs "
        f'flatters. With `gnn.aggr = "sum"`, the default before this run, the same bench gave the GNN '
        f"{mean(per_seed(SUM_LAYOUT, 'gnn')):.4f} and the ensemble {mean(per_seed(SUM_LAYOUT, 'ensemble')):.4f} "
        f"on layout, {mean(per_seed(SUM_TILE, 'gnn')):.4f} and {mean(per_seed(SUM_TILE, 'ensemble')):.4f} on tile."
    )
    return Figure(text, (Source(MEAN), Source(TILE_MEAN), Source(SUM_LAYOUT), Source(SUM_TILE)))


@figure("real_baseline")
def real_baseline() -> Figure:
    """docs/models.md: the GNN against the official baseline on the real measurements."""
    gn, bl = mean(per_seed(MEAN, "gnn")), mean(per_seed(MEAN, "baseline"))
    tg, tb = mean(per_seed(TILE_MEAN, "gnn")), mean(per_seed(TILE_MEAN, "baseline"))
    text = (
        f"the GNN ranks the unseen layout graph at tau {gn:.3f} against the baseline's {bl:.3f}, and the 15 "
        f"tile kernels at {tg:.3f} against {tb:.3f}"
    )
    return Figure(text, (Source(MEAN), Source(TILE_MEAN)))


def pooled(names: tuple[str, ...], model: str, subset: bool = False) -> list[float]:
    return [v for n in names for v in per_seed(n, model, subset)]


@figure("real_tile_inputs_table")
def tile_inputs_table() -> Figure:
    rows = []
    for label, names in (("off (the defaults)", W64), ("on", W64_ON)):
        lgbm = ranged(per_seed(names[0], "lgbm")).split(" [")[0]
        rows.append(
            [label, "0-2", ranged(per_seed(names[0], "gnn")), ranged(per_seed(names[0], "gnn", True)), lgbm]
        )
    for label, names in (("off (the defaults)", W64), ("on", W64_ON)):
        seeds = [s for n in names for s in results(n)["seeds"]]
        rows.append(
            [
                label,
                f"{min(seeds)}-{max(seeds)}",
                ranged(pooled(names, "gnn")),
                ranged(pooled(names, "gnn", True)),
                "-",
            ]
        )
    header = ["inputs", "seeds", "GNN, all configs", "GNN, official subset", "LightGBM, all configs"]
    return Figure(table(header, rows), tuple(Source(n) for n in (*W64, *W64_ON)))


@figure("real_tile_inputs_reading")
def tile_inputs_reading() -> Figure:
    gain = [a - b for a, b in zip(pooled(W64_ON, "gnn"), pooled(W64, "gnn"), strict=True)]
    sub = [a - b for a, b in zip(pooled(W64_ON, "gnn", True), pooled(W64, "gnn", True), strict=True)]
    mxu = [a - b for a, b in zip(per_seed(W64_ON[0], "lgbm"), per_seed(W64[0], "lgbm"), strict=True)]
    n = len(gain)
    text = f"""
- **The tile-aware inputs raise the GNN on {sum(g > 0 for g in gain)} of {n} seeds**: {", ".join(signed(g) for g in gain)}
  on all configs ({signed(mean(gain))} on the mean of {n} seeds). On the official subset the gain is
  {signed(mean(sub))}, on {sum(g > 0 for g in sub)} seeds of {n}.
- **LightGBM's MXU columns lower it on {sum(m < 0 for m in mxu)} of {len(mxu)} seeds** ({", ".join(signed(m) for m in mxu)}).
- Seeds 3-5 of the GNN without the inputs ({span(per_seed(W64[1], "gnn"), "{:.4f}")}) show how wide its seed
  spread is on this graph: three seeds do not pin it."""
    return Figure(text, tuple(Source(n) for n in (*W64, *W64_ON)))


@figure("real_tile_inputs_models")
def tile_inputs_models() -> Figure:
    """docs/models.md: the tile-aware inputs on the real unet graph, 6 seeds."""
    off, on = pooled(W64, "gnn"), pooled(W64_ON, "gnn")
    higher = sum(a > b for a, b in zip(on, off, strict=True))
    text = f"they raised the GNN on {higher} of {len(on)} seeds, from {mean_std(off)} to {mean_std(on)}"
    return Figure(text, tuple(Source(n) for n in (*W64, *W64_ON)))


@figure("real_zscore_tile")
def zscore_tile() -> Figure:
    """docs/models.md: the tile ensemble with z-scores at the default GNN, against the GNN alone."""
    en, gn = mean(per_seed(TILE_MEAN, "ensemble")), mean(per_seed(TILE_MEAN, "gnn"))
    return Figure(
        f"the z-score ensemble scores {en:.4f} on the real kernels, the GNN alone {gn:.4f}",
        (Source(TILE_MEAN),),
    )


# the `cpu` profile's values on the real layout pair, one value changed per row (bench/LOG.md names the
# commands); the bold row is the profile as it trains now
CPU_ROWS = [
    ("LightGBM", "without the MXU columns (the profile now)", "real_layout_cpu_nomxu.json", "lgbm"),
    ("LightGBM", "with the MXU columns (the profile before)", "real_layout_cpu_mxu.json", "lgbm"),
    (
        "GNN",
        "one seed of 300 steps, no dropout (the profile before)",
        "real_layout_cpu_gnn_1x300.json",
        "gnn",
    ),
    (
        "GNN",
        "**three seeds of 100 steps, averaged** (the profile now)",
        "real_layout_cpu_gnn_3x100.json",
        "gnn",
    ),
    ("GNN", "one seed, dropout 0.1", "real_layout_cpu_gnn_dropout01.json", "gnn"),
    ("GNN", "three seeds of 100 steps, dropout 0.1", "real_layout_cpu_gnn_3x100_dropout01.json", "gnn"),
    ("GNN", "one seed, peak rate 1e-3", "real_layout_cpu_gnn_lr1e-3.json", "gnn"),
]


@figure("real_cpu_profile_table")
def cpu_profile_table() -> Figure:
    rows = []
    for model, recipe, name, m in CPU_ROWS:
        cells = [mean_std(per_seed(name, m)), ", ".join(f"{v:.3f}" for v in per_seed(name, m))]
        cells.append(mean_std(per_seed(name, m, subset=True)))
        if recipe.startswith("**"):
            cells = [f"**{cells[0]}**", cells[1], f"**{cells[2]}**"]
        rows.append([model, recipe, *cells])
    header = ["model", "recipe", "all configs", "seeds", "official subset"]
    return Figure(table(header, rows), tuple(Source(name) for _, _, name, _ in CPU_ROWS))


def versus(a: str, b: str, model: str) -> tuple[float, int, int]:
    """Row a against row b: the gain on the mean, and on how many seeds a scored higher, of how many."""
    x, y = per_seed(a, model), per_seed(b, model)
    return mean(x) - mean(y), sum(p > q for p, q in zip(x, y, strict=True)), len(x)


def within(a: str, b: str) -> str:
    """`within` or `beyond` the larger of two rows' seed spreads, for the difference of their means."""
    x, y = per_seed(a, "gnn"), per_seed(b, "gnn")
    return "within" if abs(mean(x) - mean(y)) <= max(statistics.pstdev(x), statistics.pstdev(y)) else "beyond"


@figure("real_cpu_profile_reading")
def cpu_profile_reading() -> Figure:
    f = {
        key: name
        for key, (_, _, name, _) in zip(
            ("no", "mxu", "1x300", "3x100", "do", "3x100do", "lr"), CPU_ROWS, strict=True
        )
    }
    mxu, mxu_up, n = versus(f["mxu"], f["no"], "lgbm")
    seeds, seeds_up, _ = versus(f["3x100"], f["1x300"], "gnn")
    long_do, _, _ = versus(f["do"], f["1x300"], "gnn")
    short_do, _, _ = versus(f["3x100do"], f["3x100"], "gnn")
    lr, lr_up, _ = versus(f["lr"], f["1x300"], "gnn")
    text = f"""
- **The MXU columns come out**: lower on {n - mxu_up} seeds of {n} and on the mean ({signed(mxu)}), and lower on
  {sum(d < 0 for d in (a - b for a, b in zip(per_seed(W64_ON[0], "lgbm"), per_seed(W64[0], "lgbm"), strict=True)))} of 3 seeds at `bench_real`'s own setting (above). Both profiles keep them off.
- **Three short seeds against one long one: higher on {seeds_up} of {n} seeds** ({signed(seeds)}): one 10-minute
  run is a gamble on real graphs. The profile trains three, each with a third of the time.
- **Dropout depends on the length**: 0.1 moves one 300-step run by {signed(long_do)} and three 100-step
  runs by {signed(short_do)}. With three seeds the profile keeps none.
- **The peak rate 2e-3 stays**: 1e-3 scored higher on {lr_up} seeds and lower on {n - lr_up},
  {signed(lr)} on the mean, {within(f["lr"], f["1x300"])} the spread of either row."""
    return Figure(
        text, tuple(Source(name) for _, _, name, _ in CPU_ROWS) + (Source(W64[0]), Source(W64_ON[0]))
    )


# a default chosen on synthetic data, its alternative on the real pair: (default, alternative,
# default's file and model, alternative's file and model, verdict)
DEFAULT_ROWS = [
    (
        '`gnn.aggr = "sum"` (layout)',
        '`"mean"`',
        (SUM_LAYOUT, "gnn"),
        ("real_layout_gnn_aggr_mean.json", "gnn"),
        "now `mean`",
    ),
    (
        '`gnn.aggr = "sum"` (layout, `cpu` profile: 3 x 100 steps)',
        '`"mean"`',
        ("real_layout_cpu_gnn_3x100.json", "gnn"),
        ("real_layout_cpu_gnn_3x100_mean.json", "gnn"),
        "now `mean`",
    ),
    (
        '`gnn.aggr = "sum"` (tile)',
        '`"mean"`',
        (SUM_TILE, "gnn"),
        ("real_tile_gnn_aggr_mean.json", "gnn"),
        "`mean`: not lower",
    ),
    (
        '`gnn.loss = "auto"` (ListMLE on layout)',
        "hinge",
        (SUM_LAYOUT, "gnn"),
        ("real_layout_gnn_hinge.json", "gnn"),
        "stays",
    ),
    (
        "`lgbm.truncation_level = 0` (all pairs on layout)",
        "64",
        (SUM_LAYOUT, "lgbm"),
        ("real_layout_lgbm_trunc64.json", "lgbm"),
        "stays",
    ),
]


def seeds_said(alt: list[float], default: list[float]) -> str:
    """`, every seed higher` / `, every seed lower` where every seed of the alternative agrees."""
    if all(a > d for a, d in zip(alt, default, strict=True)):
        return ", every seed higher"
    if all(a < d for a, d in zip(alt, default, strict=True)):
        return ", every seed lower"
    return ""


@figure("real_defaults_table")
def defaults_table() -> Figure:
    rows = []
    for default, alt, (fd, md), (fa, ma), verdict in DEFAULT_ROWS:
        d, a = per_seed(fd, md), per_seed(fa, ma)
        cd, ca = mean_std(d), mean_std(a)
        cd, ca = (f"**{cd}**", ca) if mean(d) > mean(a) else (cd, f"**{ca}**")
        rows.append([default, alt, cd, ca + seeds_said(a, d), verdict])
    header = ["default", "alternative", "real score of the default", "of the alternative", "verdict"]
    sources = {Source(f) for _, _, (f, _), _, _ in DEFAULT_ROWS} | {
        Source(f) for _, _, _, (f, _), _ in DEFAULT_ROWS
    }
    return Figure(table(header, rows), tuple(sorted(sources, key=lambda s: s.name)))


AS_TRAINED = (LAYOUT_MEAN, "real_layout_s345.json")  # bench_real.py --only layout: seeds 0-2, 3-5
PRETRAINED = "real_layout_pretrained.json"  # bench_pretrain.py: the GNN started from a synthetic-tree model
PRETRAIN_RUNS = {  # the runs of one pretrained model each: its steps -> their results files
    600: (PRETRAINED, "real_layout_pretrained_s345.json"),
    2000: ("real_layout_pretrained_2000.json",),
}


def by_seed(files: tuple[str, ...], model: str, subset: bool = False) -> dict[int, float]:
    """A model's layout tau per bench seed over several results files."""
    out: dict[int, float] = {}
    for f in files:
        out.update(zip(results(f)["seeds"], per_seed(f, model, subset), strict=True))
    return out


def against(alt: dict[int, float], base: dict[int, float]) -> str:
    """`0.1925 ± 0.0202 (2 of 3 seeds higher)`: against the same seeds of `base`."""
    up = sum(v > base[k] for k, v in alt.items())
    return f"{mean_std(alt.values())} ({up} of {len(alt)} seeds higher)"


def seeds_named(seeds: Iterable[int]) -> str:
    s = sorted(seeds)
    return f"{s[0]}-{s[-1]}" if s == list(range(s[0], s[-1] + 1)) else " ".join(map(str, s))


def pretrain_models(files: tuple[str, ...]) -> list[str]:
    return [
        m for m in ("gnn", "ensemble") if all(m in results(f)["layout"]["per_seed"]["all"] for f in files)
    ]


@figure("real_pretrain_table")
def pretrain_table() -> Figure:
    rows = []
    for m in ("gnn", "ensemble"):
        base = [by_seed(AS_TRAINED, m, sub) for sub in (False, True)]
        rows.append([NAMES[m], "new weights", seeds_named(base[0]), *(mean_std(b.values()) for b in base)])
        for steps, files in PRETRAIN_RUNS.items():
            if m in pretrain_models(files):
                alt = [by_seed(files, m, sub) for sub in (False, True)]
                start = f"pretrained {steps} steps"
                rows.append(
                    [
                        NAMES[m],
                        start,
                        seeds_named(alt[0]),
                        *(against(a, b) for a, b in zip(alt, base, strict=True)),
                    ]
                )
    header = ["model", "the real training starts from", "seeds", "tau, all configs", "tau, official subset"]
    names = sorted({*AS_TRAINED, *(f for files in PRETRAIN_RUNS.values() for f in files)})
    return Figure(table(header, rows), tuple(Source(n) for n in names))


@figure("real_pretrain_read")
def pretrain_read() -> Figure:
    rand = per_seed(LAYOUT_MEAN, "random")
    said = []
    for steps, files in PRETRAIN_RUNS.items():
        p = results(files[0])["pretraining"]
        alone = p["zero_shot"]["all"]
        verdict = "no better than random" if alone <= max(rand) else "above random"
        moves = []
        for m in pretrain_models(files):
            alt, base = by_seed(files, m), by_seed(AS_TRAINED, m)
            move = statistics.fmean(alt.values()) - statistics.fmean(base[k] for k in alt)
            spread = max(statistics.pstdev(alt.values()), statistics.pstdev(base[k] for k in alt))
            where = "within" if abs(move) <= spread else "beyond"
            moves.append(f"{NAMES[m]} {signed(move, 4)} on the mean, {where} the seed spread ({spread:.4f})")
        said.append(
            f"{'After' if said else 'after'} {steps} steps on the {p['scale']}-scale tree, the model alone ranks the unseen real graph "
            f"at {alone:.4f} tau, {verdict} ({statistics.fmean(rand):.4f}). As the start, it moved "
            + " and ".join(moves)
            + "."
        )
    text = "Read: " + " ".join(said) + " One pretrained model (seed 0) starts every seed of its rows."
    names = sorted({LAYOUT_MEAN, *AS_TRAINED, *(f for files in PRETRAIN_RUNS.values() for f in files)})
    return Figure(text, tuple(Source(n) for n in names))
