"""`tpurank featurize-pb IN.pb OUT`: raw tuning protobuf -> dataset npz file(s).

A ModuleTuningData (layout) becomes one npz at OUT (a folder OUT gets `<IN stem>.npz`); a
TuningData (tile) becomes one npz per kernel inside the folder OUT. Every file is written
atomically, validated with the dataset's own checks, and described by a provenance sidecar
(`<npz name>.json`, e.g. `m.npz.json`, or `OUT/featurize-pb.json` for tile; an existing file of
that name that featurize-pb did not write is never replaced). Re-running with the same input and
options finds the sidecar and does nothing unless --force.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpurank.core.collections import KINDS
from tpurank.core.config import Config
from tpurank.core.declared import featurize_pb_io
from tpurank.core.errors import TpurankError
from tpurank.core.provenance import write_sidecar
from tpurank.core.staleness import StageIO, current
from tpurank.data.npz import save_graph, validate_file
from tpurank.pb.convert import PbWarning, layout_graph, parse_pb, read_bytes, tile_graphs
from tpurank.pb.hlo_features import DEFAULT_LAYOUT_PAD

TILE_SIDECAR = "featurize-pb.json"  # provenance of a tile folder
PAD_CHOICES = (0, -1)  # 0 = the dataset's padding of node layouts; -1 = unambiguous


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("input", metavar="IN.pb", help="a ModuleTuningData (layout) or TuningData (tile) file")
    p.add_argument(
        "output", metavar="OUT", help="layout: the npz to write (or an existing folder); tile: a folder"
    )
    p.add_argument(
        "--pad-layout-with",
        type=int,
        choices=PAD_CHOICES,
        default=DEFAULT_LAYOUT_PAD,
        help="pad node_feat layout columns 134-139 with 0 (as the dataset) or -1 (not ambiguous with dim 0)",
    )
    p.add_argument("--kind", choices=KINDS, help="insist on one message type (default: detect)")
    p.add_argument("--force", action="store_true", help="rewrite outputs even if they are up to date")


def source_key(source: dict) -> str:
    """The key of an output: the input's path and content (its sha256, read once for the parse) and
    the options that change the npz. This stage keeps no step record: each output's sidecar is its
    record, keyed as a piece of the stage's declaration (`featurize_pb_io`)."""
    return featurize_pb_io(Path(source["input"]), None).piece_key(source)


def _up_to_date(sidecar: Path, source: dict, outputs: list[Path] | None = None) -> bool:
    """The sidecar records the same key (same input and options), and its outputs all exist."""
    try:
        rec = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return False
    if not isinstance(rec, dict):
        return False
    files = outputs if outputs is not None else [sidecar.parent / str(f) for f in rec.get("files", [])]
    return current(rec.get("key"), source_key(source), files)


def _require_folder(folder: Path) -> None:
    """An output's folder must exist: a typo in OUT is an error, not a new tree of folders."""
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "no such folder (create it first)"
        raise TpurankError(f"{folder}: {what}")


def _refuse_foreign(targets: list[Path], mine: set[str], src: Path) -> None:
    """Refuse to overwrite an npz that an earlier featurize-pb of this input did not write."""
    foreign = [t for t in targets if t.exists() and t.name not in mine]
    if foreign:
        raise TpurankError(
            f"{foreign[0]}: exists and was not written by featurize-pb from {src}; "
            "refusing to overwrite it (pass --force to replace it)"
        )


def _refuse_foreign_sidecar(sidecar: Path) -> None:
    """Never replace a file we did not write: an existing sidecar must be a featurize-pb record."""
    if not sidecar.exists():
        return
    try:
        rec = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        rec = None
    if not (isinstance(rec, dict) and rec.get("stage") == "featurize-pb"):
        raise TpurankError(f"{sidecar}: exists and is not featurize-pb's record; refusing to overwrite it")


def _recorded_files(sidecar: Path, src: Path) -> set[str]:
    """Files the sidecar says featurize-pb wrote from `src` (empty when there is none)."""
    try:
        rec = json.loads(sidecar.read_text())
    except (OSError, ValueError):
        return set()
    if not isinstance(rec, dict) or rec.get("input") != str(src.resolve()):
        return set()
    return {str(f) for f in rec.get("files", [])}


def declare(args: argparse.Namespace) -> StageIO:
    """It reads the protobufs and writes the output folder (locked while it runs; a missing one
    is left to the error; no step record: each file's sidecar says whether it is up to date)."""
    out = Path(args.output)
    folder = out if out.is_dir() or out.suffix != ".npz" else out.parent
    return featurize_pb_io(Path(args.input), folder if folder.is_dir() else None)


