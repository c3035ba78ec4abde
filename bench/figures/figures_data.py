"""Figures of docs/data.md: `tpurank compare-synth`'s tables (the synthetic demo tree beside the
real sample), as bench/runs/bench_compare_synth.py saved them from the command's own output."""

from __future__ import annotations

from figure_kit import Figure, Source, figure, results

COMPARE = "compare_synth.json"


def _table(starts: str) -> Figure:
    """The saved table whose header row starts with `starts` (the command prints its tables in a
    fixed order, but a table is found by its header, not its place)."""
    found = [t for t in results(COMPARE)["tables"] if t.startswith(starts)]
    if len(found) != 1:
        raise ValueError(f"{COMPARE}: {len(found)} tables start with {starts!r}")
    return Figure(found[0], (Source(COMPARE),))


@figure("data_compare_structure")
def structure() -> Figure:
    """The files' structure, synthetic beside real: medians with ranges."""
    return _table("| statistic |")


@figure("data_compare_realism")
def realism() -> Figure:
    """Runtimes and rankings per group, with the distance per statistic."""
    return _table("| group |")


@figure("data_compare_difficulty")
def difficulty() -> Figure:
    """The ranking difficulty: the real train/valid pairs and their synthetic counterparts."""
    return _table("| task |")


@figure("data_compare_summary")
def summary() -> Figure:
    """The command's last line."""
    return Figure(f"`{results(COMPARE)['summary']}`", (Source(COMPARE),))
