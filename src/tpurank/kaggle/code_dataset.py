"""`tpurank build-code-dataset`: package tpurank (and wheels Kaggle's image lacks) as a Kaggle dataset.

The Kaggle notebooks run without internet, so they install tpurank from this dataset. The wheels
sit at the dataset's top level: `kaggle datasets create -p dist/kaggle-code` uploads top-level files
only (subfolders need `--dir-mode`), and the notebooks search the attached inputs for the wheels
wherever they are. Later versions: `kaggle datasets version -p dist/kaggle-code -m MSG`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

from tpurank.core.atomic import write_json
from tpurank.core.errors import TpurankError
from tpurank.core.paths import project_root

DATASET_SLUG = "tpurank-code"
PLACEHOLDER_USER = "YOUR_KAGGLE_USERNAME"
# Kaggle's Python image has numpy, pandas, pyarrow, scipy, sklearn, lightgbm, torch, tqdm,
# matplotlib, protobuf and kaggle; torch_geometric is the one runtime dependency it lacks.
EXTRA_WHEELS = ["torch-geometric==2.8.1"]
# kernel folders (each a kernel-metadata.json) -> (kernel slug, datasets it attaches besides the code)
KERNELS = {
    "notebooks": ("tpurank-submission", []),
    "notebooks/inference": ("tpurank-inference", ["tpurank-models"]),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dest", default="dist/kaggle-code", help="output folder (relative to the project root)")
    p.add_argument("--kaggle-user", default=PLACEHOLDER_USER, help="owner of the dataset and notebooks")
    p.add_argument("--no-extra-wheels", action="store_true", help="package tpurank only (offline build)")


def _pip(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise TpurankError(f"pip {args[0]} failed: {tail[0]}")


def set_kernel_owner(user: str) -> list[Path]:
    """Point the notebooks' kernel-metadata.json at `user`'s kernels and datasets."""
    written = []
    for folder, (slug, datasets) in KERNELS.items():
        meta = project_root() / folder / "kernel-metadata.json"
        if not meta.exists():
            continue
        m = json.loads(meta.read_text())
        m["id"] = f"{user}/{slug}"
        m["dataset_sources"] = [f"{user}/{d}" for d in (DATASET_SLUG, *datasets)]
        write_json(meta, m)
        written.append(meta)
    return written


def build(dest: Path, user: str, extra_wheels: bool = True) -> Path:
    root = project_root()
    dest.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(dest / "wheels", ignore_errors=True)  # the old layout: a subfolder Kaggle skipped
    for old in dest.glob("*.whl"):
        old.unlink()
    _pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(dest), str(root))
    if extra_wheels:
        _pip("download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(dest), *EXTRA_WHEELS)
    write_json(
        dest / "dataset-metadata.json",
        {"title": DATASET_SLUG, "id": f"{user}/{DATASET_SLUG}", "licenses": [{"name": "apache-2.0"}]},
    )
    if user != PLACEHOLDER_USER:
        set_kernel_owner(user)
    return dest


def run(args: argparse.Namespace) -> int:
    dest = build(project_root() / args.dest, args.kaggle_user, not args.no_extra_wheels)
    names = sorted(p.name for p in dest.glob("*.whl"))
    print(f"code dataset in {dest}: {', '.join(names)}")
    print(f"upload: kaggle datasets create -p {dest}   (then: kaggle kernels push -p notebooks)")
    return 0
