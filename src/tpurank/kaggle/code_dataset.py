"""`tpurank build-code-dataset`: package tpurank (and wheels Kaggle's image lacks) as a Kaggle dataset.

The Kaggle notebooks run without internet, so they install tpurank from this dataset. The wheels
sit at the dataset's top level: `kaggle datasets create -p dist/kaggle-code` uploads top-level files
only (subfolders need `--dir-mode`), and the notebooks search the attached inputs for the wheels
wherever they are. Later versions: `kaggle datasets version -p dist/kaggle-code -m MSG`.

The two notebooks are copied with their `kernel-metadata.json`, owned by the user, into
`<dest>/kernels/<slug>/` (a subfolder, so never uploaded with the dataset), ready for `kaggle
kernels push -p`; the tracked files under notebooks/ are only read (a build must not dirty the
checkout: every later provenance would say `+dirty`). The owner: `--kaggle-user`, else
KAGGLE_USERNAME, else the user of the credentials the kaggle client reads (kaggle.json, an access
token, OAuth), else a placeholder and a one-line warning; a placeholder or a name Kaggle cannot hold
(`YOUR_KAGGLE_USERNAME`, `<user>`) given as the owner is refused (`kaggle_user`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tpurank.core.atomic import atomic_path, write_json
from tpurank.core.errors import TpurankError
from tpurank.core.paths import checkout_root, project_root
from tpurank.data.download import kaggle_api

DATASET_SLUG = "tpurank-code"
PLACEHOLDER_USER = "YOUR_KAGGLE_USERNAME"
# names copied from an example rather than a user's own (compared lowercased, without '-' and '_')
PLACEHOLDERS = {
    "yourkaggleusername",
    "kaggleusername",
    "yourusername",
    "username",
    "user",
    "yourname",
    "kaggleuser",
    "yourkaggleuser",
    "yourkagglename",
    "kagglename",
    "yourkaggleid",
    "kaggleid",
    "owner",
    "yourusernamehere",
}
# Kaggle user names are letters and digits (older accounts may hold '-' or '_'): also never a '/',
# a space or a bracket, which would break the `<user>/<slug>` ids of the metadata
USER_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")
# Kaggle's Python image has numpy, pandas, pyarrow, scipy, sklearn, lightgbm, torch, tqdm,
# matplotlib, protobuf and kaggle; torch_geometric is the one runtime dependency it lacks.
EXTRA_WHEELS = ["torch-geometric==2.8.1"]
# tracked kernel folders (each a kernel-metadata.json) -> (kernel slug, datasets it attaches besides the code)
KERNELS = {
    "notebooks": ("tpurank-submission", []),
    "notebooks/inference": ("tpurank-inference", ["tpurank-models"]),
}
INFERENCE_KERNEL = "tpurank-inference"  # the notebook of the usual loop: train here, infer on Kaggle
KERNELS_DIR = "kernels"  # under the output folder: <dest>/kernels/<slug>/


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dest", default="dist/kaggle-code", help="output folder (relative to the project root)")
    p.add_argument(
        "--kaggle-user",
        default=None,
        help="owner of the dataset and notebooks (default: the user of your Kaggle credentials)",
    )
    p.add_argument("--no-extra-wheels", action="store_true", help="package tpurank only (offline build)")


def check_user(user: str, where: str) -> str:
    """`user`, unless it is a placeholder or no Kaggle user name (TpurankError naming `where`)."""
    bare = re.sub(r"[-_\s]", "", user).lower()
    if bare in PLACEHOLDERS or bare.strip("<>{}[]$") != bare:
        raise TpurankError(
            f"{where} {user!r} is a placeholder: pass your Kaggle user name or set KAGGLE_USERNAME"
        )
    if not USER_NAME.fullmatch(user):
        raise TpurankError(f"{where} {user!r} is not a Kaggle user name (letters, digits, '-', '_')")
    return user


def warn_no_user(command: str) -> None:
    """The one warning line of a build whose metadata names the placeholder owner."""
    print(
        f"tpurank {command}: warning: no Kaggle credentials found (kaggle.json, an access token, "
        f"KAGGLE_USERNAME) and no --kaggle-user: the metadata says {PLACEHOLDER_USER}; rebuild with "
        "credentials or --kaggle-user before uploading",
        file=sys.stderr,
    )


def credentials_user() -> str | None:
    """The user name of the credentials the kaggle client finds (tpurank.data.download.kaggle_api:
    kaggle.json, KAGGLE_USERNAME/KAGGLE_KEY, an access token, OAuth), None when it finds none."""
    try:
        user = kaggle_api().get_config_value("username")
    except TpurankError:
        return None
    return str(user).strip() or None if user else None


def kaggle_user(given: str | None, command: str, warn: bool = True) -> str:
    """The owner for the metadata: `given`, else $KAGGLE_USERNAME, else the credentials' user (each
    checked: `check_user`), else the placeholder, with a warning now unless `warn` is False (the caller
    warns once it has built)."""
    if given is not None and given.strip():
        return check_user(given.strip(), "--kaggle-user")
    if user := os.environ.get("KAGGLE_USERNAME", "").strip():
        return check_user(user, "KAGGLE_USERNAME")
    if user := credentials_user():
        return check_user(user, "the Kaggle credentials' user")
    if warn:
        warn_no_user(command)
    return PLACEHOLDER_USER


def _pip(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True)
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or ["(no output)"]
        raise TpurankError(f"pip {args[0]} failed: {tail[0]}")


def write_kernels(dest: Path, user: str) -> dict[str, Path]:
    """Copy each notebook and its kernel-metadata.json, owned by `user`, into `dest/kernels/<slug>/`.

    Returns:
        kernel slug -> the folder to push (`kaggle kernels push -p FOLDER`).
    """
    out = {}
    for folder, (slug, datasets) in KERNELS.items():
        source = code_root() / folder / "kernel-metadata.json"
        try:
            meta = json.loads(source.read_text())
            notebook = source.parent / meta["code_file"]
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TpurankError(f"{source}: unreadable kernel metadata ({e})") from None
        target = dest / KERNELS_DIR / slug
        target.mkdir(parents=True, exist_ok=True)
        meta["id"] = f"{user}/{slug}"
        meta["dataset_sources"] = [f"{user}/{d}" for d in (DATASET_SLUG, *datasets)]
        write_json(target / "kernel-metadata.json", meta)
        with atomic_path(target / notebook.name) as tmp:
            shutil.copyfile(notebook, tmp)
        out[slug] = target
    return out


def code_root() -> Path:
    """The source checkout the code dataset packs (never $TPURANK_HOME, which only moves outputs).

    Raises:
        TpurankError: tpurank runs from an installed package, without its checkout.
    """
    root = checkout_root()
    if root is None:
        raise TpurankError("build-code-dataset packs the source checkout: run it from a clone of tpurank")
    return root


def build(dest: Path, user: str, extra_wheels: bool = True) -> Path:
    root = code_root()
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
    write_kernels(dest, user)
    return dest


def run(args: argparse.Namespace) -> int:
    user = kaggle_user(args.kaggle_user, "build-code-dataset")
    dest = build(project_root() / args.dest, user, not args.no_extra_wheels)
    names = sorted(p.name for p in dest.glob("*.whl"))
    print(f"code dataset in {dest}: {', '.join(names)}")
    inference = dest / KERNELS_DIR / INFERENCE_KERNEL
    print(
        f"upload: kaggle datasets create -p {dest}   (then the inference notebook: "
        f"kaggle kernels push -p {inference})"
    )
    return 0
