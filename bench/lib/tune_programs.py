"""The real programs of bench_tune.py and the models that rank each: trained with the `cpu` profile
on the other real programs, through the CLI (`real_data.stage`), as `tpurank` trains them."""

from __future__ import annotations

import argparse
from pathlib import Path

import real_data as rd

from tpurank.core.paths import NPZ_SUBDIR

LAYOUT_PB = "pb/module_tuning_data_layout.pb"


def train(root: Path, folder: Path, collection: str, a: argparse.Namespace) -> tuple[Path, Path]:
    """The cpu profile's models of `collection` on a data root: (out folder, prepared cache)."""
    out, work, log = folder / "out", folder / "work", folder / "train.log"
    models = ["lgbm", "gnn"] if a.gnn_steps else ["lgbm"]
    sets = [f"ensemble.models={models!r}".replace(" ", ""), f"seed={a.seed}", *a.set]
    if a.gnn_steps:  # seed members of a fixed length (one by default: the issue's own GNN row)
        sets += [f"gnn.seeds={a.gnn_seeds}", f"gnn.max_steps={a.gnn_steps}", "gnn.time_budget_min=0"]
        sets += [f"gnn.eval_every={a.gnn_steps}", f"gnn.warmup_steps={a.gnn_steps // 10}"]
    common = ["--data-dir", str(root), "--out-dir", str(out), "--work-dir", str(work), "--profile", "cpu"]
    common += [x for s in sets for x in ("--set", s)]
    only = ["--collections", collection]
    rd.stage(["prepare", "--no-progress", *only, *common], log)
    rd.stage(["features", *only, *common], log)
    for m in models:
        rd.stage(["train", "--model", m, *only, *common], log)
        rd.stage(["predict", "--model", m, "--split", "valid", "--partial", *only, *common], log)
    rd.stage(["train", "--model", "ensemble", *only, *common], log)
    return out, work / "features" / "prepared"


def swapped_layout_root(folder: Path) -> Path:
    """The layout data root the other way round: train on unet_3d.4x4.bf16, rank unet3d."""
    npz = folder / NPZ_SUBDIR / "layout/xla/default"
    for split in ("train", "valid", "test"):
        (npz / split).mkdir(parents=True, exist_ok=True)
        for old in (npz / split).glob("*.npz"):
            old.unlink()
    scored, trained = rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_TRAIN, rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_SCORED
    (npz / "train" / trained.name).symlink_to(trained)
    (npz / "valid" / f"{rd.FIT_PREFIX}{trained.name}").symlink_to(trained)
    (npz / "test" / scored.name).symlink_to(scored)
    return folder


def layout_programs(a: argparse.Namespace) -> list[tuple[str, Path, Path, Path]]:
    """(name, file, out folder, prepared cache) of each real layout program and its models."""
    base = a.work / "layout"
    forward = rd.layout_root(base / "fwd" / "data")
    out_f, prep_f = train(forward, base / "fwd", rd.LAYOUT, a)
    found = [
        ("unet_3d.4x4.bf16 (npz)", rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_SCORED, out_f, prep_f),
        ("unet_3d.4x4.bf16 (pb runs)", rd.SHARED / LAYOUT_PB, out_f, prep_f),
    ]
    if a.forward_only:
        return found
    backward = swapped_layout_root(base / "bwd" / "data")
    out_b, prep_b = train(backward, base / "bwd", rd.LAYOUT, a)
    return [found[0], ("unet3d (npz)", rd.SHARED / NPZ_SUBDIR / rd.LAYOUT_TRAIN, out_b, prep_b), found[1]]


def tile_programs(a: argparse.Namespace) -> list[tuple[str, Path, Path, Path]]:
    """(name, kernel npz, out folder, prepared cache) of each real tile kernel and its fold's models."""
    base = a.work / "tile"
    base.mkdir(parents=True, exist_ok=True)
    folder = base / "kernels"
    rd.stage(
        ["featurize-pb", str(rd.SHARED / rd.TILE_PB), str(folder), "--kind", "tile"], base / "featurize.log"
    )
    kernels = sorted(folder.glob("*.npz"))
    out = []
    for i, held in enumerate(rd.kernel_folds(len(kernels), a.tile_folds, seed=0)):
        root = rd.tile_root(base / f"fold{i}" / "data", kernels, held)
        models, prepared = train(root, base / f"fold{i}", rd.TILE, a)
        out += [(kernels[j].stem, kernels[j], models, prepared) for j in held]
    return out