def layout_target(src: Path, out: Path) -> Path:
    """OUT itself, `.npz` appended if missing; inside OUT when it is a folder."""
    if out.is_dir():
        return out / f"{src.stem}.npz"
    return out if out.suffix == ".npz" else out.with_name(out.name + ".npz")


def featurize(
    src: Path,
    out: Path,
    pad: int = DEFAULT_LAYOUT_PAD,
    kind: str | None = None,
    cfg: Config | None = None,
    force: bool = False,
) -> list[Path] | None:
    """Convert one raw file; return the npz files written, or None when they are already up to date.

    Args:
        src: the .pb file.
        out: layout: npz path or folder; tile: folder.
        pad: padding of node_feat columns 134-139 (0 as the dataset, or -1).
        kind: "layout" or "tile" to insist on a message type; None detects it.
        cfg: the resolved Config, saved in the sidecar.
        force: rewrite even when the sidecar says the outputs are current.

    Raises:
        DataError: a missing, truncated or foreign input, or one that breaks the format.
    """
    data = read_bytes(src)
    source = {
        "input": str(src.resolve()),
        "input_sha256": hashlib.sha256(data).hexdigest(),
        "pad_layout_with": pad,
    }
    found, msg = parse_pb(src, data, kind)
    del data  # the parsed message holds everything; raw files can be large
    job = _Job(src=src, msg=msg, pad=pad, cfg=cfg, force=force, source=source)
    if found == "layout":
        return _featurize_layout(job, layout_target(src, out))
    return _featurize_tile(job, out)


@dataclass(frozen=True)
class _Job:
    """One conversion: the input, its parsed message and what the sidecar records about it."""

    src: Path
    msg: Any  # the parsed ModuleTuningData or TuningData
    pad: int
    cfg: Config | None
    force: bool
    source: dict  # input path, its sha256 and the padding: what the output's key is made of


def _featurize_layout(job: _Job, target: Path) -> list[Path] | None:
    """The layout npz at `target` and its sidecar `<target>.json`; None when up to date."""
    _require_folder(target.parent)
    sidecar = target.with_name(target.name + ".json")  # m.npz.json: never a user's m.json
    _refuse_foreign_sidecar(sidecar)
    if not job.force and _up_to_date(sidecar, job.source, [target]):
        return None
    if not job.force:
        _refuse_foreign([target], _recorded_files(sidecar, job.src), job.src)
    graph = layout_graph(job.src, job.msg, job.pad)
    save_graph(target, graph)
    validate_file(target, "layout")
    write_sidecar(
        sidecar,
        job.cfg,
        None,
        stage="featurize-pb",
        kind="layout",
        files=[target.name],
        configs=graph.num_configs,
        runs_in_file=len(job.msg.runs),
        key=source_key(job.source),
        **job.source,
    )
    return [target]


def _featurize_tile(job: _Job, out: Path) -> list[Path] | None:
    """One npz per kernel inside the folder `out`, and its sidecar; None when up to date."""
    if out.exists() and not out.is_dir():
        raise TpurankError(f"{out}: a TuningData (tile) file needs a folder as OUT, not a file")
    _require_folder(out.parent)  # OUT itself is created, but not a missing tree above it
    sidecar = out / TILE_SIDECAR
    _refuse_foreign_sidecar(sidecar)
    if not job.force and _up_to_date(sidecar, job.source):
        return None
    graphs = tile_graphs(job.src, job.msg, job.pad)
    if not job.force:
        _refuse_foreign([out / f"{stem}.npz" for stem in graphs], _recorded_files(sidecar, job.src), job.src)
    if not graphs:
        warnings.warn(
            f"{job.src}: no module is usable as a tile graph: nothing written", PbWarning, stacklevel=3
        )
    written = []
    for stem, graph in graphs.items():
        target = out / f"{stem}.npz"
        save_graph(target, graph)
        validate_file(target, "tile")
        written.append(target)
    write_sidecar(
        sidecar,
        job.cfg,
        None,
        stage="featurize-pb",
        kind="tile",
        files=[p.name for p in written],
        configs={p.stem: g.num_configs for p, g in zip(written, graphs.values(), strict=True)},
        modules_in_file=len(job.msg.modules),
        key=source_key(job.source),
        **job.source,
    )
    return written


def run(args: argparse.Namespace) -> int:
    src, out = Path(args.input), Path(args.output)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        written = featurize(src, out, args.pad_layout_with, kind=args.kind, cfg=args.cfg, force=args.force)
    for w in caught:
        print(f"tpurank featurize-pb: warning: {w.message}", file=sys.stderr)
    if written is None:
        print(f"{out}: up to date with {src} (use --force to rewrite)", file=sys.stderr)
    else:
        where = written[0] if len(written) == 1 else f"{len(written)} files in {out}"
        print(f"wrote {where}", file=sys.stderr)
    return 0
