"""`tpurank check-submission CSV`: validate any submission CSV, one line per problem, exit 1 if any.

The same checks the writer applies before it writes (tpurank.submission.format): header, every expected
ID exactly once (in any order: Kaggle matches rows by
ID; a different order is reported as a note), no unknown IDs, integer indices in range, tile lists of 5 (all when
fewer configs), layout lists a full permutation of the file's configs.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from tpurank.core.names import Stage
from tpurank.core.options import add_collections
from tpurank.core.paths import Paths
from tpurank.core.staleness import option
from tpurank.submission.format import (
    ExpectedGraph,
    check_csv,
    expected_for_split,
    missing_files,
    order_note,
    read_rows,
    sample_ids_without_file,
)


def reference_name(paths: Paths, split: str) -> str:
    """What the expected IDs come from, for messages."""
    if split == "test" and paths.sample_submission.exists():
        return str(paths.sample_submission)
    return f"the {split} files under {paths.npz}"


def expected_rows(
    paths: Paths, split: str, partial: bool, collections: list[str] | None
) -> tuple[list[ExpectedGraph], set[str]]:
    """(the rows a CSV must hold, the reference IDs it may leave out): `partial` leaves out the
    sample IDs without a test file, `collections` (a run of `all --collections ...`) every other
    collection's IDs."""
    expected = expected_for_split(paths, split, partial=partial)
    absent = sample_ids_without_file(paths) if partial and split == "test" else set()
    if collections:
        absent |= {e.id for e in expected if e.collection not in collections}
        expected = [e for e in expected if e.collection in collections]
    return expected, absent


def check_submission_file(
    csv: str | Path,
    paths: Paths,
    split: str = "test",
    partial: bool = False,
    collections: list[str] | None = None,
) -> list[str]:
    """Every problem of a submission CSV, one line each (empty when it is valid).

    Args:
        csv: the file.
        paths: resolved paths (sample_submission.csv and the split's files).
        split: which split it ranks (test: the sample's IDs and order).
        partial: test only: expect only the sample IDs whose test file exists.
        collections: the collections the CSV ranks (default: all five).
    """
    expected, absent = expected_rows(paths, split, partial, collections)
    return check_csv(csv, expected, reference_name(paths, split), absent)[0]


@dataclass(frozen=True)
class Options:
    """The stage's options (`all` and `infer` build them directly; the CLI parses them)."""

    STAGE: ClassVar[Stage] = Stage.CHECK_SUBMISSION

    csv: str = option(positional=True)
    split: str = "test"
    partial: bool = False
    collections: list[str] | None = None


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("csv", metavar="CSV", help="the submission file")
    p.add_argument(
        "--split",
        default="test",
        choices=["test", "valid", "train"],
        help="which split the CSV ranks (default test: IDs from sample_submission.csv)",
    )
    p.add_argument(
        "--partial",
        action="store_true",
        help="expect only the sample IDs whose test file exists under the data root (partial data)",
    )
    add_collections(p, all_by_default=False, help="the collections the CSV ranks (default: all five)")


def run(args: argparse.Namespace) -> int:
    paths = args.paths
    expected, absent = expected_rows(paths, args.split, args.partial, args.collections)
    problems, parsed = check_csv(args.csv, expected, reference_name(paths, args.split), absent)
    for line in problems:
        print(line)
    note = order_note(read_rows(args.csv)[0], expected, str(args.csv), reference_name(paths, args.split))
    if note:
        print(note, file=sys.stderr)
    unknown = missing_files(expected)
    note = f"; {len(unknown)} IDs without a data file: index ranges not checked for them" if unknown else ""
    print(
        f"{args.csv}: {len(expected)} expected rows, {len(parsed)} valid, {len(problems)} problem(s){note}",
        file=sys.stderr,
    )
    return 1 if problems else 0
