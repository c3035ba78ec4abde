"""`tpurank build-models-dataset`: pack trained models for inference on Kaggle (`tpurank infer`).

Competitors train offline and run a short inference notebook on weights uploaded as a dataset.
This packs what `infer` needs and nothing it does not: every trained member's model folder and the
ensemble's weights where they are fitted, any subset (tpurank.kaggle.choice: `infer` predicts each
collection with the ensemble where fitted, else its best member), as one `models.zip` (`kaggle
datasets create` uploads top-level files only), the
node-feature rule of the prepared cache (test graphs must be prepared exactly as training saw
them), the config the models were trained with as `config.toml` (from their own sidecars, not the
current command line: tpurank.kaggle.trained), and `tpurank-models.json` (members, the data they were
trained on: root, fingerprint, real or synthetic; git commit, seed, time, file checksums) plus
`dataset-metadata.json`. Models trained on synthetic data are refused unless `--allow-synthetic`:
their scores are not Kaggle scores, and a submission from them would score near random on Kaggle.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from tpurank.core.atomic import atomic_path, write_json, write_text
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config, to_dict
from tpurank.core.config_files import load_config
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.paths import Paths, project_root
from tpurank.core.provenance import provenance
from tpurank.core.toml_write import to_toml
from tpurank.kaggle.choice import ENSEMBLE, Trained, trained_models
from tpurank.kaggle.code_dataset import PLACEHOLDER_USER, kaggle_user, warn_no_user
from tpurank.kaggle.trained import (
    read_json,
    read_sidecars,
    refuse_synthetic,
    trained_config,
    trained_data,
)
from tpurank.lgbm.training_rows import MAX_ROWS, TRAIN_ROWS_FILE
from tpurank.models.registry import MODEL_NAMES
from tpurank.prepare.node_features import RULE_FILE

COMMAND = "build-models-dataset"
DATASET_SLUG = "tpurank-models"
MANIFEST = "tpurank-models.json"
ARCHIVE = "models.zip"
CONFIG = "config.toml"
SKIPPED = {"last.pt"}  # resume state: training only
SHA256 = re.compile(r"[0-9a-f]{64}")
PACKED_ROOTS = ("features", "models")  # every archive member lies below one of these (archive_name)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--dest", default="dist/kaggle-models", help="output folder (relative to the project root)"
    )
    p.add_argument(
        "--kaggle-user",
        default=None,
        help="owner of the dataset (default: the user of your Kaggle credentials)",
    )
    p.add_argument(
        "--allow-synthetic",
        action="store_true",
        help="pack models trained on synthetic data (refused by default: their scores are not Kaggle scores)",
    )


# ------------------------------------------------------------------------------------------- reading


def _is_member_name(name: Any) -> bool:
    return isinstance(name, str) and name in MODEL_NAMES and name != "ensemble"


def _is_packed_name(name: Any) -> bool:
    """A relative POSIX path below features/ or models/ (never absolute, never `..`): safe to unpack."""
    if not isinstance(name, str) or not name or "\\" in name:
        return False
    parts = PurePosixPath(name).parts
    return len(parts) > 1 and parts[0] in PACKED_ROOTS and not {"..", "."} & set(parts)


def read_manifest(path: Path) -> dict[str, Any]:
    """`tpurank-models.json`, checked before anything is unpacked: members and files of the right types.

    Raises:
        DataError: naming the file and the first problem.
    """
    fix = "rebuild the models dataset with build-models-dataset"
    manifest = read_json(path, fix)
    if not isinstance(manifest, dict):
        raise DataError(path, f"expected a JSON object, found {type(manifest).__name__}; {fix}")
    members, files = manifest.get("members"), manifest.get("files")
    if not isinstance(members, list) or not members or not all(_is_member_name(m) for m in members):
        raise DataError(
            path, f"'members' must be a non-empty list of model names ({', '.join(MODEL_NAMES[:-1])}); {fix}"
        )
    if not isinstance(files, dict) or not files:
        raise DataError(path, f"'files' must be a non-empty object (archive member -> sha256); {fix}")
    for name, digest in files.items():
        if not _is_packed_name(name):
            raise DataError(path, f"'files': {name!r} is not a path below features/ or models/; {fix}")
        if not isinstance(digest, str) or not SHA256.fullmatch(digest):
            raise DataError(path, f"'files': {name}: {digest!r} is not a sha256 hex digest; {fix}")
    return manifest


# ------------------------------------------------------------------------------------------- packing


def trained_subset(paths: Paths) -> dict[str, Trained]:
    """Collection -> what is trained for it (kaggle.choice.trained_models): every collection must
    have at least one trained model, or infer could not rank its test graphs."""
    trained = trained_models(paths, paths.out)
    missing = [c for c in COLLECTIONS if c not in trained]
    if missing:
        raise TpurankError(
            f"{paths.models}: no trained model for {', '.join(missing)}; a Kaggle submission ranks all five "
            f"collections: train them first ({command('all')})"
        )
    return trained


def packed_models(trained: dict[str, Trained]) -> list[tuple[str, str]]:
    """(model, collection) of every model folder packed: the trained members, and the ensemble where
    its weights are fitted over them."""
    out = []
    for c, t in trained.items():
        out += [(m, c) for m in t.members]
        if t.fitted is not None:
            out.append((ENSEMBLE, c))
    return out


def archive_name(paths: Paths, f: Path) -> str:
    """A file's name in the archive: the cache's files relative to the work folder (`features/...`),
    the models relative to the out folder (`models/...`), so infer puts each where its stage reads it."""
    root = paths.work_root if f.is_relative_to(paths.features) else paths.out
    return f.relative_to(root).as_posix()


def unpacked_path(paths: Paths, name: str) -> Path:
    """Where infer puts an archive member (the inverse of `archive_name`)."""
    return (paths.work_root if name.startswith("features/") else paths.out) / name


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build(paths: Paths, cfg: Config, dest: Path, user: str, allow_synthetic: bool = False) -> dict[str, Any]:
    """Write the models dataset into `dest`; returns its manifest.

    Args:
        cfg: the current config: used only for collections whose models recorded none.
        allow_synthetic: pack models trained on synthetic data (else refused, in one line).
    """
    trained = trained_subset(paths)
    packed = packed_models(trained)
    members = sorted({m for t in trained.values() for m in t.members})
    sidecars = [s for s in read_sidecars(paths, [ENSEMBLE, *members]) if (s.model, s.collection) in packed]
    data = trained_data(sidecars)
    if not allow_synthetic:
        refuse_synthetic(data)
    cfg, config_source = trained_config(sidecars, members, cfg)
    rule = paths.prepared / RULE_FILE
    if not rule.exists():
        raise TpurankError(
            f"{rule}: no node-feature rule; the models were trained on another prepared cache?"
        )
    files: list[Path] = [rule]
    for m, c in packed:
        folder = paths.model_dir(m, c)
        files.extend(f for f in sorted(folder.rglob("*")) if f.is_file() and f.name not in SKIPPED)
    dest.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest / ARCHIVE) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            zf.write(f, archive_name(paths, f))
    write_text(dest / CONFIG, to_toml(to_dict(cfg)))
    if load_config(dest / CONFIG) != cfg:
        raise TpurankError(f"{dest / CONFIG}: the written config does not read back to the same values")
    main = data[0] if data else None  # the data most of the models were trained on
    manifest = provenance(
        cfg,
        None,  # not the current data root: the data the models recorded (below)
        data=main.kind if main else "unknown",
        data_synthetic=main.synthetic if main else None,
        trained_on=[d.as_json() for d in data],
        config_source=config_source,
        members=members,
        collections=list(COLLECTIONS),
        models={c: [*t.members, *([ENSEMBLE] if t.fitted is not None else [])] for c, t in trained.items()},
        archive=ARCHIVE,
        archive_sha256=_sha256(dest / ARCHIVE),
        files={archive_name(paths, f): _sha256(f) for f in files},
        training_configs={s.name: s.config for s in sidecars if s.model != "ensemble" and s.config},
    )
    manifest.update(
        data_root=main.root if main else None, data_fingerprint=main.fingerprint if main else None
    )
    write_json(dest / MANIFEST, manifest)
    write_json(
        dest / "dataset-metadata.json",
        {"title": DATASET_SLUG, "id": f"{user}/{DATASET_SLUG}", "licenses": [{"name": "apache-2.0"}]},
    )
    return manifest


def data_line(manifest: dict[str, Any]) -> str:
    """`<root> (<real|synthetic 'scale'|unknown>, <fingerprint>)` of the data most models were trained on."""
    kind = manifest.get("data", "unknown")
    if kind == "synthetic":
        kind = f"synthetic '{manifest.get('data_synthetic')}'"
    more = len(manifest.get("trained_on", [])) - 1
    return f"{manifest.get('data_root')} ({kind}, {manifest.get('data_fingerprint')})" + (
        f" and {more} other data root(s): see trained_on" if more > 0 else ""
    )


def models_line(manifest: dict[str, Any]) -> str:
    """`ensemble of lgbm, gnn`, or what each collection packs where they differ or hold no ensemble."""
    models = manifest.get("models") or {}
    full = [*manifest["members"], ENSEMBLE]
    if models and all(sorted(v) == sorted(full) for v in models.values()):
        return f"ensemble of {', '.join(manifest['members'])}"
    groups: dict[str, list[str]] = {}
    for c, v in models.items():
        groups.setdefault(", ".join(v), []).append(c)
    return "; ".join(f"{what} for {', '.join(cs)}" for what, cs in groups.items())


def rows_line(paths: Paths, manifest: dict[str, Any]) -> str:
    """What calibration (`rank --measured`, `tune`) reads, packed beside each LightGBM model: the
    bounded sample of its training rows (tpurank.lgbm.training_rows)."""
    rows = [n for n in manifest["files"] if PurePosixPath(n).name == TRAIN_ROWS_FILE]
    size = sum(unpacked_path(paths, n).stat().st_size for n in rows) / 1e6
    bound = f"at most {MAX_ROWS:,} rows each"
    return f"training rows for calibration: {len(rows)} LightGBM models, {size:.1f} MB ({bound})"


def run(args: argparse.Namespace) -> int:
    dest = project_root() / args.dest if not Path(args.dest).is_absolute() else Path(args.dest)
    user = kaggle_user(args.kaggle_user, COMMAND, warn=False)  # a placeholder is refused before packing
    manifest = build(args.paths, args.cfg, dest, user, allow_synthetic=args.allow_synthetic)
    if user == PLACEHOLDER_USER:
        warn_no_user(COMMAND)
    size = (dest / ARCHIVE).stat().st_size / 1e6
    print(
        f"models dataset in {dest}: {models_line(manifest)}; {len(manifest['files'])} files, {ARCHIVE} {size:.1f} MB"
    )
    print(f"trained on: {data_line(manifest)}; config from {manifest['config_source']}")
    print(rows_line(args.paths, manifest))
    kinds = {d["data"] for d in manifest["trained_on"]}
    if "synthetic" in kinds:
        print(
            f"tpurank {COMMAND}: warning: models trained on SYNTHETIC data (--allow-synthetic): "
            "a submission from them is not a Kaggle result",
            file=sys.stderr,
        )
    if "unknown" in kinds:
        print(
            f"tpurank {COMMAND}: warning: some models recorded neither `data_synthetic` nor a "
            "data root that still exists: real or synthetic data cannot be told (see trained_on)",
            file=sys.stderr,
        )
    print(
        f"upload: kaggle datasets create -p {dest}   (a new version: kaggle datasets version -p {dest} -m MSG)"
    )
    return 0
