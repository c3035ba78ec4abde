"""`tpurank score --submission CSV`: score an `ID,TopConfigs` CSV against known runtimes.

The CSV must pass the submission checks for the split (every graph once, valid lists). With
`--official-subsets DIR` (the `eval_indices/*.json` files: graph name -> config indices) each
listed layout graph is scored only on its official subset: the submitted permutation restricted
to the subset, as the paper's validation did. Layout graphs not listed there are scored on all
their configs, or on 1,000 spread evenly over them where they have more (`data.subsets.scored_configs`:
the official subsets' size; a note says how many graphs were scored on their official subset).
Each graph scored on fewer configs than it has gets a line saying so; `--all-configs` scores every
config of every graph instead (a layout graph's tau over all its configs).
"""

from __future__ import annotations

import argparse
import math
import sys
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.atomic import write_json
from tpurank.core.collections import COLLECTIONS, kind_of
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.links import resolve
from tpurank.core.metrics import graph_metrics, normalized_runtime, overall_score, summarize
from tpurank.core.options import add_scored_configs
from tpurank.core.paths import Paths
from tpurank.data.dataset import discover
from tpurank.data.npz import read_header
from tpurank.data.subsets import SPREAD_NOTE, capped_lines, load_subsets, scored_configs
from tpurank.submission.format import (
    ExpectedGraph,
    check_csv,
    expected_for_split,
    order_note,
    parse_id,
    read_rows,
)


def load_runtimes(path: Path, collection: str) -> np.ndarray:
    """Measured runtime per config index (tile: divided by the normalizers); headers validated.

    Raises:
        DataError: for a malformed file or one without runtimes (a test file).
    """
    kind, _ = read_header(path, kind_of(collection))
    try:
        with np.load(path) as z:
            runtime = z["config_runtime"]
            norm = z["config_runtime_normalizers"] if kind == "tile" else None
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as e:
        raise DataError(path, f"config_runtime: unreadable ({e})") from None
    if len(runtime) and not runtime.any():
        raise DataError(path, "no runtimes (all 0: a test file cannot be scored)")
    if (runtime <= 0).any():
        raise DataError(path, f"config_runtime: {int((runtime <= 0).sum())} non-positive runtimes")
    return normalized_runtime(runtime, norm)


def restrict(
    order: np.ndarray, runtime: np.ndarray, subset: np.ndarray, where: str
) -> tuple[np.ndarray, np.ndarray]:
    """The ranking and runtimes restricted to `subset`, re-indexed 0..len(subset)-1.

    Args:
        order: full permutation, fastest first.
        runtime: runtime per original config index.
        subset: original config indices to keep.
        where: names the subset in errors.
    """
    n = len(runtime)
    if len(subset) == 0 or subset.min() < 0 or subset.max() >= n or len(np.unique(subset)) != len(subset):
        raise DataError(where, f"subset indices must be distinct and in 0..{n - 1}")
    position = np.full(n, -1, dtype=np.int64)
    position[subset] = np.arange(len(subset))
    kept = position[np.asarray(order, dtype=np.int64)]
    return kept[kept >= 0], runtime[subset]


def score_parsed(
    parsed: Mapping[str, list[int]],
    paths: Paths,
    split: str,
    subsets: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    all_configs: bool = False,
) -> list[dict[str, Any]]:
    """Per-graph metric rows (id, collection, stem, configs scored, total_configs, subset, score,
    diagnostics).

    Args:
        parsed: graph ID -> submitted indices (validated).
        paths: resolved paths (runtimes come from the split's files).
        split: a split with runtimes (valid or train).
        subsets: optional official layout subsets (load_subsets).
        all_configs: every config of every graph, neither a subset nor a spread (`--all-configs`).
    """
    files = {f.id: f for f in discover(paths.npz, splits=[split])}
    rows: list[dict[str, Any]] = []
    for graph_id, idx in parsed.items():
        f = files[graph_id]
        runtime = load_runtimes(f.path, f.collection)
        total = len(runtime)
        order = np.asarray(idx, dtype=np.int64)
        subset = None if all_configs else (subsets or {}).get(f.collection, {}).get(f.stem)
        if subset is not None:
            order, runtime = restrict(order, runtime, subset, f"official subset of {f.stem}")
        elif not all_configs and (spread := scored_configs(f.collection, total)) is not None:
            order, runtime = restrict(order, runtime, spread, f"the configs scored of {f.stem}")
        row: dict[str, Any] = {"id": graph_id, "collection": f.collection, "stem": f.stem}
        row.update(configs=len(runtime), total_configs=total, subset=subset is not None)
        rows.append(row | graph_metrics(f.collection, order, runtime))
    return rows


