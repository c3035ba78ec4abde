"""Figures of docs/models.md's recipe ablations and Graph Segment Training: bench/runs/bench_recipe.py
(the demo), bench/runs/bench_recipe_real.py (the real layout pair) and bench/runs/bench_gst.py."""

from __future__ import annotations

import statistics

from figure_kit import Figure, Source, figure, gb, results, signed, span, table

RECIPE = "recipe_cpu.json"
RECIPE_REAL = "recipe_real.json"
GST = "gst.json"
BASE = "base"
TILE, LAYOUT = "tile:xla", "layout:xla:default"
RECIPE_REAL_NAMES = {
    "today": "plain (`today` in the bench)",
    "recipe": "standardised features, warm-up 15 steps",
    "recipe+attention": "and `layer_attention`",
}


def rows() -> dict[str, dict]:
    return results(RECIPE)["rows"]


def same_as_base(variant: str, collection: str) -> bool:
    """A variant that does not apply to a collection reuses the base's runs there."""
    return variant != BASE and rows()[variant][collection] == rows()[BASE][collection]


def bolded(values: dict[str, float], fmt: str, spread: dict[str, float] | None = None) -> dict[str, str]:
    """Each value formatted (`mean ± sd` with a spread), the highest in bold."""
    top = max(values.values())
    text = {k: fmt.format(v) + (f" ± {spread[k]:.4f}" if spread else "") for k, v in values.items()}
    return {k: f"**{t}**" if values[k] == top else t for k, t in text.items()}


@figure("recipe_ablation_table")
def ablation_table() -> Figure:
    cols = {}
    for c in (TILE, LAYOUT):
        own = {v: r[c] for v, r in rows().items() if not same_as_base(v, c)}
        means = bolded(
            {v: x["mean"] for v, x in own.items()}, "{:.4f}", {v: x["std"] for v, x in own.items()}
        )
        avgs = bolded({v: x["seed_average"] for v, x in own.items()}, "{:.4f}")
        cols[c] = {v: (means[v], avgs[v]) for v in own}
    out = []
    for v, r in rows().items():
        n = len(r[TILE]["scores"])
        name = (
            "base (options off)"
            if v == BASE
            else f"`{v}`" + (f" ({n} seeds)" if n != results(RECIPE)["seeds"] else "")
        )
        cells = [x for c in (TILE, LAYOUT) for x in cols[c].get(v, ("(base)", "(base)"))]
        secs = [f"{sum(r[c]['train_seconds']):.0f}" if v in cols[c] else "-" for c in (TILE, LAYOUT)]
        out.append([name, *cells, " / ".join(secs)])
    header = ["variant", "tile:xla, mean ± sd", "tile:xla, 3-seed average", "xla:default, mean ± sd"]
    header += ["xla:default, 3-seed average", "train s (tile / layout)"]
    return Figure(table(header, out), (Source(RECIPE),))


def per_seed_s(variant: str, collection: str) -> float:
    x = rows()[variant][collection]
    return sum(x["train_seconds"]) / len(x["train_seconds"])


@figure("recipe_ablation_reading")
def ablation_reading() -> Figure:
    r, base = rows(), rows()[BASE]
    drop = base[LAYOUT]["mean"] - r["gnn.dropout=0.1"][LAYOUT]["mean"]
    att = r["gnn.layer_attention=true"][LAYOUT]
    median = statistics.median(base[LAYOUT]["scores"])
    above = sum(s > median for s in att["scores"])
    layout_avg = [
        x[LAYOUT]["seed_average"] - x[LAYOUT]["mean"] for v, x in r.items() if not same_as_base(v, LAYOUT)
    ]
    tile_avg = [x[TILE]["seed_average"] - x[TILE]["mean"] for v, x in r.items() if not same_as_base(v, TILE)]
    wide = "gnn.hidden=128"
    times = [per_seed_s(wide, c) / per_seed_s(BASE, c) for c in (TILE, LAYOUT)]
    text = (
        f"Reading it (a difference below the base's spread is noise): **dropout** lowers layout by {drop:.3f} "
        f"(the base's spread: {base[LAYOUT]['std']:.3f}). **Attention at the configurable nodes** on layout: "
        f"{signed(att['mean'] - base[LAYOUT]['mean'])} on the mean, {above} of {len(att['scores'])} seeds above the "
        f"base's median, {signed(att['seed_average'] - base[LAYOUT]['seed_average'])} for the 3-seed average. "
        f"**Seed averaging** against the mean of its seeds: {span(layout_avg, '{:+.3f}')} in the layout rows, "
        f"{span(tile_avg, '{:+.3f}')} on tile. **Standardisation** moves tile's spread from "
        f"{base[TILE]['std']:.4f} to {r['gnn.standardize=true'][TILE]['std']:.4f}. **Width 128** takes "
        f"{span(times, '{:.0f}')} times the training time per seed."
    )
    return Figure(text, (Source(RECIPE),))


