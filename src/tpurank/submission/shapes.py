"""The checks of a submission CSV that need no data: for a CSV whose data is not at hand.

Without the graph files, a row's config count is unknown; what is left is still worth checking
before an upload: the header and the CSV structure, every ID of the form `<collection>:<name>` and
given once, each index list's shape (a tile list holds up to 5 distinct indices, a layout list is a
permutation of 0..n-1 for its own length n), and for the test split the rows per collection, which
are the competition's (894 in all).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tpurank.core.collections import COLLECTIONS
from tpurank.submission.csvio import read_rows, shown
from tpurank.submission.format import check_indices, first_rows, parse_id, parse_indices

# the rows of the competition's sample_submission.csv per collection (894 in all); the test column of
# synth.scales.REAL_COUNTS, spelled here because importing tpurank.synth loads scipy (a test checks
# the two agree, and the real sample's sample_submission.csv where it is at hand)
TEST_ROWS = {
    "tile:xla": 844,
    "layout:xla:random": 8,
    "layout:xla:default": 8,
    "layout:nlp:random": 17,
    "layout:nlp:default": 17,
}


def check_shapes(csv: str | Path, split: str = "test") -> tuple[list[str], int]:
    """Every problem found without data, one line each, and the number of rows read.

    Args:
        csv: the file.
        split: test: the rows per collection are compared with the competition's test set.
    """
    where = str(csv)
    rows, problems = read_rows(csv)
    first_line: dict[str, int] = {}
    per_collection: Counter[str] = Counter()
    for r in first_rows(rows, where, problems, first_line):
        parsed = parse_id(r.id)
        if parsed is None:
            problems.append(f"{where}:{r.line}: unknown ID {r.id!r} (malformed ID)")
            continue
        per_collection[parsed[0]] += 1
        idx, bad = parse_indices(r.top)
        row_problems = [bad] if bad else check_indices(parsed[0], idx, None)
        problems.extend(f"{where}:{r.line}: {shown(r.id)}: {p}" for p in row_problems)
    if split == "test" and rows:
        for c in COLLECTIONS:
            want = TEST_ROWS[c]
            if per_collection[c] != want:
                problems.append(
                    f"{where}: {per_collection[c]} {c} rows; the competition's test set has {want}"
                )
    return problems, len(rows)
