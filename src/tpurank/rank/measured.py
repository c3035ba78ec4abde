"""The runtimes a user measured so far (`rank --measured FILE.csv`), checked against their program.

The CSV has a header `config,runtime_ns` and one row per measured config: its index in the user's
file and its runtime in nanoseconds. A file holding several graphs (a tile protobuf: one per
kernel) needs a `graph` column too (`graph,config,runtime_ns`), naming the graph as `rank` prints
it. Every problem stops the run in one line naming the CSV, before anything is written.

A CSV saved by a spreadsheet reads as the plain file: a UTF-8 byte-order mark is dropped, CRLF line
ends are the csv module's own, and a runtime may be written in any form Python reads as a float
(`1500000`, `1.5e6`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.core.errors import DataError
from tpurank.rank.candidates import Candidates

HEADERS = (("config", "runtime_ns"), ("graph", "config", "runtime_ns"))


@dataclass(frozen=True)
class Measurements:
    """Measured runtimes as read, before they are matched to a program.

    Args:
        source: the CSV (named in every message).
        graph: per row, the graph it names ("" without a graph column).
        config: per row, the config's index in the user's file.
        runtime: per row, the runtime in ns (finite, > 0).
    """

    source: Path
    graph: tuple[str, ...]
    config: tuple[int, ...]
    runtime: tuple[float, ...]


def read_measured(path: Path) -> Measurements:
    """The CSV, every row checked: integer configs, finite positive runtimes, no config twice.

    Args:
        path: the CSV.

    Raises:
        DataError: naming the CSV and its first problem.
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # a spreadsheet's byte-order mark
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as e:
        raise DataError(path, f"unreadable measured runtimes ({e})") from None
    rows = [r for r in rows if any(cell.strip() for cell in r)]
    header = tuple(cell.strip() for cell in rows[0]) if rows else ()
    if header not in HEADERS:
        want = " or ".join(",".join(h) for h in HEADERS)
        raise DataError(path, f"header {','.join(header) or '(empty file)'!r}, expected {want}")
    graphs, configs, runtimes = [], [], []
    seen: dict[tuple[str, int], int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != len(header):
            raise DataError(path, f"line {line}: {len(row)} fields, expected {len(header)}")
        graph = row[0].strip() if len(header) == 3 else ""
        config, runtime = _config(path, line, row[-2]), _runtime(path, line, row[-1])
        if (graph, config) in seen:
            raise DataError(
                path, f"line {line}: config {config} measured twice (also line {seen[graph, config]})"
            )
        seen[graph, config] = line
        graphs.append(graph)
        configs.append(config)
        runtimes.append(runtime)
    if not configs:
        raise DataError(path, "no measured configs below the header")
    return Measurements(path, tuple(graphs), tuple(configs), tuple(runtimes))


def _config(path: Path, line: int, cell: str) -> int:
    try:
        value = int(cell.strip())
    except ValueError:
        raise DataError(path, f"line {line}: config {cell.strip()!r} is not an integer index") from None
    if value < 0:
        raise DataError(path, f"line {line}: config {value} is negative")
    return value


def _runtime(path: Path, line: int, cell: str) -> float:
    try:
        value = float(cell.strip())
    except ValueError:
        raise DataError(path, f"line {line}: runtime_ns {cell.strip()!r} is not a number") from None
    if math.isnan(value) or math.isinf(value):
        raise DataError(path, f"line {line}: runtime_ns {cell.strip()} is not a finite number")
    if value <= 0:
        raise DataError(path, f"line {line}: runtime_ns {value:g} is not positive")
    return value


def assign(m: Measurements, graphs: Sequence[Candidates]) -> dict[str, dict[int, float]]:
    """Each graph's measured configs: graph name -> position in the graph -> runtime.

    Args:
        m: the measured runtimes.
        graphs: the graphs of the one file they were measured on.

    Raises:
        DataError: naming the CSV: a graph or config the file lacks, or a config whose run failed.
    """
    names = [g.name for g in graphs]
    out: dict[str, dict[int, float]] = {}
    for i, (graph, config, runtime) in enumerate(zip(m.graph, m.config, m.runtime, strict=True), start=2):
        g = _graph(m.source, i, graph, graphs, names)
        position = np.flatnonzero(g.file_index == config)
        if not len(position):
            raise DataError(m.source, f"line {i}: config {config} {_absent(g, config)}")
        out.setdefault(g.name, {})[int(position[0])] = runtime
    return out


def _graph(source: Path, line: int, graph: str, graphs: Sequence[Candidates], names: list[str]) -> Candidates:
    """The graph a row names (the only one when the file holds one graph)."""
    if not graph:
        if len(graphs) > 1:
            raise DataError(
                source,
                f"{graphs[0].source} holds {len(graphs)} graphs: add a graph column (graph,config,runtime_ns)",
            )
        return graphs[0]
    if graph not in names:
        some = ", ".join(names[:5]) + (" ..." if len(names) > 5 else "")
        raise DataError(source, f"line {line}: graph {graph!r} is not in {graphs[0].source} (it has {some})")
    return graphs[names.index(graph)]


def _absent(g: Candidates, config: int) -> str:
    """Why a config index is not one of the graph's candidates."""
    if config in g.failed:
        return f"failed in {g.source} (its run has an error): a failed config has no runtime"
    return f"is not a config of {g.source} (its configs: {_span(g.file_index)})"


def _span(index: np.ndarray) -> str:
    if len(index) and int(index[-1]) - int(index[0]) + 1 == len(index):
        return f"{int(index[0])}..{int(index[-1])}"
    return f"{len(index)} indices from {int(index.min())} to {int(index.max())}"