@figure("recipe_real_table")
def recipe_real_table() -> Figure:
    r = results(RECIPE_REAL)["rows"]
    cols = {}
    for part in ("all", "subset"):
        means = bolded(
            {v: x[part]["mean"] for v, x in r.items()}, "{:.4f}", {v: x[part]["std"] for v, x in r.items()}
        )
        avgs = bolded({v: x[part]["seed_average"] for v, x in r.items()}, "{:.4f}")
        cols[part] = {v: [means[v], avgs[v]] for v in r}
    out = [[RECIPE_REAL_NAMES.get(v, v), *cols["all"][v], *cols["subset"][v]] for v in r]
    header = ["variant", "tau, all configs: mean ± sd", "3-seed average", "tau, official subset: mean ± sd"]
    return Figure(table([*header, "3-seed average"], out), (Source(RECIPE_REAL),))


@figure("recipe_real_reading")
def recipe_real_reading() -> Figure:
    r = results(RECIPE_REAL)["rows"]
    plain, variants = r["today"], [x for v, x in r.items() if v != "today"]
    better = all(min(x[p]["taus"]) > max(plain[p]["taus"]) for x in variants for p in ("all", "subset"))
    said = (
        "Every seed of both recipe variants ranks"
        if better
        else "Not every seed of the recipe variants ranks"
    )
    top = max(t for x in r.values() for t in x["all"]["taus"])
    text = (
        f"{said} the unseen graph better than every seed of the plain GNN, on all configs and on the official "
        f"subset. After {results(RECIPE_REAL)['steps']} CPU steps every run ranks the real graph at tau "
        f"{top:.3f} at most."
    )
    return Figure(text, (Source(RECIPE_REAL),))


def modes() -> list[dict]:
    return results(GST)["memory"]["modes"]


@figure("gst_memory_graph")
def gst_memory_graph() -> Figure:
    m = modes()[0]
    text = (
        f"{m['nodes']:,} nodes, {m['edges']:,} edges, {m['configurable']:,} configurable nodes, "
        f"{m['configs_per_step']} unique configs (so {m['configs_per_step']} configs per step)"
    )
    return Figure(text, (Source(GST, "memory"),))


@figure("gst_memory_table")
def gst_memory_table() -> Figure:
    out = []
    for m in modes():
        n = m["segment_nodes"]
        name = "whole graph (`segment_nodes = 0`)" if n == 0 else f"GST, `segment_nodes = {n}`"
        out.append(
            [
                name,
                str(m["segments"]),
                f"{100 * m['cut_edge_share']:.1f} %",
                gb(m["peak_rss_gb_train"]),
                f"{m['s_per_step']} s",
                f"{m['score_256_configs_s']:.1f} s",
            ]
        )
    header = ["training", "segments", "edges cut", "peak RSS", "s / step", "scoring its configs"]
    after_load = span(m["peak_rss_gb_after_load"] for m in modes())
    text = table(header, out) + f"\n\nOf each peak, {after_load} GB is the process after loading the graph."
    return Figure(text, (Source(GST, "memory"),))


def tau_variants() -> dict[str, dict]:
    return results(GST)["tau"]["variants"]


@figure("gst_tau_table")
def gst_tau_table() -> Figure:
    names = {
        "pruned (default)": "pruned, 1 hop (default)",
        "whole + GST 500": "whole graphs + GST (500 nodes), fine-tuned head",
    }
    v = tau_variants()
    cols = [c for c in next(iter(v.values()))["collections"]]
    cells = {c: bolded({k: x["collections"][c]["valid_tau"] for k, x in v.items()}, "{:.4f}") for c in cols}
    out = []
    for k, x in v.items():
        secs = sum(c["seconds"] for c in x["collections"].values())
        out.append([names.get(k, k), *(cells[c][k] for c in cols), f"{secs:.0f}"])
    header = ["variant", *(c.removeprefix("layout:") for c in cols), "training s (both)"]
    return Figure(table(header, out), (Source(GST, "tau"),))


@figure("gst_tau_reading")
def gst_tau_reading() -> Figure:
    pruned, gst = tau_variants().values()
    cols = list(pruned["collections"])
    loss = [pruned["collections"][c]["valid_tau"] - gst["collections"][c]["valid_tau"] for c in cols]
    secs = [sum(c["seconds"] for c in x["collections"].values()) for x in (pruned, gst)]
    hits = [gst["collections"][c]["hit_rate"] for c in cols]
    real = results(GST)["real"]
    taus = [statistics.fmean(real[k]["all"]["gnn"]) for k in ("pruned_default", "whole_gst_1000")]
    text = (
        f"GST **loses** to the pruned default here by {' and '.join(f'{x:.2f}' for x in loss)} tau, at "
        f"{secs[1] / secs[0]:.1f} times the time (the demo graphs are small enough that pruning loses little; the "
        f"table's hit rates were {' and '.join(f'{h:.2f}' for h in hits)}). On the real `unet_3d.4x4.bf16` "
        f"(`bench_real.py --only layout --models gnn --quick`, seeds 0 1) neither variant learned a ranking that "
        f"carries over (tau {taus[0]:.4f} pruned, {taus[1]:.4f} with GST)"
    )
    return Figure(text, (Source(GST, "tau"), Source(GST, "real")))
