"""Figures of the GPU profiles' PROJECTION (bench/runs/bench_gpu_projection.py: the FLOPs of a training step
measured here over each GPU's published throughput at a stated utilisation, never a GPU run), in
docs/scale.md and the README."""

from __future__ import annotations

from figure_kit import Figure, Source, figure, results, table

GPU = "gpu_projection_gpu.json"
T4 = "gpu_projection_kaggle-t4.json"


def projection_hours(name: str) -> dict[str, float]:
    """Hours per GPU for every collection and seed of the profile: the PROJECTION's total."""
    p = results(name)
    flops = sum(row["total_flops"] for row in p["rows"].values())
    return {gpu: flops / (peak * 1e12 * p["utilisation"]) / 3600 for gpu, peak in p["gpus"].items()}


def h100_t4(name: str) -> tuple[float, float]:
    hours = projection_hours(name)
    return next(h for g, h in hours.items() if "H100" in g), next(h for g, h in hours.items() if "T4" in g)


@figure("gpu_projection")
def gpu_projection() -> Figure:
    h100, t4 = h100_t4(GPU)
    return Figure(f"{h100:.1f} h on one H100, {t4:.0f} h on a T4", (Source(GPU),))


@figure("readme_projections")
def readme_projections() -> Figure:
    h100, _ = h100_t4(GPU)
    _, t4 = h100_t4(T4)
    seeds = {row["seeds"] for row in results(T4)["rows"].values()}
    text = (
        f"the `gpu` profile's GNN, {h100:.1f} h on one H100; on a T4, the `kaggle-t4` profile's "
        f"{'/'.join(map(str, sorted(seeds)))} seeds would need {t4:.1f} h"
    )
    return Figure(text, (Source(GPU), Source(T4)))


@figure("kaggle_t4_total")
def kaggle_t4_total() -> Figure:
    _, t4 = h100_t4(T4)
    seeds = {row["seeds"] for row in results(T4)["rows"].values()}
    return Figure(
        f"its {'/'.join(map(str, sorted(seeds)))} seeds would take {t4:.1f} h on a T4", (Source(T4),)
    )


@figure("kaggle_t4_split")
def kaggle_t4_split() -> Figure:
    p = results(T4)
    t4 = next(i for i, g in enumerate(p["gpus"]) if "T4" in g)
    rows = [
        [c, f"{s['minutes_per_seed']:.1f}", f"{s['steps_reached'][t4]:.0%}"] for c, s in p["split"].items()
    ]
    return Figure(table(["collection", "minutes per seed", "steps reached on a T4"], rows), (Source(T4),))
