"""docs/models.md's "Defaults and their evidence": each default, what the real sample says of it
(bench_real.py, bench_recipe_real.py) and what the synthetic data adds (bench_budget.py,
bench_recipe.py, bench_gnn.py, bench_gst.py), every number from its results file."""

from __future__ import annotations

import statistics

import figures_budget as fb
import figures_models as fm
import figures_real as fr
from figure_kit import Figure, Source, figure, mean_std, results, signed, table

GNN_DEMO = "gnn_cpu.json"  # bench_gnn.py's ablation on demo data of an earlier generator
LAYOUTS = ("layout:xla:default", "layout:xla:random", "layout:nlp:default", "layout:nlp:random")
CPU = {
    key: row[2]
    for key, row in zip(("no", "mxu", "1x300", "3x100", "do", "3x100do", "lr"), fr.CPU_ROWS, strict=True)
}
CPU_MEAN = "real_layout_cpu_gnn_3x100_mean.json"


def vs(a: list[float], b: list[float], labels: tuple[str, str] = ("", "")) -> str:
    """`mean 0.1765 ± 0.0267 against sum 0.0992 ± 0.0064, every seed higher`."""
    first, second = (f"{label} " if label else "" for label in labels)
    return f"{first}{mean_std(a)} against {second}{mean_std(b)}{fr.seeds_said(a, b)}"


def inside(moves: list[float], spread: float) -> str:
    """`inside` or `beyond` the base's spread, for every move."""
    return "inside" if all(abs(m) < spread for m in moves) else "not all inside"


def demo(variant: str, collection: str) -> float:
    return results(GNN_DEMO)["ablation"][variant][collection]


def demo_worse(variant: str) -> int:
    """On how many demo layout collections an ablation scored below the demo budget's GNN."""
    return sum(demo(variant, c) < demo("demo budget", c) for c in LAYOUTS)


def rows_gnn() -> list[list[str]]:
    g, s = fr.per_seed, fr.SUM_LAYOUT
    labels = ("mean", "sum")
    aggr = f"layout pair, `bench_real`'s setting (width 64, 300 steps): {vs(g('real_layout_gnn_aggr_mean.json', 'gnn'), g(s, 'gnn'), labels)}"
    aggr += (
        f"; at the `cpu` profile (3 x 100 steps): {vs(g(CPU_MEAN, 'gnn'), g(CPU['3x100'], 'gnn'), labels)}"
    )
    tile_mean, tile_sum = g("real_tile_gnn_aggr_mean.json", "gnn"), g(fr.SUM_TILE, "gnn")
    lower = "lower" if statistics.fmean(tile_mean) < statistics.fmean(tile_sum) else "not lower"
    x = "layout:xla:default"
    return [
        [
            '`gnn.aggr = "mean"` (was `sum`)',
            aggr,
            f"`sum` scored higher on {demo_worse('gnn.aggr=mean')} of 4 demo layout collections with an earlier "
            f"generator (xla:default {demo('demo budget', x):.4f} -> {demo('gnn.aggr=mean', x):.4f} for mean)",
        ],
        [
            '`gnn.aggr = "mean"` on tile',
            f"tile kernels (3 folds): {vs(tile_mean, tile_sum, labels)}: {lower}",
            f"`mean` on demo tile: {demo('demo budget', 'tile:xla'):.4f} -> {demo('gnn.aggr=mean', 'tile:xla'):.4f}",
        ],
        [
            '`gnn.loss = "auto"` (ListMLE for layout, hinge for tile)',
            f"layout pair: {vs(g('real_layout_gnn_hinge.json', 'gnn'), g(s, 'gnn'), ('hinge', 'ListMLE'))}",
            f"hinge lowered {demo_worse('gnn.loss=hinge')} of 4 demo layout collections",
        ],
    ]


