"""What is saved next to every model, report and submission so a result can be reproduced:
the seed and resolved config, the git commit, a fingerprint of the data, and the time."""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import platform
import subprocess
from pathlib import Path
from typing import Any

from tpurank import __version__
from tpurank.core.atomic import write_json
from tpurank.core.config import Config, to_dict
from tpurank.core.errors import DataError
from tpurank.core.identity import file_identity
from tpurank.core.paths import NPZ_SUBDIR, SAMPLE_SUBMISSION, project_root, synthetic_scale


def git_commit() -> str:
    """The checkout's commit, with `+dirty` when it has uncommitted changes; 'unknown' elsewhere."""
    return _commit_of(project_root())


@functools.cache
def _commit_of(root: Path) -> str:
    """Asked of git once per process and root, not at every sidecar (two git processes, ~15 ms; an
    `all` writes about 80): a process keeps running the code it imported, so an edit of the checkout
    during a run does not change what produced its later results either."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return sha + ("+dirty" if dirty else "")


def data_fingerprint(data_root: Path) -> str:
    """sha256 over the sorted (relative path, content identity) of every npz and the sample submission.

    Content, never timestamps (tpurank.core.identity): an npz is named by its zip directory (each
    member's CRC-32 and size, nothing decompressed), so a copy with new timestamps keeps the
    fingerprint and a file rewritten under its own name changes it.
    """
    h = hashlib.sha256()
    npz = data_root / NPZ_SUBDIR
    files = sorted(npz.rglob("*.npz")) if npz.is_dir() else []
    sample = data_root / SAMPLE_SUBMISSION
    if sample.exists():
        files.append(sample)
    for f in files:
        try:
            ident = file_identity(f)
        except DataError:  # a dangling link or unreadable file counts, as such
            ident = "unreadable"
        h.update(f"{f.relative_to(data_root)}:{ident}\n".encode())
    return f"sha256:{h.hexdigest()[:16]}:{len(files)}files"


def provenance(
    cfg: Config | None, data_root: Path | None, *, fingerprint: str | None = None, **extra: Any
) -> dict[str, Any]:
    """The standard record: version, commit, time, host, seed, config, data root and fingerprint (and
    `data_synthetic`, the scale, when the data root is a synthetic tree). `fingerprint`: the data
    root's, where the caller has just taken it (a predict step writes a sidecar per collection;
    each would read the zip directory of every npz again)."""
    rec: dict[str, Any] = {
        "tpurank_version": __version__,
        "git_commit": git_commit(),
        "created_utc": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": platform.python_version(),
    }
    if cfg is not None:
        rec["seed"] = cfg.seed
        rec["config"] = to_dict(cfg)
    if data_root is not None:
        rec["data_root"] = str(data_root)
        rec["data_fingerprint"] = fingerprint or data_fingerprint(data_root)
        if (scale := synthetic_scale(data_root)) is not None:  # not Kaggle data: build-models-dataset asks
            rec["data_synthetic"] = scale
    rec.update(extra)
    return rec


def write_sidecar(
    path: Path, cfg: Config | None, data_root: Path | None, *, fingerprint: str | None = None, **extra: Any
) -> None:
    """Write the provenance record as JSON at `path` (atomically)."""
    write_json(path, provenance(cfg, data_root, fingerprint=fingerprint, **extra))