def expected_for_csv(paths: Paths, split: str, csv: str | Path) -> tuple[list[ExpectedGraph], list[str]]:
    """The split's expected rows, limited to the collections the CSV has rows for.

    A CSV written for some collections only (`predict --collections`) is scored on those; a
    missing graph inside a present collection is still a problem. Returns (expected, the
    collections left out).
    """
    expected = expected_for_split(paths, split)
    rows, _ = read_rows(csv)
    present = {parsed[0] for r in rows if (parsed := parse_id(r.id)) is not None}
    left_out = [c for c in COLLECTIONS if c not in present and any(e.collection == c for e in expected)]
    return [e for e in expected if e.collection in present], left_out


def score_csv(
    csv: str | Path,
    paths: Paths,
    split: str = "valid",
    subsets_dir: str | Path | None = None,
    all_configs: bool = False,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, float]]]:
    """Validate and score one CSV: (per-graph rows, per-collection summary); `all_configs` as in
    `score_parsed`.

    Raises:
        TpurankError: when the CSV has problems (the first is quoted; check-submission lists all).
    """
    expected, _ = expected_for_csv(paths, split, csv)
    problems, parsed = check_csv(csv, expected, f"the {split} files under {paths.npz}")
    if not expected and not problems:
        problems = [f"{csv}: no row names a {split} graph"]
    if problems:
        more = (
            f" (and {len(problems) - 1} more: run {command(f'check-submission --split {split}')})"
            if len(problems) > 1
            else ""
        )
        raise TpurankError(f"cannot score: {problems[0]}{more}")
    subsets = load_subsets(subsets_dir) if subsets_dir else None
    rows = score_parsed(parsed, paths, split, subsets, all_configs)
    return rows, summarize(rows)


def scores_json(summary: Mapping[str, Mapping[str, float]]) -> dict[str, float | None]:
    """`{"<collection>": score, ..., "overall": score}` (NaN -> null)."""
    out: dict[str, float] = {c: s["score"] for c, s in summary.items()}
    out["overall"] = overall_score(out)
    return {k: (None if math.isnan(v) else v) for k, v in out.items()}


def _fmt(v: float | None, digits: int = 4) -> str:
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.{digits}f}"


def format_table(summary: Mapping[str, Mapping[str, float]]) -> str:
    """A plain-text table: one line per collection, then the overall mean."""
    head = f"{'collection':<20} {'graphs':>6} {'score':>8} {'pair_acc':>8} {'slow@1':>8} {'slow@5':>8}"
    lines = [head, "-" * len(head)]
    for c, s in summary.items():
        n = f"{int(s['graphs'])}" + (f"+{int(s['undefined'])}" if s["undefined"] else "")
        lines.append(
            f"{c:<20} {n:>6} {_fmt(s['score']):>8} {_fmt(s.get('pair_accuracy')):>8} "
            f"{_fmt(s['slowdown@1']):>8} {_fmt(s['slowdown@5']):>8}"
        )
    overall = scores_json(summary)["overall"]
    lines.append(f"{f'overall ({len(summary)} of {len(COLLECTIONS)})':<20} {'':>6} {_fmt(overall):>8}")
    return "\n".join(lines)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--submission", required=True, metavar="CSV", help="the ID,TopConfigs file to score")
    p.add_argument(
        "--split", default="valid", choices=["valid", "train"], help="split with runtimes (default valid)"
    )
    add_scored_configs(p)
    p.add_argument("--json", metavar="OUT", help="also write {collection: score, ..., overall: score}")


def run(args: argparse.Namespace) -> int:
    if args.json and resolve(args.json) == resolve(args.submission):
        raise TpurankError(f"{args.json}: --json would overwrite the CSV being scored; name another file")
    _, left_out = expected_for_csv(args.paths, args.split, args.submission)
    if left_out:
        print(f"note: the CSV has no rows for {', '.join(left_out)}: not scored", file=sys.stderr)
    rows, summary = score_csv(
        args.submission, args.paths, args.split, args.official_subsets, args.all_configs
    )
    for line in capped_lines(rows):
        print(f"note: {line}", file=sys.stderr)
    expected, _ = expected_for_csv(args.paths, args.split, args.submission)
    reference = f"the {args.split} files under {args.paths.npz}"
    if note := order_note(read_rows(args.submission)[0], expected, str(args.submission), reference):
        print(note, file=sys.stderr)
    print(format_table(summary))
    undefined = sum(int(s["undefined"]) for s in summary.values())
    if undefined:
        print(
            f"note: {undefined} graph(s) with constant runtimes have no tau and are left out (+N above)",
            file=sys.stderr,
        )
    if args.official_subsets:
        full = sum(1 for r in rows if kind_of(r["collection"]) == "layout" and not r["subset"])
        if full:
            print(
                f"note: {full} layout graph(s) not in the official subsets were scored on all configs"
                f"{SPREAD_NOTE}",
                file=sys.stderr,
            )
    if args.json:
        write_json(args.json, scores_json(summary))
    return 0
