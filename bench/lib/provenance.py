"""Where a results file comes from: the command, the commit, the date and the machine.

A figure the docs quote is only as good as what it can be traced to: which command measured it, at
which code, when, and on how busy a machine (a 2-core machine shared with another job gives times
twice as long; scores do not move). Every bench script that saves results stamps them here, so
that bench/figures/figures.py can name the source of each figure it renders and its test can refuse a
source that cannot be traced.

    results["provenance"] = provenance.stamp()

The stamp: `command` (the script and its arguments, as typed from the project root), `commit`
(HEAD) and `dirty` (uncommitted changes to tracked files), both read when the script started (the
code it imported, whatever was committed while it ran), `date` (when the script started, UTC),
`cores`, `load` (the load averages over 1, 5 and 15 minutes when the script started and when it
saved) and `quiet` (the 1- and 5-minute load averages were below QUIET_LOAD when it started: no
other job was running then; the load when it saved includes the bench's own work).

Files saved before the stamp existed get one recovered from git (`recover`, or `python
bench/lib/provenance.py --recover FILE...`): the commit that last changed the file's content and its
date, marked by a `recovered` field that says so. The figures were measured at or before it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
QUIET_LOAD = 0.5  # a 1- and 5-minute load average below it: nothing else was running on the cores
REQUIRED = ("command", "commit", "date")  # what a figure's source must name (tests/project/test_figures.py)
RECOVERED = (
    "commit and date recovered from git log: the last commit that changed this content "
    "(the figures were measured at or before it)"
)


def _git(*args: str) -> str:
    """The output of a git command in the checkout ('' where git or the checkout is missing)."""
    try:
        r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return r.stdout.strip() if r.returncode == 0 else ""


STARTED = dt.datetime.now(dt.UTC)  # this module is imported when a bench script starts
LOAD_AT_START = os.getloadavg()
COMMIT_AT_START = _git("rev-parse", "HEAD") or None  # the code the script imported
DIRTY_AT_START = bool(_git("status", "--porcelain", "--untracked-files=no"))


def command(argv: list[str] | None = None) -> str:
    """The command as it would be typed from the project root: `bench/runs/x.py --flag value`."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve() if argv else Path("?")
    if script.is_relative_to(ROOT):
        argv[0] = str(script.relative_to(ROOT))
    return shlex.join(argv)


def stamp(argv: list[str] | None = None) -> dict[str, Any]:
    """The provenance of results saved now by the running bench script (see the module docstring)."""
    return {
        "command": command(argv),
        "commit": COMMIT_AT_START,
        "dirty": DIRTY_AT_START,
        "date": STARTED.isoformat(timespec="seconds"),
        "cores": os.cpu_count(),
        "load": {"start": list(LOAD_AT_START), "saved": list(os.getloadavg())},
        "quiet": max(LOAD_AT_START[:2]) < QUIET_LOAD,
    }


def of(data: Any) -> dict[str, Any] | None:
    """The provenance a results file (or one part of it) carries, None if it has none."""
    return data.get("provenance") if isinstance(data, dict) else None


def missing(prov: dict[str, Any] | None) -> list[str]:
    """The REQUIRED fields a provenance lacks: a figure rendered from it could not be traced."""
    return [k for k in REQUIRED if not (prov or {}).get(k)]


def machine(prov: dict[str, Any]) -> str:
    """`2 cores, quiet`, `2 cores, loaded` or `2 cores, load not recorded`."""
    cores = f"{prov['cores']} cores" if prov.get("cores") else "cores not recorded"
    quiet = prov.get("quiet")
    return f"{cores}, {'load not recorded' if quiet is None else 'quiet' if quiet else 'loaded'}"


def _content_commits(path: Path) -> list[tuple[str, str, str]]:
    """(commit, date, path at that commit) of every commit that changed the file, newest first,
    following renames (bench/results_x.json became bench/results/x.json)."""
    log = _git("log", "--follow", "--format=@%H %cs", "--name-only", "--", str(path.relative_to(ROOT)))
    out, head = [], None
    for line in log.splitlines():
        if line.startswith("@"):
            head = line[1:].split()
        elif line.strip() and head:
            out.append((head[0], head[1], line.strip()))
    return out


def _shown(commit: str, path: str) -> Any:
    """A results file's content at a commit (None where it cannot be read)."""
    text = _git("show", f"{commit}:{path}")
    try:
        return json.loads(text) if text else None
    except json.JSONDecodeError:
        return None


def recover(path: Path, part: str | None = None) -> dict[str, Any]:
    """A provenance for a file saved without one: the commit that last changed its content (or the
    content of `part`, one key of it) and that commit's date. The command, where the file records
    one, is kept; the caller adds what bench/LOG.md says of the command and the machine."""
    data = json.loads(path.read_text())
    now = data.get(part) if part else data
    strip = {k: v for k, v in (now or {}).items() if k != "provenance"} if isinstance(now, dict) else now
    found = None
    for commit, date, old_path in _content_commits(path):
        old = _shown(commit, old_path)
        old = old.get(part) if part and isinstance(old, dict) else old
        old = {k: v for k, v in old.items() if k != "provenance"} if isinstance(old, dict) else old
        if old != strip:
            break
        found = (commit, date)
    commit, date = found or (None, None)
    recorded = data.get("commit") if isinstance(data, dict) else None
    return {
        "command": (data.get("command") if isinstance(data, dict) else None),
        "commit": recorded or commit,
        "date": date,
        "cores": None,
        "load": None,
        "quiet": None,
        "recovered": RECOVERED if not recorded else RECOVERED.replace("commit and date", "date"),
    }


def recover_records(path: Path, keys: tuple[str, ...]) -> list[str | None]:
    """The date each record of a list-shaped results file (one record per run, appended run by run)
    first appeared in git, a record known by its `keys` (a later rewrite of its other fields, such
    as a unit converted, keeps its first date). None for a record git does not hold yet."""
    first: dict[str, str] = {}
    for _commit, date, old_path in reversed(_content_commits(path)):
        for record in _shown(_commit, old_path) or []:
            first.setdefault(json.dumps([record.get(k) for k in keys]), date)
    return [first.get(json.dumps([r.get(k) for k in keys])) for r in json.loads(path.read_text())]


def main() -> int:
    """`--recover FILE...`: print the provenance git gives each file (to review before adding it)."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--recover", nargs="+", type=Path, required=True, metavar="FILE")
    p.add_argument("--part", help="one key of each file whose content to trace")
    args = p.parse_args()
    for path in args.recover:
        print(path, json.dumps(recover(path.resolve(), args.part)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