def rows_recipe() -> list[list[str]]:
    real = results(fm.RECIPE_REAL)["rows"]
    demo_rows, base = fm.rows(), fm.rows()[fm.BASE][fm.LAYOUT]
    moved = [
        demo_rows[v][fm.LAYOUT]["mean"] - base["mean"]
        for v in ("gnn.standardize=true", "gnn.warmup_steps=20")
    ]
    att_real = real["recipe+attention"]["all"]["mean"] - real["recipe"]["all"]["mean"]
    att_demo = demo_rows["gnn.layer_attention=true"][fm.LAYOUT]["mean"] - base["mean"]
    return [
        [
            "a warm-up, `gnn.standardize = true`",
            f"layout pair: the two together raised the GNN from {real['today']['all']['mean']:.4f} to "
            f"{real['recipe']['all']['mean']:.4f} tau",
            f"on demo xla:default {', '.join(signed(m) for m in moved)}, {inside(moved, base['std'])} the base's "
            f"spread ({base['std']:.3f})",
        ],
        [
            "`gnn.layer_attention` on for the default collections",
            f"layout pair: {signed(att_real)}",
            f"{signed(att_demo)} on demo xla:default; `layout:nlp:default` on the write-ups' evidence alone",
        ],
    ]


def rows_inputs() -> list[list[str]]:
    off, on = fr.pooled(fr.W64, "gnn"), fr.pooled(fr.W64_ON, "gnn")
    g = fr.per_seed
    nlp = [fb.scores(r, fb.NLP) for r in ("early-stop", "per-collection")]
    xla = list(zip(fb.scores("early-stop", fb.XLA), fb.scores("features", fb.XLA), strict=True))
    lgbm = [statistics.fmean(fb.scores(r, c)) for c in (fb.XLA, fb.NLP) for r in ("lgbm", "lgbm+mxu")]
    return [
        [
            "`gnn.tile_features`, `gnn.dim_features`: off in the `gpu` profile, on for layout in `cpu`",
            f"layout pair at width 64, 300 steps: {mean_std(off)} -> {mean_std(on)} ({len(on)} seeds{fr.seeds_said(on, off)}); "
            "not measured at the `gpu` profile's width and length",
            f"at 10 minutes: nlp:default {statistics.fmean(nlp[0]):.4f} -> {statistics.fmean(nlp[1]):.4f} ({len(nlp[1])} "
            f"seeds); xla:random lower on {sum(b < a for a, b in xla)} of {len(xla)} seeds (fewer steps)",
        ],
        [
            "`features.mxu_columns = false` in every profile (the `cpu` profile had it on for xla:random)",
            f"layout pair: {mean_std(g(fr.W64[0], 'lgbm'))} -> {mean_std(g(fr.W64_ON[0], 'lgbm'))} with them"
            f"{fr.seeds_said(g(fr.W64_ON[0], 'lgbm'), g(fr.W64[0], 'lgbm'))}; at the `cpu` profile's 500 configs per "
            f"graph {mean_std(g(CPU['no'], 'lgbm'))} -> {mean_std(g(CPU['mxu'], 'lgbm'))}",
            f"xla:random {lgbm[0]:.4f} -> {lgbm[1]:.4f}, nlp:default {lgbm[2]:.4f} -> {lgbm[3]:.4f} at the `cpu` profile",
        ],
        [
            "`lgbm.truncation_level = 0` (every pair for layout)",
            f"layout pair: {vs(g('real_layout_lgbm_trunc64.json', 'lgbm'), g(fr.SUM_LAYOUT, 'lgbm'), ('64', '0'))}",
            "better valid tau on the demo",
        ],
    ]


def rows_cpu() -> list[list[str]]:
    g = fr.per_seed
    one, three = g(CPU["1x300"], "gnn"), g(CPU["3x100"], "gnn")
    m = statistics.fmean
    base, dropped = fm.rows()[fm.BASE][fm.LAYOUT]["mean"], fm.rows()["gnn.dropout=0.1"][fm.LAYOUT]["mean"]
    lr = g(CPU["lr"], "gnn")
    lower = sum(a < b for a, b in zip(lr, one, strict=True))
    return [
        [
            "the `cpu` profile: 3 seeds sharing one seed's time (was 1)",
            f"layout pair: 3 x 100 steps {vs(three, one)} for 1 x 300 steps",
            "not measured",
        ],
        [
            "the `cpu` profile: `dropout = 0`",
            f"layout pair: 0.1 moves one 300-step run {m(one):.4f} -> {m(g(CPU['do'], 'gnn')):.4f} and three 100-step "
            f"seeds {m(three):.4f} -> {m(g(CPU['3x100do'], 'gnn')):.4f}; with 3 seeds, 0",
            f"0.1 cost {base - dropped:.3f} demo tau at a few hundred steps",
        ],
        [
            "the `cpu` profile: `lr = 0.002`",
            f"layout pair: 1e-3 scored {mean_std(lr)} against {mean_std(one)} ({lower} seed{'s' if lower != 1 else ''} of {len(lr)} lower)",
            f"xla:random {m(fb.scores('before', fb.XLA)):.4f} -> {m(fb.scores('early-stop', fb.XLA)):.4f} at 10 minutes",
        ],
        [
            "the `cpu` profile: `min_train_share = 1`",
            "cannot be measured on the pair (its one valid graph is the scored one)",
            "neutral where it mattered",
        ],
    ]


