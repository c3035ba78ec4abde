"""`tpurank runs`: the model x collection pivot, newest run first, with each run's dataset, profile
and training time (m:ss)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpurank.cli import main
from tpurank.core.config import Config, to_dict
from tpurank.report.runs import minutes, read_run


def _write(f: Path, rec: dict) -> None:
    f.parent.mkdir(parents=True, exist_ok=True)
    f.write_text(json.dumps(rec))


def _run(out: Path, data_root: Path, created: str, profile: str | None, scores: dict, seconds: dict) -> None:
    """A run folder as the stages leave it: valid sidecars with scores, model sidecars with seconds."""
    cfg = to_dict(Config())
    if profile is None:
        cfg.pop("profile", None)  # a run saved before configs named their profile
    else:
        cfg["profile"] = profile
    rec = {"config": cfg, "git_commit": "abc", "data_root": str(data_root), "created_utc": created}
    for model, s in scores.items():
        _write(out / "submissions" / f"valid_{model}.json", {**rec, "scores": s})
    for rel, sec in seconds.items():
        name = "provenance.json" if rel.startswith("lgbm") else "model.json"
        _write(out / "models" / rel / name, {**rec, "seconds": sec})


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    synth, real = tmp_path / "demo-data", tmp_path / "tpugraphs-sample"
    _write(synth / "synth.json", {"scale": "demo"})
    real.mkdir()
    old, new = tmp_path / "old", tmp_path / "new"
    _run(
        old,
        real,
        "2024-01-01T10:00:00+00:00",
        None,
        {"gnn": {"tile:xla": 0.9, "overall": 0.9}, "random": {"tile:xla": 0.1, "overall": 0.1}},
        {"gnn/tile-xla": 90.0},
    )
    _run(
        new,
        synth,
        "2024-02-01T10:00:00+00:00",
        "cpu",
        {
            "ensemble": {"layout:xla:random": 0.5, "overall": 0.5},
            "lgbm": {"layout:xla:random": 0.4, "overall": 0.4},
            "gnn": {"layout:xla:random": 0.45, "overall": 0.45},
        },
        {
            "gnn/layout-xla-random": 60.0,
            "gnn/layout-xla-random/seed-1": 61.4,
            "lgbm/layout-xla-random": 5.0,
            "gnn/.next-tile-xla": 999.0,
        },
    )
    return old, new


def test_runs_pivot_newest_first_with_data_profile_and_minutes(two_runs, capsys) -> None:
    old, new = two_runs
    assert main(["runs", str(old), str(new)]) == 0  # the old run named first: still listed last
    lines = capsys.readouterr().out.splitlines()
    head = next(ln for ln in lines if ln.startswith("run "))
    assert head.split()[:9] == [
        "run",
        "model",
        "tile:xla",
        "xla:default",
        "xla:random",
        "nlp:default",
        "nlp:random",
        "overall",
        "train",
    ]
    pivot = lines[lines.index(head) + 1 : lines.index("")]  # the config and source sections follow
    rows = [ln.split() for ln in pivot]
    # runs newest first; within a run, models in registry order (baselines, lgbm, gnn, ensemble)
    assert [r[:2] for r in rows] == [
        ["new", "lgbm"],
        ["new", "gnn"],
        ["new", "ensemble"],
        ["old", "random"],
        ["old", "gnn"],
    ]
    new_gnn, old_gnn = rows[1], rows[4]
    assert new_gnn[2:9] == ["-", "-", "0.4500", "-", "-", "0.4500", "2:01"]  # two seeds: 60 + 61.4 s
    assert new_gnn[9:13] == ["synthetic", "demo:", "demo-data", "cpu"]
    assert old_gnn[2:9] == ["0.9000", "-", "-", "-", "-", "0.9000", "1:30"]
    assert old_gnn[9:12] == ["real:", "tpugraphs-sample", "-"]  # no profile in its config
    assert rows[0][8] == "0:05" and rows[2][8] == "-" and rows[3][8] == "-"  # untrained: no time
    assert new_gnn[-2:] == ["2024-02-01", "10:00"]


def test_runs_dataset_prefers_what_the_report_recorded(two_runs) -> None:
    """A data root gone (or regenerated) since: the validation report's record still tells."""
    _, new = two_runs
    _write(new / "reports" / "validation.json", {"synthetic_scale": "tiny"})
    assert read_run(new)["dataset"] == "synthetic tiny: demo-data"
    _write(new / "reports" / "validation.json", {"synthetic_scale": None})
    assert read_run(new)["dataset"] == "real: demo-data"


def test_runs_label_what_each_figure_is_and_where_the_report_differs(two_runs, capsys) -> None:
    """The pivot's scores are `predict`'s (every config); a fitted ensemble's is in-sample, labelled as
    the report labels it; a report scored on the official subsets is named as the one that differs."""
    from tpurank.validate.stage import IN_SAMPLE

    old, new = two_runs
    _write(new / "models" / "ensemble" / "layout-xla-random" / "weights.json", {"cross_fit": {"score": 0.4}})
    coverage = {"layout_graphs": 3, "on_subset": 2}
    _write(
        new / "reports" / "validation.json",
        {"official_subsets": "eval_indices", "official_subsets_coverage": coverage},
    )
    assert main(["runs", str(old), str(new)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(
        "-- validation score per model and collection: every config of every valid graph"
    )
    assert any(ln.startswith(f"new  {IN_SAMPLE}   ") and "0.5000" in ln for ln in lines)
    assert not any(f"old  {IN_SAMPLE}" in ln for ln in lines)  # no ensemble there
    assert f"note: {IN_SAMPLE}: its weights were fitted on these valid graphs" in "\n".join(lines)
    assert (
        "note: new: reports/validation.md scored 2 of 3 layout graphs on their official subsets, so its "
        "layout and overall figures differ from these"
    ) in lines
    assert not any(ln.startswith("note: old") for ln in lines)  # its report (none) shows the same
    # subsets that listed none of the run's graphs change no figure: no note
    none = {**coverage, "on_subset": 0}
    _write(
        new / "reports" / "validation.json",
        {"official_subsets": "eval_indices", "official_subsets_coverage": none},
    )
    assert read_run(new)["report"] == ""
    # a report of every config (validate --all-configs) differs where a graph has more than 1,000
    _write(new / "reports" / "validation.json", {"official_subsets": None, "all_configs": True})
    assert read_run(new)["report"] == (
        "reports/validation.md scored every config of every graph (--all-configs; here a layout graph of "
        "more than 1,000 is scored on 1,000)"
    )


@pytest.mark.parametrize(
    ("seconds", "shown"), [(None, "-"), (0.4, "0:00"), (59.6, "1:00"), (3725.0, "62:05")]
)
def test_minutes_as_m_ss(seconds: float | None, shown: str) -> None:
    assert minutes(seconds) == shown
