"""`tpurank build-code-dataset`: package tpurank (and wheels Kaggle's image lacks) as a Kaggle dataset.

The Kaggle notebook runs without internet, so it installs tpurank from this dataset. The output
folder holds the project wheel, the extra wheels and `dataset-metadata.json`; upload it with
`kaggle datasets create -p dist/kaggle-code` (later: `kaggle datasets version -p ... -m MSG`).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from tpurank.atomic import write_json
from tpurank.errors import TpurankError
from tpurank.paths import project_root

DATASET_SLUG = "tpurank-code"
# Kaggle's Python image has numpy, pandas, pyarrow, scipy, sklearn, lightgbm, torch, tqdm,
# matplotlib and protobuf; torch_geometric is the one runtime dependency it lacks.
EXTRA_WHEELS = ["torch-geometric==2.8.1"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dest", default="dist/kaggle-code", help="output folder (relative to the project root)")
    p.add_argument("--kaggle-user", default="YOUR_KAGGLE_USERNAME", help="owner of the dataset and notebook")
    p.add_argument("--no-extra-wheels", action="store_true", help="package tpurank only (offline build)")


def _pip(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise TpurankError(f"pip {args[0]} failed: {tail[0]}")


def build(dest: Path, user: str, extra_wheels: bool = True) -> Path:
    root = project_root()
    wheels = dest / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for old in wheels.glob("tpurank-*.whl"):
        old.unlink()
    _pip("wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels), str(root))
    if extra_wheels:
        _pip("download", "--no-deps", "--only-binary=:all:", "-q", "-d", str(wheels), *EXTRA_WHEELS)
    write_json(
        dest / "dataset-metadata.json",
        {"title": DATASET_SLUG, "id": f"{user}/{DATASET_SLUG}", "licenses": [{"name": "apache-2.0"}]},
    )
    meta = root / "notebooks" / "kernel-metadata.json"
    if meta.exists() and user != "YOUR_KAGGLE_USERNAME":
        m = json.loads(meta.read_text())
        m["id"] = f"{user}/tpurank-submission"
        m["dataset_sources"] = [f"{user}/{DATASET_SLUG}"]
        write_json(meta, m)
    return dest


def run(args: argparse.Namespace) -> int:
    dest = build(project_root() / args.dest, args.kaggle_user, not args.no_extra_wheels)
    names = sorted(p.name for p in (dest / "wheels").glob("*.whl"))
    print(f"code dataset in {dest}: {', '.join(names)}")
    print(f"upload: kaggle datasets create -p {dest}   (then: kaggle kernels push -p notebooks)")
    return 0