def rows_rest() -> list[list[str]]:
    g, m = fr.per_seed, statistics.fmean
    layout = [m(g(fr.MEAN, k)) for k in ("ensemble", "lgbm", "gnn")]
    ens, lg, gn = (g(fr.MEAN, k) for k in ("ensemble", "lgbm", "gnn"))
    seeds = fr.above_both(ens, lg, gn)
    tile = [m(g(fr.TILE_MEAN, k)) for k in ("ensemble", "gnn", "lgbm")]
    avg = [x[fm.LAYOUT]["seed_average"] - x[fm.LAYOUT]["mean"] for x in fm.rows().values()]
    pruned, gst = fm.tau_variants().values()
    loss = [
        pruned["collections"][c]["valid_tau"] - gst["collections"][c]["valid_tau"]
        for c in pruned["collections"]
    ]
    secs = [sum(c["seconds"] for c in x["collections"].values()) for x in (pruned, gst)]
    all_cfg = fm.rows()["gnn.tile_all_configs=true"][fm.TILE]["mean"] - fm.rows()[fm.BASE][fm.TILE]["mean"]
    tile_spread = fm.rows()[fm.BASE][fm.TILE]["std"]
    return [
        [
            "`ensemble.normalize`: `zscore` for tile, `rank` for layout",
            "with the `sum` GNN on the tile kernels and the layout pair ([the ensemble](#the-ensembles-normalization-measured)); not measured again with `mean`",
            "better on demo",
        ],
        [
            '`ensemble.models = ["lgbm", "gnn"]`',
            f"layout pair: the equal-weight ensemble ({layout[0]:.4f}) above both members ({layout[1]:.4f}, {layout[2]:.4f}) "
            f"on {seeds} of {len(ens)} seeds; tile kernels: {tile[0]:.4f} against the GNN's {tile[1]:.4f}, LightGBM {tile[2]:.4f}",
            "",
        ],
        [
            "`gnn.seeds = 5` (`gpu`), 2 (`kaggle-t4`)",
            "averaging raised the `cpu` profile's GNN on every seed (above)",
            f"the seed average against the mean of its seeds on demo layout: {min(avg):+.3f} at worst",
        ],
        [
            "scale, speed and memory: `gnn.hidden = 256` and the per-collection step counts (`gpu`), width 32 (`cpu`), "
            "`features.max_configs_per_graph`, `gnn.checkpoint_layers` and `gnn.checkpoint_min_states`, the `cpu` "
            "profile's xla:random speed setting, `gnn.segment_nodes = 0`",
            "not quality choices",
            f"the 1st place's scripts; [scale](../scale.md); GST lost {' and '.join(f'{x:.2f}' for x in loss)} tau on demo "
            f"at {secs[1] / secs[0]:.1f} times the time",
        ],
        [
            "`gnn.tile_all_configs = false`",
            "not measured",
            f"on demo tile {signed(all_cfg, 4)}, {inside([all_cfg], tile_spread)} the base's spread ({tile_spread:.4f})",
        ],
    ]


@figure("defaults_evidence")
def defaults_evidence() -> Figure:
    rows = rows_gnn() + rows_recipe() + rows_inputs() + rows_cpu() + rows_rest()
    real = {fr.MEAN, fr.TILE_MEAN, fr.SUM_LAYOUT, fr.SUM_TILE, *fr.W64, *fr.W64_ON, *CPU.values(), CPU_MEAN}
    real |= {"real_layout_gnn_aggr_mean.json", "real_tile_gnn_aggr_mean.json", "real_layout_gnn_hinge.json"}
    real |= {"real_layout_lgbm_trunc64.json"}
    names = sorted(real | {GNN_DEMO, fm.RECIPE, fm.RECIPE_REAL})
    sources = [Source(n) for n in names] + [Source(fm.GST, "tau")]
    sources.append(fb.source("early-stop", "per-collection", "features", "lgbm", "lgbm+mxu", "before"))
    return Figure(table(["default", "real evidence", "synthetic evidence"], rows), tuple(sources))
