"""The `ID,TopConfigs` submission: which IDs a split expects, the writer, and the validator.

One validator serves the writer (which refuses to write a CSV with any problem), the
`check-submission` stage (which lists every problem) and the scorer. Expected IDs:

- test split with `sample_submission.csv`: the sample's IDs in the sample's order (Kaggle needs
  all 894). With `partial=True` only those whose test file exists under the data root (for a
  partial dataset such as the 10-file sample; such a CSV is not accepted by Kaggle);
- otherwise (valid, train, or no sample): every file found, in submission order (collections
  in sample order, then file name); valid and train files with 0 configs are left out (nothing
  to rank or score).

A row's indices are checked against the file's config count when the file is at hand: tile
lists hold 5 distinct indices (all when fewer configs), layout lists a full permutation. The CSV
itself is written and read by `submission.csvio` (the csv module's quoting, for IDs that need it).
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.atomic import write_text
from tpurank.core.collections import COLLECTIONS, collection_dir, kind_of
from tpurank.core.config import Config
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.metrics import TILE_TOP_K, order_from_costs
from tpurank.core.paths import DATA_FIX, Paths
from tpurank.core.provenance import write_sidecar
from tpurank.data.dataset import discover
from tpurank.data.npz import read_header
from tpurank.submission.csvio import HEADER, Row, format_row, parse_rows, read_rows, shown

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # indices are checked as int64
MAX_EXAMPLES = 3  # indices quoted in one problem line (a non-permutation can have thousands)
# longest first, so "layout:xla:default:<stem>" never matches a shorter prefix by accident
_PREFIXES = sorted(COLLECTIONS, key=len, reverse=True)


@dataclass(frozen=True)
class ExpectedGraph:
    """One row a submission must hold.

    Args:
        id: `<collection>:<stem>`.
        collection: one of COLLECTIONS.
        num_configs: the file's config count; None when the file is not at hand (then only the
            shape of the list is checked: 5 distinct indices for tile, a permutation for layout).
    """

    id: str
    collection: str
    num_configs: int | None


def parse_id(graph_id: str) -> tuple[str, str] | None:
    """(collection, stem) of a submission ID, or None when no collection prefix matches."""
    for c in _PREFIXES:
        if graph_id.startswith(c + ":") and len(graph_id) > len(c) + 1:
            return c, graph_id[len(c) + 1 :]
    return None


def _num_configs(path: Path) -> int:
    return read_header(path)[1]["config_runtime"][0]


def read_sample_ids(path: Path) -> list[str]:
    """The IDs of `sample_submission.csv`, in order (a broken sample is a DataError)."""
    rows, problems = read_rows(path)
    if problems:
        raise DataError(path, problems[0].split(": ", 1)[-1])
    ids = [r.id for r in rows]
    bad = [i for i in ids if parse_id(i) is None]
    if bad:
        raise DataError(path, f"ID {bad[0]!r} names no known collection")
    if len(set(ids)) != len(ids):
        raise DataError(path, "repeated IDs")
    return ids


def expected_for_split(paths: Paths, split: str, partial: bool = False) -> list[ExpectedGraph]:
    """The rows a submission for `split` must hold, in order (see the module docstring).

    Args:
        paths: resolved paths (data root with npz_all/npz and maybe sample_submission.csv).
        split: train, valid or test.
        partial: test only: keep only sample IDs whose file exists under the data root.

    Raises:
        TpurankError: when nothing is expected (no files and no sample).
    """
    if split == "test" and paths.sample_submission.exists():
        out = []
        for graph_id in read_sample_ids(paths.sample_submission):
            collection, stem = parse_id(graph_id)  # type: ignore[misc]
            f = paths.npz / collection_dir(collection) / "test" / f"{stem}.npz"
            if f.exists():
                out.append(ExpectedGraph(graph_id, collection, _num_configs(f)))
            elif not partial:
                out.append(ExpectedGraph(graph_id, collection, None))
        if not out:
            raise TpurankError(f"no test files of {paths.sample_submission} under {paths.npz}; {DATA_FIX}")
        return out
    files = discover(paths.npz, splits=[split]) if paths.npz.is_dir() else []
    if not files:
        sample = f" (and no {paths.sample_submission} to go by)" if split == "test" else ""
        raise TpurankError(f"{paths.npz}: no {split} files{sample}; {DATA_FIX}")
    out = [ExpectedGraph(f.id, f.collection, _num_configs(f.path)) for f in files]
    # a valid/train graph without configs has nothing to rank or score (check warns, prepare skips it)
    return [e for e in out if e.num_configs or split == "test"]


def sample_ids_without_file(paths: Paths) -> set[str]:
    """The test IDs of sample_submission.csv whose file is not under the data root."""
    if not paths.sample_submission.exists():
        return set()
    out = set()
    for graph_id in read_sample_ids(paths.sample_submission):
        collection, stem = parse_id(graph_id)  # type: ignore[misc]
        if not (paths.npz / collection_dir(collection) / "test" / f"{stem}.npz").exists():
            out.add(graph_id)
    return out


def missing_files(expected: list[ExpectedGraph]) -> list[str]:
    """IDs whose file was not at hand (their config count is unknown)."""
    return [e.id for e in expected if e.num_configs is None]


# ----------------------------------------------------------------------------- reading and checking


def parse_indices(text: str) -> tuple[list[int], str | None]:
    """`0;5;3` -> [0, 5, 3]; returns (indices, problem or None)."""
    if not text:
        return [], "empty TopConfigs"
    out: list[int] = []
    bad: list[str] = []
    huge: list[str] = []
    for tok in text.split(";"):
        tok = tok.strip()
        if tok.isascii() and tok.removeprefix("-").isdigit():
            value = int(tok)
            if INT64_MIN <= value <= INT64_MAX:
                out.append(value)  # a negative index is reported by check_indices
            else:  # no config count comes near; numpy could not even hold it
                huge.append(tok[:24] + ("..." if len(tok) > 24 else ""))
        else:
            bad.append(tok)
    if bad:
        return out, f"not an integer: {', '.join(repr(b) for b in bad[:MAX_EXAMPLES])}"
    if huge:
        return out, f"index out of range (beyond 64 bits): {', '.join(huge[:MAX_EXAMPLES])}"
    return out, None


def _examples(values: np.ndarray) -> str:
    shown = ", ".join(str(int(v)) for v in values[:MAX_EXAMPLES])
    return shown + (", ..." if len(values) > MAX_EXAMPLES else "")


def check_indices(collection: str, idx: list[int], num_configs: int | None) -> list[str]:
    """Problems of one row's index list (empty when it is valid).

    Args:
        collection: decides tile (5 distinct, or all when fewer) or layout (a full permutation).
        idx: the parsed indices, fastest first.
        num_configs: the file's config count, or None when unknown.
    """
    arr = np.asarray(idx, dtype=np.int64)
    problems = []
    upper = num_configs if num_configs is not None else (len(arr) if kind_of(collection) != "tile" else None)
    low = arr[arr < 0]
    if len(low):
        problems.append(f"negative index {_examples(low)}")
    if upper is not None and len(arr[arr >= upper]):
        problems.append(f"index {_examples(arr[arr >= upper])} out of range 0..{upper - 1}")
    values, counts = np.unique(arr, return_counts=True)
    repeated = values[counts > 1]
    if kind_of(collection) == "tile":
        want = min(TILE_TOP_K, num_configs) if num_configs is not None else TILE_TOP_K
        if len(arr) != want and not (num_configs is None and 0 < len(arr) < TILE_TOP_K):
            problems.append(f"{len(arr)} indices, expected {want}")
        if len(repeated):
            problems.append(f"repeated index {_examples(repeated)}")
        return problems
    n = upper if upper is not None else len(arr)
    if len(arr) != n or len(repeated):
        missing = np.setdiff1d(np.arange(n), arr)
        what = [f"{len(arr)} indices for {n} configs"] if len(arr) != n else []
        if len(repeated):
            what.append(f"repeated {_examples(repeated)}")
        if len(missing):
            what.append(f"missing {_examples(missing)}")
        problems.append(f"not a permutation of 0..{n - 1} ({'; '.join(what)})")
    return problems


def first_rows(rows: list[Row], where: str, problems: list[str], first_line: dict[str, int]) -> Iterator[Row]:
    """Each row whose ID is seen for the first time; a repeated ID adds one problem line instead.

    Args:
        rows: from read_rows.
        where: the CSV's name for the messages.
        problems: where the duplicate lines go.
        first_line: filled with each ID's first line (the caller reads it for missing IDs).
    """
    for r in rows:
        if r.id in first_line:
            problems.append(
                f"{where}:{r.line}: duplicate ID {shown(r.id)} (first on line {first_line[r.id]})"
            )
            continue
        first_line[r.id] = r.line
        yield r


def validate_rows(
    rows: list[Row],
    expected: list[ExpectedGraph],
    where: str,
    reference: str = "the expected IDs",
    absent: Collection[str] = (),
) -> tuple[list[str], dict[str, list[int]]]:
    """Every problem of the parsed rows against the expected graphs, one line each.

    Args:
        rows: from read_rows.
        expected: from expected_for_split (rows may come in any order).
        where: the CSV's name for the messages.
        reference: what the expected IDs come from, for 'unknown ID' messages.
        absent: IDs of the reference left out of `expected` because their file is absent
            (partial mode), so that a row for one is not called unknown.

    Returns:
        (problems, {id: indices} of every row whose ID is known and first seen).
    """
    problems: list[str] = []
    by_id = {e.id: e for e in expected}
    first_line: dict[str, int] = {}
    parsed: dict[str, list[int]] = {}
    for r in first_rows(rows, where, problems, first_line):
        exp = by_id.get(r.id)
        if exp is None:
            why = "malformed ID" if parse_id(r.id) is None else f"not in {reference}"
            if r.id in absent:
                why = f"in {reference} but its file is absent, so a partial submission leaves it out"
            problems.append(f"{where}:{r.line}: unknown ID {r.id!r} ({why})")
            continue
        idx, bad = parse_indices(r.top)
        row_problems = [bad] if bad else check_indices(exp.collection, idx, exp.num_configs)
        problems.extend(f"{where}:{r.line}: {shown(r.id)}: {p}" for p in row_problems)
        if not row_problems:
            parsed[r.id] = idx
    for e in expected:
        if e.id not in first_line:
            problems.append(f"{where}: missing ID {shown(e.id)}")
    return problems, parsed


def order_note(rows: list[Row], expected: list[ExpectedGraph], where: str, reference: str) -> str | None:
    """A note when the known rows are not in the expected order (never a problem: Kaggle matches by ID)."""
    position = {e.id: i for i, e in enumerate(expected)}
    seen = [r.id for r in rows if r.id in position]
    for a, b in zip(seen, seen[1:], strict=False):
        if position[b] < position[a]:
            return (
                f"{where}: note: rows are not in the order of {reference} (first: {shown(b)} after {shown(a)}); "
                "Kaggle matches rows by ID, so the order does not matter"
            )
    return None


def check_csv(
    path: str | Path,
    expected: list[ExpectedGraph],
    reference: str = "the expected IDs",
    absent: Collection[str] = (),
) -> tuple[list[str], dict[str, list[int]]]:
    """Read and validate a CSV: (every problem, {id: indices} of the valid rows)."""
    rows, problems = read_rows(path)
    more, parsed = validate_rows(rows, expected, str(path), reference=reference, absent=absent)
    return problems + more, parsed


# ----------------------------------------------------------------------------- writing


def top_configs(collection: str, costs: np.ndarray) -> np.ndarray:
    """The submitted list: indices by cost, fastest first; tile keeps the first 5."""
    order = order_from_costs(costs)
    return order[:TILE_TOP_K] if kind_of(collection) == "tile" else order


def render(
    costs: Mapping[str, np.ndarray], expected: list[ExpectedGraph], where: str, unscored: bool = False
) -> str:
    """The CSV text for `expected` (in its order) from per-graph costs, after full validation.

    Args:
        costs: graph ID -> cost per config index.
        expected: the rows, in order.
        where: names the target in errors.
        unscored: NaN costs are allowed (the valid split: configs a neural ranker did not score,
            `data.subsets.scored_configs`); they follow the scored configs in index order.

    Raises:
        TpurankError: listing the first problems when any cost array or row is invalid.
    """
    problems: list[str] = []
    exp_ids = {e.id for e in expected}
    for extra in sorted(set(costs) - exp_ids)[:MAX_EXAMPLES]:
        problems.append(f"prediction for {shown(extra)} which the submission does not expect")
    lines = [",".join(HEADER)]
    for e in expected:
        c = costs.get(e.id)
        if c is None:
            problems.append(f"no prediction for {shown(e.id)}")
            continue
        c = np.asarray(c, dtype=np.float64)
        if c.ndim != 1 or (e.num_configs is not None and len(c) != e.num_configs):
            problems.append(f"{shown(e.id)}: {c.shape} costs for {e.num_configs} configs")
            continue
        if not np.isfinite(c[~np.isnan(c)] if unscored else c).all():
            problems.append(f"{shown(e.id)}: {int((~np.isfinite(c)).sum())} NaN or infinite costs")
            continue
        top = ";".join(map(str, top_configs(e.collection, c).tolist()))
        lines.append(format_row((e.id, top)))  # quoted only when the ID needs it
    text = "\n".join(lines) + "\n"
    if not problems:  # the text as check-submission will read it: the writer never writes what it rejects
        rows, problems = parse_rows(text, where)
        problems += validate_rows(rows, expected, where)[0]
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise TpurankError(f"{where}: refusing to write an invalid submission: {problems[0]}{more}")
    return text


def write_submission(
    target: Path,
    costs: Mapping[str, np.ndarray],
    expected: list[ExpectedGraph],
    cfg: Config | None,
    data_root: Path | None,
    unscored: bool = False,
    **extra: Any,
) -> Path:
    """Validate, then write `target` (CSV) atomically and its provenance sidecar `<name>.json`.

    Args:
        target: the CSV path, e.g. submissions/test_lgbm.csv.
        costs: graph ID -> cost per config index (lower = faster).
        expected: the rows, in order (expected_for_split).
        cfg: the resolved config (saved in the sidecar).
        data_root: the data root (its fingerprint is saved).
        unscored: NaN costs allowed (`render`).
        **extra: more sidecar fields (models, validation scores, ...).

    Returns:
        the sidecar path.
    """
    text = render(costs, expected, str(target), unscored=unscored)
    write_text(target, text)
    sidecar = target.with_suffix(".json")
    summary = {"rows": len(expected), "complete": not missing_files(expected)}
    write_sidecar(sidecar, cfg, data_root, submission=target.name, **summary, **extra)
    return sidecar


def nan_to_none(scores: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-friendly copy of a score dict (NaN -> None)."""
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in scores.items()}
