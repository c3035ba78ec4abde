"""Submission IDs that need CSV quoting (a comma, a quote, a line break in a graph file's name).

The writer quotes them with the csv module, and the writer's own check, `check-submission` and
`score` read them back with the same reader; plain IDs are written byte for byte as before.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.submission.check import check_submission_file
from tpurank.submission.csvio import HEADER, csv_text, format_row, parse_rows, read_rows
from tpurank.submission.format import ExpectedGraph, expected_for_split, render, write_submission
from tpurank.submission.score import score_csv

ROOT = Path(__file__).resolve().parents[2]
TILE, XLA = "tile:xla", "layout:xla:random"
ODD_STEMS = ['a,b"c\nd', "comma,only", 'quote"only', "cr\ronly", "crlf\r\ninside", "trailing space "]


def test_plain_ids_are_never_quoted() -> None:
    assert format_row((f"{TILE}:bert_pretraining.2x2.fp32_ec2f", "0;8;5")) == (
        f"{TILE}:bert_pretraining.2x2.fp32_ec2f,0;8;5"
    )
    expected = [ExpectedGraph(f"{TILE}:a", TILE, 3), ExpectedGraph(f"{XLA}:c-d_e.f", XLA, 2)]
    text = render({e.id: np.arange(e.num_configs, dtype=float) for e in expected}, expected, "x.csv")
    assert text == f"ID,TopConfigs\n{TILE}:a,0;1;2\n{XLA}:c-d_e.f,0;1\n"


@pytest.mark.parametrize("stem", ODD_STEMS)
def test_an_odd_id_is_quoted_and_reads_back_exactly(stem: str, tmp_path: Path) -> None:
    expected = [ExpectedGraph(f"{TILE}:{stem}", TILE, 7), ExpectedGraph(f"{TILE}:plain", TILE, 5)]
    costs = {e.id: np.arange(e.num_configs, 0, -1, dtype=float) for e in expected}
    text = render(costs, expected, "x.csv")
    quote = '"' if any(ch in stem for ch in ',"\r\n') else ""  # quoted only when needed
    assert text.startswith(f"ID,TopConfigs\n{quote}{TILE}:") and text.endswith(f"\n{TILE}:plain,4;3;2;1;0\n")
    f = tmp_path / "sub.csv"
    f.write_bytes(text.encode())
    rows, problems = read_rows(f)
    assert problems == []
    assert [(r.line, r.id, r.top) for r in rows] == [
        (2, f"{TILE}:{stem}", "6;5;4;3;2"),
        (2 + len(stem.splitlines()), f"{TILE}:plain", "4;3;2;1;0"),  # after the ID's line breaks
    ]


def test_a_broken_quote_is_one_problem_and_odd_ids_print_on_one_line() -> None:
    rows, problems = parse_rows(f'ID,TopConfigs\n"{TILE}:a,0;1;2;3;4\n', "s.csv")
    assert rows == [] and len(problems) == 1 and problems[0].startswith("s.csv:2: not valid CSV")
    expected = [ExpectedGraph(f"{TILE}:x\ny", TILE, 5)]
    with pytest.raises(TpurankError) as e:
        render({}, expected, "s.csv")
    assert (
        str(e.value) == "s.csv: refusing to write an invalid submission: no prediction for 'tile:xla:x\\ny'"
    )


def _odd_copy(tiny_root: Path, tmp_path: Path) -> tuple[Paths, dict[str, str]]:
    """A copy of the tiny data where one valid file of two collections also exists under an odd name."""
    data = tmp_path / "data"
    shutil.copytree(tiny_root, data)
    odd = {}
    for collection, folder, stem in (
        (TILE, "tile/xla", 'a,b"c\nd'),
        (XLA, "layout/xla/random", 'q"r,s\r\nt'),
    ):
        valid = data / NPZ_SUBDIR / folder / "valid"
        source = sorted(valid.glob("*.npz"))[0]
        shutil.copyfile(source, valid / f"{stem}.npz")
        odd[f"{collection}:{stem}"] = f"{collection}:{source.stem}"
    return Paths(data=data, out=tmp_path / "out"), odd


def test_odd_file_names_round_trip_through_write_check_and_score(tiny_root: Path, tmp_path: Path) -> None:
    paths, odd = _odd_copy(tiny_root, tmp_path)
    expected = [e for e in expected_for_split(paths, "valid") if e.collection in (TILE, XLA)]
    assert set(odd) <= {e.id for e in expected}
    rng = np.random.default_rng(3)
    costs = {e.id: rng.random(e.num_configs) for e in expected}
    for copy, source in odd.items():
        costs[copy] = costs[source]  # the same ranking of the same file: the same score
    target = paths.out / "submissions" / "valid_x.csv"
    write_submission(target, costs, expected, None, paths.data)
    raw = target.read_bytes()
    assert b'"tile:xla:a,b""c\nd",' in raw and b'"layout:xla:random:q""r,s\r\nt",' in raw
    assert check_submission_file(target, paths, "valid") == [
        f"{target}: missing ID {e.id}" for e in expected_for_split(paths, "valid") if e not in expected
    ]
    rows, summary = score_csv(target, paths, "valid")
    score = {r["id"]: r["score"] for r in rows}
    assert len(score) == len(expected) and set(odd) <= set(score)
    for copy, source in odd.items():
        assert score[copy] == pytest.approx(score[source])
    assert summary[TILE]["graphs"] == len([e for e in expected if e.collection == TILE])


def test_check_submission_cli_accepts_quoted_ids(tiny_root: Path, tmp_path: Path) -> None:
    paths, odd = _odd_copy(tiny_root, tmp_path)
    expected = expected_for_split(paths, "valid")
    costs = {e.id: np.arange(e.num_configs, dtype=float) for e in expected}
    csv = tmp_path / "valid.csv"
    csv.write_bytes(render(costs, expected, str(csv)).encode())
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpurank",
            "check-submission",
            str(csv),
            "--split",
            "valid",
            "--data-dir",
            str(paths.data),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"{len(expected)} expected rows, {len(expected)} valid, 0 problem(s)" in r.stderr


def test_csv_text_keeps_every_odd_id_one_field() -> None:
    """The whole-file writer (rank's own sample_submission.csv): read back, each ID as it was."""
    ids = [f"{TILE}:{stem}" for stem in ["run 1,final", *ODD_STEMS]]
    text = csv_text([HEADER, *((i, "0") for i in ids)])
    assert text.startswith("ID,TopConfigs\n") and text.endswith("\n")
    rows, problems = parse_rows(text, "x.csv")
    assert problems == [] and [r.id for r in rows] == ids and {r.top for r in rows} == {"0"}
