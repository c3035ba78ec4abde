"""`check-submission` and `submit` check a CSV against the data it was made for: the data named, else
the data recorded beside it, else the synthetic demo only when the CSV is the demo's; otherwise the
checks that need no data and one line saying what was left unchecked (never a line per ID)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
from runners import in_process

from tpurank.core.paths import Paths
from tpurank.submission.format import expected_for_split, render, write_submission
from tpurank.synth import generate


@pytest.fixture
def project(tiny_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """A project whose data/ holds only the synthetic tree `all` made, and a second data tree
    elsewhere that looks real (no synth.json); one CSV of each, with and without its sidecar."""
    home = tmp_path / "project"
    shutil.copytree(tiny_root, home / "data" / "synthetic-demo")
    other = tmp_path / "real"
    generate(other, scale="tiny", seed=1, collections=["tile:xla", "layout:xla:random"])
    (other / "synth.json").unlink()
    out = {}
    for name, root in (("demo", home / "data" / "synthetic-demo"), ("real", other)):
        expected = expected_for_split(Paths(data=root, out=home), "test")
        costs = {e.id: np.arange(e.num_configs, dtype=float) for e in expected}
        write_submission(tmp_path / f"{name}.csv", costs, expected, None, root)
        (tmp_path / f"{name}-bare.csv").write_text(render(costs, expected, "bare"))
        out[name] = tmp_path / f"{name}.csv"
        out[f"{name}-bare"] = tmp_path / f"{name}-bare.csv"
    monkeypatch.setenv("TPURANK_HOME", str(home))
    monkeypatch.delenv("TPURANK_DATA", raising=False)
    return {**out, "home": home, "real": other, "real-csv": out["real"]}


def _check(project: dict[str, Path], *args: str):
    return in_process("check-submission", *args, cwd=project["home"])


def test_the_recorded_data_checks_a_csv_after_the_quick_start(project: dict[str, Path]) -> None:
    r = _check(project, str(project["real-csv"]))
    assert r.returncode == 0 and r.stdout == "", r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert (
        lines[0]
        == f"tpurank: data: {project['real']} (recorded with real.csv; --data-dir DIR to check against another)"
    )
    assert lines[-1].endswith("6 expected rows, 6 valid, 0 problem(s)"), r.stderr


def test_a_foreign_csv_beside_the_demo_gets_the_checks_without_data_and_one_line(
    project: dict[str, Path],
) -> None:
    r = _check(project, str(project["real-bare"]))
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "checked without its data" in err[0] and "--data-dir" in err[0], r.stderr
    assert "data/synthetic-demo, the synthetic data at hand, holds 0 of its 6 IDs" in err[0]
    # the rows per collection are the competition's: 5 lines, one per collection, and nothing per ID
    problems = r.stdout.splitlines()
    assert len(problems) == 5 and r.returncode == 1, r.stdout
    assert f"{project['real-bare']}: 4 tile:xla rows; the competition's test set has 844" in problems
    # a broken row is still caught without data
    bad = project["real-bare"].with_name("bad.csv")
    text = project["real-bare"].read_text().splitlines()
    bad.write_text("\n".join([*text[:2], text[2].split(",")[0] + ",0;0;1;2;3", *text[3:]]) + "\n")
    r = _check(project, str(bad))
    assert any("repeated index 0" in x for x in r.stdout.splitlines()), r.stdout


def test_the_demo_csv_without_sidecar_is_checked_against_the_demo(project: dict[str, Path]) -> None:
    r = _check(project, str(project["demo-bare"]))
    assert r.returncode == 0, r.stdout + r.stderr
    assert r.stderr.startswith("tpurank: data: data/synthetic-demo (synthetic 'tiny', made by `tpurank all`")


def test_named_data_that_is_not_the_csvs_is_one_line(project: dict[str, Path]) -> None:
    r = _check(project, str(project["real-csv"]), "--data-dir", "data/synthetic-demo")
    assert r.returncode == 1
    assert r.stdout.splitlines() == [
        f"{project['real-csv']}: 6 of its 6 IDs are not in {project['home'] / 'data/synthetic-demo/sample_submission.csv'}: "
        "it ranks other data; pass --data-dir DIR, the data it was made for"
    ]


def test_a_recorded_data_root_that_is_gone_says_so(project: dict[str, Path], tmp_path: Path) -> None:
    csv = project["real-csv"]
    side = csv.with_suffix(".json")
    side.write_text(json.dumps({**json.loads(side.read_text()), "data_root": str(tmp_path / "gone")}))
    r = _check(project, str(csv))
    assert f"its recorded data {tmp_path / 'gone'} is gone" in r.stderr.strip().splitlines()[-1]


def test_the_competitions_rows_per_collection(sample_root: Path) -> None:
    from tpurank.submission.shapes import TEST_ROWS
    from tpurank.synth.scales import REAL_COUNTS

    assert {c: counts[2] for c, counts in REAL_COUNTS.items()} == TEST_ROWS
    ids = [
        line.split(",")[0] for line in (sample_root / "sample_submission.csv").read_text().splitlines()[1:]
    ]
    assert {c: sum(i.startswith(c + ":") for i in ids) for c in TEST_ROWS} == TEST_ROWS
