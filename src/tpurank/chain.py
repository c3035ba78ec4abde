"""What each stage reads and writes, named by content, and the record of its last success.

Every successful run of prepare, features, train, predict, ensemble and validate, alone or inside
`all`, leaves a record in `reports/steps/`: its options, the code, the config sections it reads,
and the content identity (tpurank.core.identity) of what it read and of what it wrote. `all`
skips a step only when all of these still match. Anything a manual command changed (a retrained
model, a rewritten data file, a prediction made with other settings) changes some identity, so
that step, and through its outputs every step downstream, runs again: any sequence of commands
followed by `all` ends where a clean `all` ends.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import stat
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpurank.core.atomic import write_json
from tpurank.core.config import Config, to_dict
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.identity import file_digest, file_identity
from tpurank.core.paths import Paths

RECORDS = "steps"  # reports/steps/<stage>-<options digest>.json
EVERY_SECTION = ("prepare", "features", "lgbm", "gnn", "baseline", "ensemble")
# options that never change what a stage writes (how fast, or whether to redo it)
NOT_OUTPUT_OPTIONS = {"stage", "paths", "cfg", "config_file", "set", "data_dir", "out_dir", "work_dir"}
NOT_OUTPUT_OPTIONS |= {"force", "jobs"}
# the profile and the layers act through `cfg` (its config key); the budget through the plan it writes
NOT_OUTPUT_OPTIONS |= {"profile", "profile_info", "layers", "budget"}


@dataclass(frozen=True)
class Files:
    """Files a stage reads or writes: everything under `root` (or `root` itself), or the matches
    of `pattern` below it; `exclude` leaves out one top-level folder (the ensemble's own output)."""

    root: Path
    pattern: str = ""
    exclude: str = ""

    def list(self) -> list[Path]:
        if self.pattern:
            found = self.root.glob(self.pattern) if self.root.is_dir() else []
        elif self.root.is_file():
            return [self.root]
        else:
            found = self.root.rglob("*") if self.root.is_dir() else []
        keep = []
        for f in found:
            rel = f.relative_to(self.root).parts
            if any(p.startswith(".") for p in rel) or (self.exclude and rel[0] == self.exclude):
                continue  # locks and temporary files; the excluded folder
            if f.is_file():
                keep.append(f)
        return sorted(keep)


_MEMO: dict[tuple, str] = {}


def _identity(f: Path) -> str:
    """file_identity, remembered for this process while the file is the same inode, size and times
    (a rewrite, always by rename here, makes a new inode): `all` names each file once per run."""
    st = f.stat()
    key = (str(f), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key not in _MEMO:
        try:
            _MEMO[key] = file_identity(f)
        except DataError:  # a broken npz is the stage's to report, in its own words
            _MEMO[key] = file_digest(f) if stat.S_ISREG(st.st_mode) else "not a regular file"
    return _MEMO[key]


def identity(groups: list[Files]) -> str:
    """One digest over every file of `groups`: relative path and content identity."""
    h = hashlib.sha256()
    for g in groups:
        h.update(f"[{g.root.name}:{g.pattern}:{g.exclude}]\n".encode())
        for f in g.list():
            h.update(
                f"{f.relative_to(g.root).as_posix() if f != g.root else f.name}\0{_identity(f)}\n".encode()
            )
    return h.hexdigest()[:32]


def _data(paths: Paths) -> list[Files]:
    return [Files(paths.npz, "**/*.npz"), Files(paths.sample_submission), Files(paths.eval_indices)]


def _predictions(paths: Paths, split: str) -> Files:
    """The members' predictions of a split (the ensemble reads them)."""
    return Files(paths.predictions, f"*/{split}.npz", exclude="ensemble")


def stage_io(args: argparse.Namespace) -> tuple[list[Files], list[Files], tuple[str, ...]] | None:
    """(what the stage reads, what it writes, the config sections it reads); None for stages that
    keep no record (their outputs are not read by another stage, or they are cheap)."""
    paths: Paths = args.paths
    stage = args.stage
    if stage == "prepare":
        return _data(paths), [Files(paths.prepared)], ("prepare",)
    if stage == "features":
        return [Files(paths.prepared)], [Files(paths.tabular)], ("prepare", "features")
    if stage in ("train", "ensemble") and (stage == "ensemble" or args.model == "ensemble"):
        reads = [*_data(paths), Files(paths.prepared), _predictions(paths, "valid")]
        writes = [Files(paths.models / "ensemble")]
        if stage == "ensemble":
            writes.append(Files(paths.predictions / "ensemble"))
        return reads, writes, EVERY_SECTION
    if stage == "train":
        return (
            [Files(paths.prepared), Files(paths.tabular)],
            [Files(paths.models / args.model)],
            (
                "prepare",
                "features",
                args.model,
            ),
        )
    if stage == "predict":
        m, split = args.model, args.split
        reads = [*_data(paths), Files(paths.prepared), Files(paths.models / m)]
        reads.append(_predictions(paths, split) if m == "ensemble" else Files(paths.tabular))
        writes = [
            Files(paths.prediction_file(m, split)),
            Files(paths.submissions, f"{split}_{m}.csv"),
            Files(paths.submissions, f"{split}_{m}.json"),
        ]
        return reads, writes, EVERY_SECTION
    if stage == "validate":
        reads = [*_data(paths), Files(paths.prepared), Files(paths.models), _predictions(paths, "valid")]
        reads += [Files(paths.predictions / "ensemble", "valid.npz"), Files(paths.submissions, "valid_*")]
        reports = paths.reports
        writes = [Files(reports, "validation*"), Files(reports / "plots")]
        return reads, writes, EVERY_SECTION
    return None


@functools.cache
def source_hash() -> str:
    """Hash of the package's source: a code change reruns the steps (read once per process)."""
    h = hashlib.sha256()
    pkg = Path(__file__).resolve().parent
    for f in sorted(pkg.rglob("*.py")):
        h.update(f.relative_to(pkg).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def options(args: argparse.Namespace) -> dict[str, Any]:
    """The stage's own options that decide its outputs (not where files live, not --force)."""
    return {k: v for k, v in sorted(vars(args).items()) if k not in NOT_OUTPUT_OPTIONS}


def record_path(args: argparse.Namespace) -> Path:
    digest = hashlib.sha256(json.dumps(options(args), default=str).encode()).hexdigest()[:12]
    return args.paths.reports / RECORDS / f"{args.stage}-{digest}.json"


def config_key(cfg: Config, sections: tuple[str, ...]) -> str:
    d = to_dict(cfg)
    # a model without a section of its own (the random and heuristic rankers) reads none; of the
    # per-collection tables only the sections it reads count (a new GNN time budget, as `all --budget`
    # plans it, does not make the prepared cache stale)
    over = {c: {s: v for s, v in t.items() if s in sections} for c, t in d["collections"].items()}
    parts = {"seed": cfg.seed, "config": {s: d.get(s) for s in sections}, "overrides": over}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


def _prepare_settings(config: dict[str, Any], collection: str | None) -> dict[str, Any]:
    """The prepare keys that decide what a cache holds, from a config dict, with the collection's
    overrides applied (None: none); `prepare.jobs` changes only how fast it is built."""
    over = config["collections"].get(collection, {}).get("prepare", {}) if collection else {}
    return {k: v for k, v in {**config["prepare"], **over}.items() if k != "jobs"}


def check_prepared(args: argparse.Namespace) -> None:
    """Stop a stage run alone that would read a prepared cache built with other prepare settings.

    `prepare` records the config it built the cache with (its provenance.json); `all` reruns it
    when they differ, but `train --set prepare.hops=2` alone would silently read the old cache.

    Raises:
        TpurankError: the first setting that differs, in one line, with the command that fixes it.
    """
    from tpurank.prepare.stage import PROVENANCE_FILE

    try:
        built = json.loads((args.paths.prepared / PROVENANCE_FILE).read_text())
        config = built["config"]
        had = {c: _prepare_settings(config, c) for c in built["collections"]}
        had_base = _prepare_settings(config, None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # no cache yet, or no record of one: the stage names what is missing
    now = to_dict(args.cfg)
    for c in getattr(args, "collections", None) or sorted(had):
        has = _prepare_settings(now, c)
        for key in sorted(has.keys() & had.get(c, {}).keys()):
            if has[key] != had[c][key]:
                where = "" if had_base.get(key) != _prepare_settings(now, None)[key] else f" for {c}"
                raise TpurankError(
                    f"{args.paths.prepared} was built with prepare.{key}={json.dumps(had[c][key])} but "
                    f"this run has {json.dumps(has[key])}{where}: rerun ./run.sh prepare with this "
                    "setting (or ./run.sh all)"
                )


class Step:
    """One stage run's record: computed before it runs, saved when it succeeds."""

    def __init__(self, args: argparse.Namespace) -> None:
        io = stage_io(args)
        self.args = args
        self.kept = io is not None
        if io is None:
            return
        self.reads, self.writes, sections = io
        if args.stage != "prepare" and any(g.root == args.paths.prepared for g in self.reads):
            check_prepared(args)  # what it reads was built as this run would build it
        self.key = {
            "stage": args.stage,
            "options": options(args),
            "code": source_hash(),
            "config": config_key(args.cfg, sections),
            "reads": identity(self.reads),
        }

    def previous(self) -> dict[str, Any] | None:
        """The saved record of this stage with these options, None if absent or unreadable."""
        path = record_path(self.args)
        if not path.is_file():
            return None
        try:
            rec = json.loads(path.read_text())
        except (OSError, ValueError):
            print(f"[all] {path}: damaged step record (ignored: the step runs again)", file=sys.stderr)
            return None
        return rec if isinstance(rec, dict) else None

    def up_to_date(self) -> bool:
        """Same options, code, config and inputs as its last success, and its outputs untouched."""
        if not self.kept:
            return False
        rec = self.previous()
        if rec is None or {k: rec.get(k) for k in self.key} != json.loads(json.dumps(self.key, default=str)):
            return False
        return rec.get("writes") == identity(self.writes)

    def save(self) -> None:
        """Record a success: what it read (named before it ran) and what it wrote."""
        if self.kept:
            try:
                write_json(record_path(self.args), {**self.key, "writes": identity(self.writes)})
            except TpurankError as e:  # a file vanished under us: no record, so `all` reruns it
                print(f"tpurank {self.args.stage}: warning: no step record ({e})", file=sys.stderr)
