"""The scale targets of docs/scale.md and the report of a whole bench_scale.py run: each target
with its measured value and pass/fail, the GNNs under the budget config, and the default-config
GNN's PROJECTION (labelled as such)."""

from __future__ import annotations

from scale_measure import GB
from step_names import FEATURES, TRAIN_LGBM

# the scale targets (docs/scale.md) on this 2-core, 24 GB machine
MAX_CACHE_RATIO = 1.5  # prepared cache bytes / npz bytes
MAX_STAGE_RSS = 12 * GB
MAX_GNN_RSS = 4 * GB
MAX_PREPARE_VS_DECOMPRESS = 2.0
MAX_FEATURES_LGBM_MIN = 60.0  # all five collections
MAX_PARTIAL_ALL_MIN = 60.0  # `all --collections tile:xla layout:xla:random` with the CPU budget config


def check_targets(r: dict, collections: list[str]) -> list[tuple[str, str, bool]]:
    """Each target this run measured, as (target, value, pass): printed by report, kept in the results."""
    by = {s["stage"]: s for s in r["stages"]}
    targets: list[tuple[str, str, bool]] = []
    ratio = r["cache"]["ratio"]
    targets.append(("cache <= 1.5x npz (full synthetic)", f"{ratio:.3f}x", ratio <= MAX_CACHE_RATIO))
    if r.get("real_sample_cache"):
        rr = r["real_sample_cache"]["ratio"]
        targets.append(("cache <= 1.5x npz (real sample files)", f"{rr:.3f}x", rr <= MAX_CACHE_RATIO))
    worst = max(r["stages"], key=lambda s: s["peak_rss"])
    targets.append(
        (
            f"every stage <= 12 GB peak RSS (max: {worst['stage']})",
            f"{worst['peak_rss'] / GB:.2f} GB",
            worst["peak_rss"] <= MAX_STAGE_RSS,
        )
    )
    for c, g in r.get("gnn_slice", {}).items():
        targets.append(
            (
                f"GNN training, default config, {c} <= 4 GB peak RSS",
                f"{g['peak_rss'] / GB:.2f} GB",
                g["peak_rss"] <= MAX_GNN_RSS,
            )
        )
    if "prepare" in by:
        x = by["prepare"]["seconds"] / max(1e-9, r["decompress"]["seconds"])
        targets.append(
            ("prepare <= 2x decompressing every array once", f"{x:.2f}x", x <= MAX_PREPARE_VS_DECOMPRESS)
        )
    fl = sum(by[s]["seconds"] for s in (FEATURES, TRAIN_LGBM) if s in by) / 60
    label = "features + train lgbm <= 60 min" + (
        "" if len(collections) == 5 else f" (measured on {len(collections)} collections)"
    )
    targets.append((label, f"{fl:.1f} min", fl <= MAX_FEATURES_LGBM_MIN))
    minutes = r["all_seconds"] / 60
    if collections == ["tile:xla", "layout:xla:random"]:
        ok = minutes <= MAX_PARTIAL_ALL_MIN and r.get("submission_valid", False)
        targets.append(
            (
                "all --collections tile:xla layout:xla:random, CPU budget: <= 60 min, valid CSV",
                f"{minutes:.1f} min",
                ok,
            )
        )
    return targets


def report(r: dict, collections: list[str]) -> None:
    """Print the targets, the budgeted GNNs and the default-config PROJECTION; the results keep them too."""
    targets = check_targets(r, collections)
    print("\ntargets (2 cores, measured in this run):")
    for name, value, ok in targets:
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}: {value}")
    r["targets"] = [{"target": n, "measured": v, "pass": ok} for n, v, ok in targets]
    print("\nGNN and baseline under the budget config:")
    for name, g in r["gnn_budget"].items():
        print(
            f"  {name}: {g['steps_run']} steps in {g['seconds']:.0f} s ({g['stopped_by']}), "
            f"{g['configs_per_s']} configs/s, best valid {g['best_valid_score']:.4f}"
        )
    print(
        "GNN at the default config: measured slice, and a PROJECTION of the default max_steps at that rate:"
    )
    for c, g in r.get("gnn_slice", {}).items():
        if "projection_hours" in g:
            print(
                f"  {c}: {g['configs_per_s']:.0f} configs/s, {g['seconds_per_step']:.2f} s/step, "
                f"{g['seconds_per_validation']:.0f} s/validation; PROJECTION for {g['projection_default_max_steps']} "
                f"steps: {g['projection_hours']:.1f} h on this CPU"
            )
    hours = sum(g.get("projection_hours", 0) for g in r.get("gnn_slice", {}).values())
    r["gnn_projection_hours"] = hours
    print(f"  PROJECTION, these {len(r.get('gnn_slice', {}))} collections: {hours:.1f} h")
