"""The CSV layer of a submission: one writer and one reader, both the csv module's (RFC 4180).

A graph file's name can hold a comma, a quote or a line break; its ID is then quoted the way the
csv module (and pandas, which Kaggle reads submissions with) quotes it, and every consumer (the
writer's own check, `check-submission`, `score`, `validate`) parses the file with the same reader.
Plain IDs are never quoted, so ordinary output bytes are those of a plain `ID,TopConfigs` file.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.core.identity import regular_file

HEADER = ("ID", "TopConfigs")


@dataclass(frozen=True)
class Row:
    """One parsed data row of a CSV (`line` is 1-based, where the record starts; the header is line 1)."""

    line: int
    id: str
    top: str


def format_row(fields: Sequence[str]) -> str:
    """One CSV record without its line end, fields quoted only when they need it.

    The writer's line terminator is CRLF so that Python 3.11's QUOTE_MINIMAL quotes a lone `\\r`
    as well as `\\n` (it quotes the characters of the terminator); the terminator itself is
    dropped: records are joined with `\\n`, as in Kaggle's sample_submission.csv.
    """
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\r\n").writerow(fields)
    return buf.getvalue()[:-2]


def csv_text(records: Iterable[Sequence[str]]) -> str:
    """Whole CSV text, one record a line (`format_row`), ending with a line end: every ID,TopConfigs
    file tpurank writes, its own sample_submission.csv included, so a name with a comma stays one field."""
    return "".join(format_row(r) + "\n" for r in records)


def shown(graph_id: str) -> str:
    """An ID as messages print it: as is, or quoted with escapes when it would break the line."""
    return graph_id if graph_id.isprintable() else repr(graph_id)


def parse_rows(text: str, where: str) -> tuple[list[Row], list[str]]:
    """Rows of a CSV text; structural problems (header, field count, a broken quote) as lines.

    The ID is kept exactly as written (Kaggle does not strip it); TopConfigs is stripped.
    """
    if not text.strip():
        return [], [f"{where}:1: empty file (expected the header {','.join(HEADER)})"]
    # a layout graph's full ranking is one field: 100,000 configs make ~600 kB, past csv's 128 kB default
    csv.field_size_limit(max(csv.field_size_limit(), len(text) + 1))
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    problems: list[str] = []
    rows: list[Row] = []
    start = 1
    try:
        for i, rec in enumerate(reader):
            if i == 0:
                if tuple(f.strip() for f in rec) != HEADER:
                    shown_header = ",".join(rec)
                    problems.append(f"{where}:1: bad header {shown_header!r} (expected {','.join(HEADER)!r})")
            elif not rec:
                problems.append(f"{where}:{start}: empty line")
            elif len(rec) != 2:
                problems.append(f"{where}:{start}: {len(rec)} fields, expected 2 (ID,TopConfigs)")
            else:
                rows.append(Row(start, rec[0], rec[1].strip()))
            start = reader.line_num + 1
    except csv.Error as e:
        problems.append(f"{where}:{start}: not valid CSV ({e})")
    return rows, problems


def read_rows(path: str | Path) -> tuple[list[Row], list[str]]:
    """Parse a submission CSV into rows; structural problems (header, field count) as lines.

    A CSV saved by a spreadsheet reads as the plain file: its UTF-8 byte-order mark is dropped
    (utf-8-sig; pandas, which Kaggle reads with, drops it too) and its CRLF line ends are the csv
    module's own record ends.

    Raises:
        TpurankError: when the file cannot be read at all.
    """
    path = Path(path)
    regular_file(path)  # a FIFO would block the reader forever
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # newline="": a quoted \r stays a \r
            text = f.read()
    except FileNotFoundError:
        raise TpurankError(f"{path}: no such file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TpurankError(f"{path}: unreadable ({e})") from None
    return parse_rows(text, str(path))
