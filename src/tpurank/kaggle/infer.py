"""`tpurank infer --models-dataset DIR`: a test submission from models trained elsewhere, no training.

DIR holds what `build-models-dataset` wrote (searched below DIR, so on Kaggle `/kaggle/input` does;
a `models.zip` that Kaggle unpacked into a folder is found too). The files are checked against the
manifest's checksums and unpacked into the out folder, never over models it did not unpack there
itself (kaggle/unpacked.py; `--replace-models` to replace them); then only `prepare --splits test --keep-rule` (the shipped rule, never refitted), `predict
--split test` for the model of each collection (the ensemble where fitted, else the best trained
member: kaggle/infer_plan.py, said in one line) and `check-submission` run, with the config the
models were trained with. Writes submissions/submission.csv (and its sidecar).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import zipfile
from pathlib import Path

from tpurank.core.atomic import write_bytes
from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.kaggle import unpacked
from tpurank.kaggle.choice import TrainedModels, trained_models
from tpurank.kaggle.infer_plan import choose_models
from tpurank.kaggle.models_dataset import ARCHIVE, CONFIG, MANIFEST, read_manifest, unpacked_path
from tpurank.kaggle.unpacked import REPLACE_FLAG
from tpurank.run.stages import command_line, run_step
from tpurank.submission import check
from tpurank.submission.publish import incomplete_test_set


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--models-dataset", required=True, metavar="DIR", help="folder holding tpurank-models.json (searched)"
    )
    p.add_argument(
        REPLACE_FLAG,
        action="store_true",
        help="unpack even into an out folder holding models infer did not unpack there (e.g. trained by "
        "`all`), replacing them with the dataset's (refused by default)",
    )


def find_manifest(root: Path) -> Path:
    if (root / MANIFEST).is_file():
        return root / MANIFEST
    found = sorted(root.rglob(MANIFEST)) if root.is_dir() else []
    if not found:
        raise TpurankError(f"{root}: no {MANIFEST} here or below (attach the models dataset)")
    if len(found) > 1:
        raise TpurankError(
            f"{root}: several models datasets ({', '.join(str(f) for f in found[:3])}); name one"
        )
    return found[0]


def unpack(dataset: Path, manifest: dict, paths: Paths) -> None:
    """Extract the archive (or copy the tree Kaggle unpacked it into), each file where its stage reads
    it (`models_dataset.unpacked_path`: the cache's rule under the work folder, models under the out
    folder), checking checksums."""
    archive = dataset / ARCHIVE
    if archive.is_file():
        try:
            with zipfile.ZipFile(archive) as zf:
                for name in manifest["files"]:
                    write_bytes(unpacked_path(paths, name), zf.read(name))  # atomic: never half a model
        except (zipfile.BadZipFile, KeyError) as e:
            raise TpurankError(f"{archive}: corrupt archive ({e})") from None
    else:  # Kaggle unpacks uploaded zips: find the folder holding the files
        first = next(iter(manifest["files"]))
        roots = [p.parent for p in dataset.rglob(Path(first).name) if p.as_posix().endswith(first)]
        if not roots:
            raise TpurankError(f"{dataset}: neither {ARCHIVE} nor its unpacked files ({first})")
        base = Path(roots[0].as_posix()[: -len(str(Path(first).parent))].rstrip("/"))
        for rel in manifest["files"]:
            write_bytes(unpacked_path(paths, rel), (base / rel).read_bytes())
    for rel, digest in manifest["files"].items():
        f = unpacked_path(paths, rel)
        if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != digest:
            raise TpurankError(f"{f}: missing or different from the models dataset's manifest")


def run(args: argparse.Namespace) -> int:
    manifest_file = find_manifest(Path(args.models_dataset))
    dataset = manifest_file.parent
    manifest = read_manifest(manifest_file)  # types and paths checked: a broken one is one line
    paths: Paths = args.paths
    # never over models it did not unpack itself (an out folder `all` trained in): kaggle/unpacked.py
    unpacked.refuse_foreign(paths, manifest["files"], args.replace_models)
    unpacked.record(paths, manifest["files"])
    try:
        unpack(dataset, manifest, paths)
    finally:
        unpacked.adopt(paths, manifest["files"])
    unpacked.prune(paths)
    # the config the models were trained with (a key renamed since under its new name), unless the
    # user names another; --set goes over it
    cfg = load_config(args.config_file or dataset / CONFIG, args.set, saved=not args.config_file)
    choice = choose_models(TrainedModels(paths, cfg, trained_models(paths, dataset), dataset))
    print(
        f"[infer] models from {dataset} (trained at commit {manifest.get('git_commit', '?')} on data "
        f"{manifest.get('data_fingerprint', '?')}): {choice.line()}"
        + (
            "; SYNTHETIC data: the submission is not a Kaggle result"
            if manifest.get("data") == "synthetic"
            else ""
        ),
        file=sys.stderr,
    )
    partial = incomplete_test_set(paths, stage="infer")
    for step in choice.steps(partial):
        print(f"[infer] tpurank {command_line(step)}", file=sys.stderr)
        rc = run_step(step, paths, cfg)
        if rc != 0:
            raise TpurankError(f"step '{command_line(step)}' failed (exit {rc})")
    submission = choice.write(paths, cfg, partial)
    if run_step(check.Options(str(submission), partial=partial), paths, cfg):
        raise TpurankError(f"{submission}: failed its check")
    print(f"submission: {submission}")
    return 0
