"""The README's real-data table: the ensemble first, the ranker tpurank ships, beside its members
and the untrained floors, on the real sample (bench/runs/bench_real.py), each a mean over seeds."""

from __future__ import annotations

import statistics

from figure_kit import Figure, Source, figure, results, table

MEAN = "real_mean.json"  # bench_real.py at its defaults, 3 seeds, the layout and tile halves merged
MODELS = ("ensemble", "gnn", "lgbm", "baseline", "heuristic", "random")


def _cells(part: str, subset: bool = False) -> list[str]:
    """Each model's mean over seeds (bold: the best), `-` where it did not run."""
    data = results(MEAN)[part]["per_seed"]
    data = data["subset" if subset else "all"] if part == "layout" else data
    means = {m: statistics.fmean(data[m]) for m in MODELS if data.get(m)}
    best = max(means.values())
    return [
        "-" if m not in means else (f"**{means[m]:.3f}**" if means[m] == best else f"{means[m]:.3f}")
        for m in MODELS
    ]


@figure("readme_real_table")
def readme_real_table() -> Figure:
    seeds = len(results(MEAN)["seeds"])
    rows = [
        ["an unseen layout graph (`unet_3d.4x4.bf16`, 1965 configs), *Kendall tau*", *_cells("layout")],
        ["the same graph, its official 1000-config subset", *_cells("layout", subset=True)],
        ["15 tile kernels, each scored by models trained on the others, *tile score*", *_cells("tile")],
    ]
    head = [f"task (mean of {seeds} seeds)", "**ensemble** (equal weights)", *MODELS[1:]]
    return Figure(table(head, rows), (Source(MEAN),))
