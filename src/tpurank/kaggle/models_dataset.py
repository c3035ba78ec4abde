"""`tpurank build-models-dataset`: pack trained models for inference on Kaggle (`tpurank infer`).

Competitors train offline and run a short inference notebook on weights uploaded as a dataset.
This packs what `infer` needs and nothing it does not: the ensemble's weights and its members'
model folders (as one `models.zip`: `kaggle datasets create` uploads top-level files only), the
node-feature rule of the prepared cache (test graphs must be prepared exactly as training saw
them), the resolved config as `config.toml` (its prepare and features sections are checked against
those each member was trained with), and `tpurank-models.json` (members, provenance: git
commit, data fingerprint, seed, time, file checksums) plus `dataset-metadata.json`.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any

from tpurank.core.atomic import atomic_path, write_json, write_text
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config, load_config, to_dict
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.paths import Paths, project_root
from tpurank.core.provenance import provenance
from tpurank.core.toml_write import to_toml
from tpurank.kaggle.code_dataset import kaggle_user
from tpurank.prepare.node_features import RULE_FILE
from tpurank.rankers.registry import MODEL_NAMES

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
    p.add_argument("--kaggle-user", default=None, help="owner of the dataset (default: $KAGGLE_USERNAME)")


# ------------------------------------------------------------------------------------------- reading


def read_json(path: Path, fix: str) -> Any:
    """A JSON file of ours, or a one-line DataError that says how to get a good one (`fix`)."""
    try:
        return json.loads(path.read_bytes())
    except OSError as e:
        raise DataError(path, f"unreadable ({e.strerror or e}); {fix}") from None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise DataError(path, f"not JSON ({e}); {fix}") from None


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


def ensemble_members(paths: Paths) -> list[str]:
    """The models the fitted ensemble combines (every collection must be fitted)."""
    members: set[str] = set()
    for c in COLLECTIONS:
        wfile = paths.model_dir("ensemble", c) / "weights.json"
        if not wfile.exists():
            raise TpurankError(f"{wfile}: ensemble not fitted for {c}; train it first (./run.sh all)")
        weights = read_json(wfile, "fit the ensemble again (./run.sh ensemble)")
        found = weights.get("members") if isinstance(weights, dict) else None
        if not isinstance(found, list) or not found or not all(_is_member_name(m) for m in found):
            raise DataError(
                wfile,
                "no 'members' list of model names; fit the ensemble again (./run.sh ensemble)",
            )
        members.update(found)
    return sorted(members)


INFERENCE_SECTIONS = ("prepare", "features")  # what infer rebuilds on the test graphs


def _results_part(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config section without the settings that change speed only (worker counts)."""
    return None if section is None else {k: v for k, v in section.items() if k != "jobs"}


def _trained_config(side: Path) -> dict[str, Any] | None:
    """The `config` a model's sidecar recorded (None when it has none), its sections checked to be objects."""
    fix = f"retrain {side.parent.parent.name} for {side.parent.name} (or restore the file)"
    record = read_json(side, fix)
    if not isinstance(record, dict):
        raise DataError(side, f"expected a JSON object, found {type(record).__name__}; {fix}")
    trained = record.get("config")
    if trained is None:
        return None
    if not isinstance(trained, dict):
        raise DataError(side, f"'config' is not a JSON object; {fix}")
    for section in INFERENCE_SECTIONS:
        if trained.get(section) is not None and not isinstance(trained[section], dict):
            raise DataError(side, f"'config': [{section}] is not a JSON object; {fix}")
    return trained


def training_configs(paths: Paths, cfg: Config, members: list[str]) -> dict[str, dict[str, Any]]:
    """The config each member was trained with (from its sidecar), per `model/collection`.

    Raises:
        TpurankError: when a section infer depends on differs from `cfg` (then the test graphs
            would be prepared differently from the training graphs).
    """
    out: dict[str, dict[str, Any]] = {}
    for m in members:
        for c in COLLECTIONS:
            folder = paths.model_dir(m, c)
            side = next(
                (folder / n for n in ("provenance.json", "model.json") if (folder / n).exists()), None
            )
            trained = _trained_config(side) if side else None
            if not trained:
                continue
            mine = to_dict(cfg.for_collection(c))
            for section in INFERENCE_SECTIONS:
                if _results_part(trained.get(section)) != _results_part(mine[section]):
                    raise TpurankError(
                        f"{side}: trained with [{section}] {trained.get(section)} but this config has "
                        f"{mine[section]}; pass the --config/--set used for training"
                    )
            out[f"{m}/{c}"] = trained
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


def build(paths: Paths, cfg: Config, dest: Path, user: str) -> dict[str, Any]:
    """Write the models dataset into `dest`; returns its manifest."""
    members = ensemble_members(paths)
    trained = training_configs(paths, cfg, members)
    rule = paths.prepared / RULE_FILE
    if not rule.exists():
        raise TpurankError(
            f"{rule}: no node-feature rule; the models were trained on another prepared cache?"
        )
    files: list[Path] = [rule]
    for m in ["ensemble", *members]:
        for c in COLLECTIONS:
            folder = paths.model_dir(m, c)
            found = [f for f in sorted(folder.rglob("*")) if f.is_file() and f.name not in SKIPPED]
            if not found:
                raise TpurankError(f"{folder}: no trained {m} model for {c}")
            files.extend(found)
    dest.mkdir(parents=True, exist_ok=True)
    with atomic_path(dest / ARCHIVE) as tmp, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in files:
            zf.write(f, archive_name(paths, f))
    write_text(dest / CONFIG, to_toml(to_dict(cfg)))
    if load_config(dest / CONFIG) != cfg:
        raise TpurankError(f"{dest / CONFIG}: the written config does not read back to the same values")
    manifest = provenance(
        cfg,
        paths.data,
        members=members,
        collections=list(COLLECTIONS),
        archive=ARCHIVE,
        archive_sha256=_sha256(dest / ARCHIVE),
        files={archive_name(paths, f): _sha256(f) for f in files},
        training_configs=trained,
    )
    write_json(dest / MANIFEST, manifest)
    write_json(
        dest / "dataset-metadata.json",
        {"title": DATASET_SLUG, "id": f"{user}/{DATASET_SLUG}", "licenses": [{"name": "apache-2.0"}]},
    )
    return manifest


def run(args: argparse.Namespace) -> int:
    dest = project_root() / args.dest if not Path(args.dest).is_absolute() else Path(args.dest)
    manifest = build(args.paths, args.cfg, dest, kaggle_user(args.kaggle_user, "build-models-dataset"))
    size = (dest / ARCHIVE).stat().st_size / 1e6
    print(
        f"models dataset in {dest}: ensemble of {', '.join(manifest['members'])}, {len(manifest['files'])} files, {ARCHIVE} {size:.1f} MB"
    )
    print(
        f"upload: kaggle datasets create -p {dest}   (a new version: kaggle datasets version -p {dest} -m MSG)"
    )
    return 0
