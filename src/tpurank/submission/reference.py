"""Which data a submission CSV is checked against, by `check-submission` and `submit`.

A CSV ranks the test files of one data root, and only that root can check its rows (each row's
config count). The first match wins:

1. the data root the user named (`--data-dir`, `$TPURANK_DATA`);
2. the one recorded with the CSV: the sidecar `<name>.json` its writer put beside it
   (`submission.format.write_submission`), when that root still holds the data;
3. the data at hand (data/, Kaggle's input folder, else the synthetic tree `all` made: the usual
   fallback, `core.paths.synthetic_fallback`), unless it is synthetic and most of the CSV's IDs are
   not its IDs: a real submission downloaded from a Kaggle notebook, say, after the quick start.

Without data for the CSV, only the checks that need none run (`submission.shapes`) and one line
says what was left unchecked and how to check it. Whatever the data, a CSV most of whose IDs the
data does not hold is reported in one line (it ranks other data), never one line per ID.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths, has_dataset, synthetic_fallback, synthetic_scale
from tpurank.submission.csvio import read_rows
from tpurank.submission.format import expected_for_split


@dataclass(frozen=True)
class Reference:
    """The data a CSV is checked against.

    Args:
        paths: the resolved paths over that data; None: no data for this CSV (checks without data).
        note: the one line to print on stderr (where the data came from, or why there is none for
            this CSV); None when the user named the data.
        synthetic: the scale of the synthetic tree it is checked against (None: real data or none).
    """

    paths: Paths | None
    note: str | None
    synthetic: str | None = None


def recorded_root(csv: Path) -> Path | None:
    """The data root recorded in the CSV's sidecar (`<name>.json`), None without a readable one."""
    sidecar = csv.with_suffix(".json")
    try:
        root = json.loads(sidecar.read_text()).get("data_root")
    except (OSError, ValueError, AttributeError):
        return None
    return Path(root) if isinstance(root, str) and root else None


def holds_data(root: Path) -> bool:
    """The folder holds a dataset tree or a sample submission: something to check against."""
    return has_dataset(root) or (root / "sample_submission.csv").is_file()


def csv_ids(csv: Path) -> list[str]:
    """The IDs of a CSV's rows, as written (none when it cannot be read)."""
    try:
        return [r.id for r in read_rows(csv)[0]]
    except TpurankError:
        return []


def foreign_share(ids: list[str], known: set[str]) -> tuple[int, float]:
    """(how many of `ids` are not in `known`, their share): a share over one half means the CSV
    ranks other data (a typo or two in a CSV for this data stays far below it)."""
    unknown = sum(1 for i in set(ids) if i not in known)
    return unknown, unknown / max(1, len(set(ids)))


def _shown(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def find_reference(csv: Path, paths: Paths, split: str = "test", partial: bool = False) -> Reference:
    """The data `csv` is checked against (the module docstring's order).

    Args:
        csv: the submission file.
        paths: the command's paths, resolved without the synthetic fallback (its data root named,
            or the default one).
        split, partial: what the CSV ranks (`check.expected_rows`): the IDs it should hold.
    """
    if paths.data_named:
        return Reference(paths, None, synthetic_scale(paths.data))
    recorded = recorded_root(csv)
    gone = ""
    if recorded is not None:
        if holds_data(recorded):
            note = f"tpurank: data: {_shown(recorded)} (recorded with {csv.name}; --data-dir DIR to check against another)"
            return Reference(paths.with_data(recorded), note, synthetic_scale(recorded))
        gone = f"its recorded data {recorded} is gone"
    at_hand, why = paths.data, ""
    if not holds_data(at_hand) and (found := synthetic_fallback(at_hand)) is not None:
        at_hand, why = found
    if not holds_data(at_hand):  # no data at all: the usual error names the folder, unless one was recorded
        return Reference(None, gone) if gone else Reference(paths, None)
    scale = synthetic_scale(at_hand)
    if scale is None:  # real data at hand (data/, Kaggle's input): the competition's own IDs
        return Reference(paths.with_data(at_hand), None)
    try:
        known = {e.id for e in expected_for_split(paths.with_data(at_hand), split, partial=partial)}
    except TpurankError:  # nothing of this split there: no data for the CSV
        known = set()
    ids = csv_ids(csv)
    unknown, share = foreign_share(ids, known)
    if ids and share > 0.5:
        what = f"{_shown(at_hand)}, the synthetic data at hand, holds {len(set(ids)) - unknown} of its {len(set(ids))} IDs"
        return Reference(None, "; ".join(x for x in (gone, what) if x))
    origin = f", {why}" if why else ""
    note = f"tpurank: data: {_shown(at_hand)} (synthetic '{scale}'{origin}; --data-dir DIR to use another)"
    return Reference(paths.with_data(at_hand), note, scale)


def announce(reference: Reference) -> None:
    """Print the reference's one line, where it has one."""
    if reference.note and reference.paths is not None:
        print(reference.note, file=sys.stderr)
