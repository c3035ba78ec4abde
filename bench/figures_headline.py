"""The README's real-data table: the ensemble first, the ranker tpurank ships, beside its members
and the untrained floors, on the real sample (bench/bench_real.py), each a mean over seeds."""

from __future__ import annotations

import statistics

from figure_kit import Figure, Source, figure, results, table

CPU = "real_cpu.json"  # the `cpu` profile, the machine's own
GPU = "real_mean.json"  # the defaults (the `gpu` profile's GNN), at an earlier commit
MODELS = ("ensemble", "gnn", "lgbm", "heuristic", "random")


def _cells(name: str, part: str, subset: bool = False) -> list[str]:
    """Each model's mean over seeds (bold: the best), `-` where it did not run."""
    data = results(name)[part]["per_seed"]
    data = data["subset" if subset else "all"] if part == "layout" else data
    means = {m: statistics.fmean(data[m]) for m in MODELS if data.get(m)}
    best = max(means.values())
    return [
        "-" if m not in means else (f"**{means[m]:.3f}**" if means[m] == best else f"{means[m]:.3f}")
        for m in MODELS
    ]


@figure("readme_real_table")
def readme_real_table() -> Figure:
    seeds = len(results(CPU)["seeds"])
    rows = [
        ["an unseen layout graph (`unet_3d.4x4.bf16`, 1965 configs), *Kendall tau*", *_cells(CPU, "layout")],
        ["the same graph, its official 1000-config subset", *_cells(CPU, "layout", subset=True)],
        ["15 tile kernels, each scored by models trained on the others, *tile score*", *_cells(CPU, "tile")],
        [
            "the unseen layout graph, the defaults (the `gpu` profile's GNN), an earlier commit",
            *_cells(GPU, "layout"),
        ],
    ]
    head = [f"task (`cpu` profile, mean of {seeds} seeds)", "**ensemble** (equal weights)", *MODELS[1:]]
    return Figure(table(head, rows), (Source(CPU), Source(GPU)))


@figure("real_cpu_table")
def real_cpu_table() -> Figure:
    """bench_real.py's own table of the `cpu` profile's run, the ensemble first, as it saved it."""
    r = results(CPU)
    minutes = f"{r['seconds'] / 60:.1f} min"
    return Figure(f"{r['table']}\n\n{minutes} for both halves, seeds {r['seeds']}", (Source(CPU),))
