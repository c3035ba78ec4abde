"""What `infer` unpacked into an out folder, so it never replaces models it did not put there.

`infer` writes a models dataset's files where the stages read them: the models under the out
folder's `models/`, the node-feature rule under the work folder's `features/prepared/`. The out
folder may be one where models were trained (it defaults to the project root, where `all` trains):
unpacking there would replace newer models with the packed ones. So `infer` keeps a marker,
`models/.unpacked-by-infer.json`, of every file it unpacked and its checksum. A file of `models/`
(or a file it would replace) that the marker does not name with its current checksum was put there
by something else (training), and `infer` refuses the folder unless `--replace-models` says to
replace them. A file identical to the packed one is never refused: replacing it changes nothing.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from tpurank.core.atomic import write_json
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.staleness import Files
from tpurank.kaggle.models_dataset import unpacked_path

MARKER = ".unpacked-by-infer.json"  # hidden: left out of step records, never packed
REPLACE_FLAG = "--replace-models"


def marker_path(paths: Paths) -> Path:
    return paths.models / MARKER


def _digest(f: Path) -> str | None:
    try:
        return hashlib.sha256(f.read_bytes()).hexdigest() if f.is_file() else None
    except OSError:
        return None


def recorded(paths: Paths) -> dict[str, list[str]]:
    """Archive name -> the checksums infer wrote there; {} without a marker (or a broken one: then
    nothing counts as infer's, and the folder is refused rather than overwritten)."""
    try:
        data = json.loads(marker_path(paths).read_bytes())
    except (OSError, ValueError):
        return {}
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, dict):
        return {}
    return {n: [d for d in ds if isinstance(d, str)] for n, ds in files.items() if isinstance(ds, list)}


def foreign(paths: Paths, files: dict[str, str]) -> list[Path]:
    """The files infer must not replace: every file of `models/`, and each existing target of the
    dataset's `files` (archive name -> sha256), that infer did not unpack as it is now and that is not
    identical to the packed file it would be replaced by; those it would replace first."""
    mine = recorded(paths)
    names = {unpacked_path(paths, n): n for n in [*mine, *files]}
    targets = [unpacked_path(paths, n) for n in files]
    found = {*Files(paths.models).list(), *(t for t in targets if t.exists() or t.is_symlink())}
    out = []
    for f in sorted(found, key=lambda f: (f not in targets, f)):  # those it would replace first
        name, digest = names.get(f), _digest(f)
        if (
            name is not None
            and digest is not None
            and (digest in mine.get(name, []) or digest == files.get(name))
        ):
            continue
        out.append(f)
    return out


def refuse_foreign(paths: Paths, files: dict[str, str], replace: bool) -> None:
    """Raise unless the out folder holds only what infer unpacked (or `replace`).

    Raises:
        TpurankError: one line naming the folder, a file and how many, and the two ways on.
    """
    found = foreign(paths, files)
    if not found or replace:
        return
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    raise TpurankError(
        f"{paths.out}: holds models infer did not unpack ({found[0]}{more}: trained here?), which the "
        f"models dataset's would replace; name another --out-dir, or pass {REPLACE_FLAG} to replace them"
    )


def record(paths: Paths, files: dict[str, str]) -> None:
    """Add the dataset's files to the marker (before unpacking: a file left half-way is then still
    infer's); `prune` afterwards keeps only the checksums the files now have."""
    mine = recorded(paths)
    for name, digest in files.items():
        mine[name] = sorted({*mine.get(name, []), digest})
    _write(paths, mine)


def adopt(paths: Paths, files: dict[str, str]) -> None:
    """Add the checksum each of the dataset's files has on disk now: after an unpacking that failed
    half-way (a copy that differs from the manifest), what infer wrote is still infer's, so the next
    infer with a sound dataset replaces it without --replace-models."""
    mine = recorded(paths)
    for name in files:
        if (digest := _digest(unpacked_path(paths, name))) is not None:
            mine[name] = sorted({*mine.get(name, []), digest})
    _write(paths, mine)


def prune(paths: Paths) -> None:
    """The marker with each file's current checksum only (files gone or changed since dropped)."""
    kept: dict[str, Any] = {}
    for name, digests in recorded(paths).items():
        digest = _digest(unpacked_path(paths, name))
        if digest in digests:
            kept[name] = [digest]
    _write(paths, kept)


def _write(paths: Paths, files: dict[str, Any]) -> None:
    paths.models.mkdir(parents=True, exist_ok=True)
    write_json(marker_path(paths), {"written_by": "tpurank infer", "files": files})
