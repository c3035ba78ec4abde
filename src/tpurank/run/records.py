"""Step records: what a stage run leaves in `reports/steps/`, so that the next run of it can be
skipped (the decision is tpurank.core.staleness's `current`, over the stage's declared key).

Every successful run of a stage that declares a record (its `declare(args) -> StageIO`, beside its
code), alone or inside `all`, leaves a record in `reports/steps/`: its options that change the
result, the code, the config sections it reads, and the content key (tpurank.core.staleness) of
what it read and of what it wrote. The next run of that stage with those options is skipped when
all of these still match. Anything a manual command changed (a retrained model, a rewritten data
file, a prediction made with other settings) changes some key, so that step, and through its
outputs every step downstream, runs again: any sequence of commands followed by `all` ends where
a clean `all` ends.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import hashlib
import json
import math
import sys
from pathlib import Path
from typing import Any

import tpurank
from tpurank.core.atomic import write_json
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.staleness import Files, StageIO, current, files_identity

RECORDS = "steps"  # reports/steps/<stage>-<options digest>.json
NEVER_RAN = "no earlier run with these options"
RECORD_STRINGS = ("stage", "code", "config", "reads", "writes")  # a record's fields, each a string
KEYED = ("stage", "options", "code", "config", "reads", "writes")  # what must match for "up to date"


PACKAGE = Path(tpurank.__file__).resolve().parent  # the whole package, wherever this module sits


def package_sources() -> list[Path]:
    """Every module of the package, in one order: what a step's code key covers."""
    return sorted(PACKAGE.rglob("*.py"))


@functools.cache
def source_hash() -> str:
    """Hash of the package's source: a code change reruns the steps (read once per process)."""
    h = hashlib.sha256()
    for f in package_sources():
        h.update(f.relative_to(PACKAGE).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def result_options(options_type: type | None, args: argparse.Namespace) -> dict[str, Any]:
    """The stage's options that change what it writes: the fields of its `Options` dataclass not
    marked `result=False` (tpurank.core.staleness.option), read from `args`."""
    if options_type is None:
        return {}
    fields = dataclasses.fields(options_type)
    return {f.name: getattr(args, f.name) for f in fields if f.metadata.get("result", True)}


def group_name(group: Files) -> str:
    """A declared group of files as a user reads it: its folder or file name and pattern."""
    return f"{group.root.name}/{group.pattern}" if group.pattern else group.root.name


class StepRecord:
    """One stage run's record: its key computed before it runs, saved when it succeeds.

    Args:
        stage: the stage's name.
        io: the stage's declaration for this run.
        options: its options that change the result (`result_options`).
        cfg: the run's config.
        reports: the reports folder (records live in its `steps/`).
    """

    def __init__(self, stage: str, io: StageIO, options: dict[str, Any], cfg: Config, reports: Path) -> None:
        self.io = io
        self.key = {
            "stage": stage,
            "options": json.loads(json.dumps(options, sort_keys=True, default=str)),
            "code": source_hash(),
            "config": io.config_key(cfg),
            "reads": files_identity(io.reads),
        }
        digest = hashlib.sha256(json.dumps(self.key["options"], sort_keys=True).encode()).hexdigest()[:12]
        self.path = reports / RECORDS / f"{stage}-{digest}.json"
        self.cfg = cfg
        self.groups = {group_name(g): files_identity([g]) for g in io.reads}  # each group, to name changes

    def previous(self) -> dict[str, Any] | None:
        """The saved record of this stage with these options, None if absent or unreadable (read once:
        a damaged record is said once)."""
        if not hasattr(self, "_previous"):
            self._previous = self._read()
        return self._previous

    def _read(self) -> dict[str, Any] | None:
        if not self.path.is_file():
            return None
        try:
            rec = json.loads(self.path.read_text())
        except (OSError, ValueError):
            print(f"[steps] {self.path}: damaged step record (ignored: the step runs again)", file=sys.stderr)
            return None
        if not isinstance(rec, dict) or not all(isinstance(rec.get(k), str) for k in RECORD_STRINGS):
            print(f"[steps] {self.path}: not a step record (ignored: the step runs again)", file=sys.stderr)
            return None
        return rec

    def record_key(self, fields: dict[str, Any]) -> str:
        """One key over a record's KEYED fields (saved or computed now)."""
        return self.io.piece_key({k: fields.get(k) for k in KEYED})

    def up_to_date(self) -> bool:
        """Same options, code, config and inputs as its last success, and its outputs untouched:
        the record's fields (KEYED) keyed now and as saved, compared by `current` (asked once: a
        run checks it, then names why it runs, before anything writes)."""
        if not hasattr(self, "_up_to_date"):
            rec = self.previous()
            now = {**self.key, "writes": files_identity(self.io.writes)}
            self._up_to_date = current(
                self.record_key(rec) if rec is not None else None, self.record_key(now)
            )
        return self._up_to_date

    def stale_reason(self) -> str | None:
        """Why the stage must run (None: up to date), in the words a user reads before it runs."""
        if self.up_to_date():
            return None
        rec = self.previous()
        if rec is None:
            return NEVER_RAN
        if rec.get("options") != self.key["options"]:
            return "its options changed"
        if rec["code"] != self.key["code"]:
            return "the code changed"
        if rec["config"] != self.key["config"]:
            before = rec.get("sections") if isinstance(rec.get("sections"), dict) else {}
            now = self.io.section_keys(self.cfg)
            changed = [s for s in now if before.get(s) != now[s]] or list(self.io.sections)
            return f"config changed: {', '.join(changed)}"
        if rec["reads"] != self.key["reads"]:
            before = rec.get("groups") if isinstance(rec.get("groups"), dict) else {}
            now = self.groups
            changed = [g for g in now if before.get(g) != now[g]] or list(now)
            return f"its inputs changed: {', '.join(changed)}"
        return "its outputs changed since it ran"

    def last_seconds(self) -> float | None:
        """How long its last success took (the budget's estimate of this step), None if unknown."""
        rec = self.previous()
        seconds = (
            rec.get("seconds") if rec and rec["reads"] == self.key["reads"] else None
        )  # same inputs only
        ok = isinstance(seconds, int | float) and not isinstance(seconds, bool) and math.isfinite(seconds)
        return float(seconds) if ok and seconds >= 0 else None

    def save(self, seconds: float | None = None) -> None:
        """Record a success: what it read (named before it ran), what it wrote, and how long it took."""
        extra = {"sections": self.io.section_keys(self.cfg), "groups": self.groups}
        if seconds is not None:
            extra["seconds"] = round(seconds, 3)
        self.__dict__.pop("_previous", None)  # the record on disk is this one now
        self.__dict__.pop("_up_to_date", None)
        try:
            write_json(self.path, {**self.key, "writes": files_identity(self.io.writes), **extra})
        except TpurankError as e:  # a file vanished under us: no record, so the next run redoes it
            print(f"tpurank {self.key['stage']}: warning: no step record ({e})", file=sys.stderr)
