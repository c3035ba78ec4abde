"""`tpurank check-submission CSV`: validate any submission CSV, one line per problem, exit 1 if any.

The same checks the writer applies before it writes (tpurank.submission.format): header, every expected
ID exactly once (in any order: Kaggle matches rows by
ID; a different order is reported as a note), no unknown IDs, integer indices in range, tile lists of 5 (all when
fewer configs), layout lists a full permutation of the file's configs. The data a CSV is checked
against: the data root named, else the one recorded with the CSV, else the data at hand where it is
the CSV's (tpurank.submission.reference); without data for it, the checks that need none
(tpurank.submission.shapes) and one line saying what was left unchecked.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from tpurank.core.names import StepCommand
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
from tpurank.submission.reference import Reference, announce, csv_ids, find_reference, foreign_share
from tpurank.submission.shapes import check_shapes


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
    """Every problem of a submission CSV against the data of `paths`, one line each (empty when it
    is valid).

    Args:
        csv: the file.
        paths: resolved paths (sample_submission.csv and the split's files).
        split: which split it ranks (test: the sample's IDs and order).
        partial: test only: expect only the sample IDs whose test file exists.
        collections: the collections the CSV ranks (default: all five).
    """
    return checked(csv, Reference(paths, None), split, partial, collections).problems


@dataclass(frozen=True)
class Checked:
    """The outcome of a check: `problems` (stdout, one a line) and `notes` (stderr: where the data came
    from, the order, the summary line last)."""

    problems: list[str]
    notes: list[str] = field(default_factory=list)
    with_data: bool = True


def checked(
    csv: str | Path,
    ref: Reference,
    split: str = "test",
    partial: bool = False,
    collections: list[str] | None = None,
) -> Checked:
    """Check `csv` against the data of `ref`, or without data when it has none.

    A CSV most of whose IDs the data does not hold ranks other data: one problem line says so,
    instead of one line per unknown and per missing ID.
    """
    if ref.paths is None:
        problems, rows = check_shapes(csv, split)
        summary = (
            f"{csv}: {rows} rows, {len(problems)} problem(s); checked without its data ({ref.note}): the "
            "format, ID shapes and rows per collection only, not each row's config count: pass --data-dir "
            "DIR (the data it ranks) to check every row"
        )
        return Checked(problems, [summary], with_data=False)
    paths = ref.paths
    reference = reference_name(paths, split)
    expected, absent = expected_rows(paths, split, partial, collections)
    ids = csv_ids(Path(csv))
    unknown, share = foreign_share(ids, {e.id for e in expected} | absent)
    if ids and share > 0.5:
        line = (
            f"{csv}: {unknown} of its {len(set(ids))} IDs are not in {reference}: it ranks other data; "
            "pass --data-dir DIR, the data it was made for"
        )
        return Checked([line])
    problems, parsed = check_csv(csv, expected, reference, absent)
    notes = [n for n in [order_note(read_rows(csv)[0], expected, str(csv), reference)] if n]
    missing = missing_files(expected)
    more = f"; {len(missing)} IDs without a data file: index ranges not checked for them" if missing else ""
    notes.append(
        f"{csv}: {len(expected)} expected rows, {len(parsed)} valid, {len(problems)} problem(s){more}"
    )
    return Checked(problems, notes)


def check_as_asked(
    csv: Path, paths: Paths, split: str = "test", partial: bool = False, collections: list[str] | None = None
) -> tuple[Checked, Reference]:
    """`checked` against the data a command line means (`reference.find_reference`), its line printed."""
    ref = find_reference(csv, paths, split, partial)
    announce(ref)
    return checked(csv, ref, split, partial, collections), ref


@dataclass(frozen=True)
class Options:
    """The command's options (`all` and `infer` build them directly; the CLI parses them)."""

    COMMAND: ClassVar[StepCommand] = StepCommand.CHECK_SUBMISSION

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
    csv = Path(args.csv)
    # a command line (it has the run-wide --data-dir) finds the data its CSV was made for; `all` and
    # `infer` (their steps have no run-wide options) check the CSV they just wrote against their data
    if hasattr(args, "data_dir"):
        result, _ = check_as_asked(csv, args.paths, args.split, args.partial, args.collections)
    else:
        result = checked(csv, Reference(args.paths, None), args.split, args.partial, args.collections)
    for line in result.problems:
        print(line)
    for line in result.notes:
        print(line, file=sys.stderr)
    return 1 if result.problems else 0
