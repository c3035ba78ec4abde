"""Figures of bench/README.md: how long each benchmark took when it saved the results the docs
quote (the "typical time" column), read from those results files, never typed by hand."""

from __future__ import annotations

from figure_kit import Figure, Source, figure, minutes, results


@figure("bench_time_lgbm")
def lgbm() -> Figure:
    """bench_lgbm.py's whole run on demo, all five collections."""
    return Figure(f"{results('lgbm_demo.json')['total_s']:.0f} s on demo", (Source("lgbm_demo.json"),))


@figure("bench_time_gst_tau")
def gst_tau() -> Figure:
    """bench_gst.py tau's training seconds per variant, summed over the docs' two collections."""
    variants = results("gst.json")["tau"]["variants"]
    secs = [sum(c["seconds"] for c in v["collections"].values()) for v in variants.values()]
    return Figure(
        f"`tau` for the docs' two collections: {' + '.join(f'{s:.0f}' for s in secs)} s of training",
        (Source("gst.json", part="tau"),),
    )


@figure("bench_time_tune")
def tune() -> Figure:
    """bench_tune.py's saved LightGBM-only runs (one thread), layout and tile."""
    layout, tile = results("tune_layout.json")["seconds"], results("tune_tile.json")["seconds"]
    return Figure(
        f"{layout:.0f} s layout, {tile:.0f} s tile",
        (Source("tune_layout.json"), Source("tune_tile.json")),
    )


@figure("bench_time_setup")
def setup() -> Figure:
    """bench_setup.py: one uv setup and one pip setup, at their medians."""
    m = results("setup.json")["median_s"]
    return Figure(f"{minutes(m['uv'] + m['pip'])} a pair (medians)", (Source("setup.json"),))


@figure("bench_time_suite")
def suite() -> Figure:
    """bench_suite.py: one test suite run at each of the two commits, at their medians."""
    m = results("suite.json")["median_s"]
    return Figure(
        f"{minutes(m['head'] + m['against'])} a pair (medians; pytest alone)", (Source("suite.json"),)
    )


@figure("bench_time_synth_demo")
def synth_demo() -> Figure:
    """bench_synth.py --demo: every run of the demo tree, one process and two."""
    runs = [s for seconds in results("synth_demo.json")["seconds"].values() for s in seconds]
    return Figure(f"`--demo {len(runs) // 2}`: {minutes(sum(runs))}", (Source("synth_demo.json"),))


@figure("bench_time_scale")
def scale() -> Figure:
    """bench_scale.py: every step of `all` on all five full-scale collections at the CPU budget."""
    return Figure(
        f"{minutes(results('scale_all.json')['all_seconds'])} for all five at the CPU budget",
        (Source("scale_all.json"),),
    )


@figure("bench_time_compare_synth")
def compare_synth() -> Figure:
    """bench_compare_synth.py: compare-synth with its demo tree and difficulty seeds."""
    r = results("compare_synth.json")
    return Figure(
        f"{minutes(r['seconds'])} (`--scale {r['scale']}`, {r['difficulty_seeds']} difficulty seeds)",
        (Source("compare_synth.json"),),
    )
