"""What the renderers of bench/figures/figures.py share: the results they read, the figure they return, and
the few number formats the docs use.

A renderer is a small function registered under a name (`@figure("name")`) that reads results
files through `results()` and returns a `Figure`: its markdown and the `Source`s it read. The
sources are the figure's provenance: bench/figures/figures.py writes a source line from them, and
tests/project/test_figures.py refuses a source that does not name its command, commit and date.
"""

from __future__ import annotations

import functools
import json
import statistics
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import provenance

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
GB = 1e9
# beside a commit measured with uncommitted changes to tracked files: the code was not exactly that commit
DIRTY = " with uncommitted changes"


@dataclass(frozen=True)
class Source:
    """One results file a figure reads: `name` in bench/results/, optionally one `part` of it (a key
    whose value carries its own provenance, as bench_gst.py saves each part), or for a file of one
    record per run (bench_budget.py) the `records` read, as a predicate."""

    name: str
    part: str | None = None
    records: Callable[[dict], bool] | None = field(default=None, compare=False)

    def provenances(self) -> list[dict | None]:
        """The provenance of each thing read: the file, its part, or each record picked."""
        data = results(self.name)
        if isinstance(data, list):
            return [provenance.of(r) for r in data if self.records is None or self.records(r)]
        return [provenance.of(data[self.part] if self.part else data)]

    def described(self) -> tuple[str, str]:
        """(where, what): `bench/results/x.json` and `commit abc1234, 2026-11-27, 2 cores, quiet`; for
        records: how many runs, at how many commits, between which dates."""
        provs = [p or {} for p in self.provenances()]
        where = f"bench/results/{self.name}" + (f" (`{self.part}`)" if self.part else "")
        if len(provs) == 1:
            p = provs[0]
            return (
                where,
                f"commit {str(p.get('commit'))[:7]}{DIRTY if p.get('dirty') else ''}, "
                f"{str(p.get('date'))[:10]}, {provenance.machine(p)}",
            )
        commits = {str(p.get("commit"))[:7] for p in provs}
        dates = sorted(str(p.get("date"))[:10] for p in provs)
        span = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
        machines = sorted({provenance.machine(p) for p in provs})
        at = f"{len(commits)} commit{'s' if len(commits) > 1 else ''}"
        dirty = sum(bool(p.get("dirty")) for p in provs)
        at += f", {dirty} of the runs{DIRTY}" if dirty else ""
        return f"{where}: {len(provs)} runs", f"at {at}, {span}, {'; '.join(machines)}"

    def dirty(self) -> bool:
        """Whether any record read was measured with uncommitted changes to tracked files (its code is
        not exactly the commit it names; the source line says so)."""
        return any((p or {}).get("dirty") for p in self.provenances())

    def commits(self) -> set[str]:
        """Every commit the records read name (the test checks that each exists)."""
        return {str(p["commit"]) for p in self.provenances() if p and p.get("commit")}


@dataclass(frozen=True)
class Figure:
    """A rendered figure: its markdown and the results it came from."""

    text: str
    sources: tuple[Source, ...]


RENDERERS: dict[str, Callable[[], Figure]] = {}


def figure(name: str) -> Callable[[Callable[[], Figure]], Callable[[], Figure]]:
    """Register a renderer under the name a marked region of the docs gives."""

    def register(fn: Callable[[], Figure]) -> Callable[[], Figure]:
        old = RENDERERS.get(name)
        where = [Path(f.__code__.co_filename).resolve() for f in (old, fn) if f]
        if len(where) == 2 and where[0] != where[1]:  # a module run again replaces its own renderers
            raise ValueError(f"two renderers named {name}: {where[0]}, {where[1]}")
        RENDERERS[name] = fn
        return fn

    return register


@functools.cache
def results(name: str) -> Any:
    """A results file of bench/results/, read once per process."""
    return json.loads((RESULTS / name).read_text())


# ------------------------------------------------------------------------------------ formats


def minutes(seconds: float) -> str:
    """`109.6 min`: a run's wall time as the docs give it."""
    return f"{seconds / 60:.1f} min"


def gb(value: float, unit: float = 1.0) -> str:
    """`1.91 GB` from GB (or from bytes with unit=GB)."""
    return f"{value / unit:.2f} GB"


def mean_std(values: Iterable[float], digits: int = 4) -> str:
    """`0.1765 ± 0.0267`: mean ± population std over seeds."""
    v = list(values)
    return f"{statistics.fmean(v):.{digits}f} ± {statistics.pstdev(v):.{digits}f}"


def span(values: Iterable[float], fmt: str = "{:.2f}") -> str:
    """`1.85-1.88`, or `-0.007 to +0.001` for signed values: the lowest and highest of some values
    (one value alone when they agree)."""
    v = sorted(values)
    low, high = fmt.format(v[0]), fmt.format(v[-1])
    if low == high:
        return low
    return f"{low} to {high}" if low[0] in "+-" or high[0] in "+-" else f"{low}-{high}"


def signed(value: float, digits: int = 3) -> str:
    """`+0.037`, `-0.017`."""
    return f"{value:+.{digits}f}"


def table(header: list[str], rows: Iterable[list[str]]) -> str:
    """A markdown table."""
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)
