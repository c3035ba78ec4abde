"""The submission writer and validator: real sample files, and every kind of broken CSV."""

from __future__ import annotations

import numpy as np
import pytest

from tpurank import cli
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.models.predictions import load_predictions, save_predictions
from tpurank.submission.check import check_submission_file
from tpurank.submission.format import (
    ExpectedGraph,
    check_csv,
    expected_for_split,
    order_note,
    read_rows,
    read_sample_ids,
    render,
    write_submission,
)

TILE, XLA = "tile:xla", "layout:xla:random"
# A hand-made expectation: no data files needed for the validator itself.
EXPECTED = [
    ExpectedGraph(f"{TILE}:a", TILE, 7),
    ExpectedGraph(f"{TILE}:b", TILE, 3),
    ExpectedGraph(f"{XLA}:c", XLA, 4),
]
GOOD = ["ID,TopConfigs", f"{TILE}:a,6;0;1;2;3", f"{TILE}:b,2;0;1", f"{XLA}:c,3;1;0;2"]


def _check(tmp_path, lines: list[str]) -> list[str]:
    f = tmp_path / "sub.csv"
    f.write_text("\n".join(lines) + "\n")
    return check_csv(f, EXPECTED)[0]


def test_good_csv_has_no_problem(tmp_path):
    assert _check(tmp_path, GOOD) == []


def _replace(i: int, line: str) -> list[str]:
    out = list(GOOD)
    out[i] = line
    return out


BROKEN = {
    "bad header": (_replace(0, "Id,Top"), "bad header"),
    "missing ID": (GOOD[:3], f"missing ID {XLA}:c"),
    "duplicate ID": ([*GOOD, GOOD[2]], "duplicate ID tile:xla:b (first on line 3)"),
    "unknown ID": ([*GOOD, f"{TILE}:zzz,0;1;2;3;4"], "unknown ID 'tile:xla:zzz' (not in"),
    "malformed ID": ([*GOOD, "nonsense,0"], "unknown ID 'nonsense' (malformed ID)"),
    "not an integer": (_replace(1, f"{TILE}:a,6;0;x;2;3"), "not an integer: 'x'"),
    "float index": (_replace(1, f"{TILE}:a,6;0;1.5;2;3"), "not an integer: '1.5'"),
    "negative index": (_replace(1, f"{TILE}:a,6;0;-1;2;3"), "negative index -1"),
    "out of range": (_replace(1, f"{TILE}:a,7;0;1;2;3"), "index 7 out of range 0..6"),
    "tile too short": (_replace(1, f"{TILE}:a,6;0;1;2"), "4 indices, expected 5"),
    "tile too long": (_replace(1, f"{TILE}:a,6;0;1;2;3;4"), "6 indices, expected 5"),
    "tile fewer configs": (_replace(2, f"{TILE}:b,2;0"), "2 indices, expected 3"),
    "tile repeated": (_replace(1, f"{TILE}:a,6;0;1;1;3"), "repeated index 1"),
    "layout repeated": (_replace(3, f"{XLA}:c,3;1;1;2"), "not a permutation of 0..3 (repeated 1; missing 0)"),
    "layout short": (
        _replace(3, f"{XLA}:c,3;1;0"),
        "not a permutation of 0..3 (3 indices for 4 configs; missing 2)",
    ),
    "layout out of range": (_replace(3, f"{XLA}:c,3;1;0;2;4"), "index 4 out of range 0..3"),
    "empty list": (_replace(3, f"{XLA}:c,"), "empty TopConfigs"),
    "field count": (_replace(3, f"{XLA}:c,3;1;0;2,extra"), "3 fields, expected 2"),
}


@pytest.mark.parametrize("case", list(BROKEN))
def test_every_kind_of_broken_csv_is_reported(tmp_path, case):
    lines, expected_problem = BROKEN[case]
    problems = _check(tmp_path, lines)
    assert any(expected_problem in p for p in problems), problems
    assert all(p.startswith(str(tmp_path / "sub.csv")) for p in problems)


def test_every_problem_gets_its_own_line(tmp_path):
    lines = ["ID,Top", f"{TILE}:a,6;0;1;1;3", GOOD[2], GOOD[2]]
    problems = _check(tmp_path, lines)
    assert len(problems) == 4, problems  # header, repeated index, duplicate ID, missing c
    assert _check(tmp_path, [])[0].endswith("empty file (expected the header ID,TopConfigs)")


def test_render_ranks_fastest_first_and_breaks_ties_by_index():
    costs = {
        f"{TILE}:a": np.array([5.0, 1, 1, 0, 9, 9, 2]),
        f"{TILE}:b": np.array([0.0, 0, 0]),
        f"{XLA}:c": np.array([3.0, 1, 1, 0]),
    }
    text = render(costs, EXPECTED, "x.csv")
    assert text.splitlines() == [
        "ID,TopConfigs",
        f"{TILE}:a,3;1;2;6;0",
        f"{TILE}:b,0;1;2",
        f"{XLA}:c,3;1;2;0",
    ]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda c: c.pop(f"{XLA}:c"), f"no prediction for {XLA}:c"),
        (lambda c: c.update({f"{XLA}:c": np.zeros(5)}), "(5,) costs for 4 configs"),
        (lambda c: c.update({f"{XLA}:c": np.array([0, np.nan, 1, 2])}), "1 NaN or infinite costs"),
        (lambda c: c.update({f"{XLA}:zz": np.zeros(4)}), "the submission does not expect"),
    ],
)
def test_writer_refuses_bad_predictions(tmp_path, change, message):
    costs = {e.id: np.arange(e.num_configs, dtype=float) for e in EXPECTED}
    change(costs)
    target = tmp_path / "s.csv"
    with pytest.raises(TpurankError, match="refusing to write") as e:
        write_submission(target, costs, EXPECTED, None, None)
    assert message in str(e.value)
    assert not target.exists()


def test_expected_ids_follow_the_real_sample(sample_root, tmp_path):
    paths = Paths(data=sample_root, out=tmp_path)
    sample = read_sample_ids(paths.sample_submission)
    assert len(sample) == 894
    full = expected_for_split(paths, "test")
    assert [e.id for e in full] == sample
    assert sum(e.num_configs is None for e in full) == 884  # the sample holds 10 test files
    part = expected_for_split(paths, "test", partial=True)
    assert [e.id for e in part] == [i for i in sample if i in {e.id for e in part}]
    assert len(part) == 10
    nlp_default = next(e for e in part if e.collection == "layout:nlp:default")
    assert nlp_default.num_configs == 1001  # the sample lists 1000 indices; the file has 1001


@pytest.mark.parametrize("stage", ["all", "infer"])
def test_an_incomplete_test_set_is_a_warning_labelled_with_the_stage_that_runs(
    sample_root, tmp_path, capsys, stage
):
    """`all` and `infer` both check the test set; the warning names the stage the user ran."""
    from tpurank.submission.publish import incomplete_test_set

    assert incomplete_test_set(Paths(data=sample_root, out=tmp_path), stage=stage)
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"[{stage}] WARNING: 884 test IDs of ")


def test_writer_output_for_real_test_files_passes_check(sample_root, tmp_path, capsys):
    paths = Paths(data=sample_root, out=tmp_path)
    expected = expected_for_split(paths, "test", partial=True)
    rng = np.random.default_rng(0)
    costs = {e.id: rng.random(e.num_configs) for e in expected}
    target = tmp_path / "submissions" / "test_x.csv"
    sidecar = write_submission(target, costs, expected, None, paths.data, models=["x"])
    assert sidecar.exists() and '"data_fingerprint"' in sidecar.read_text()
    assert check_submission_file(target, paths, partial=True) == []
    rows = target.read_text().splitlines()[1:]
    assert [r.split(",")[0] for r in rows] == [e.id for e in expected]
    first = rows[0].split(",")[1].split(";")
    assert [int(i) for i in first] == np.argsort(costs[expected[0].id])[:5].tolist()
    common = ["--data-dir", str(sample_root)]  # it writes nothing: --out-dir is refused
    assert cli.main(["check-submission", str(target), "--partial", *common]) == 0
    capsys.readouterr()
    # against the whole sample the 884 absent IDs are each reported
    assert cli.main(["check-submission", str(target), *common]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 884 and all("missing ID" in line for line in out)


def test_the_real_sample_submission_passes_its_own_check(sample_root, tmp_path):
    paths = Paths(data=sample_root, out=tmp_path)
    # the placeholder 0;...;999 is not a permutation of the 1001 configs of the nlp default file
    problems = check_submission_file(paths.sample_submission, paths)
    assert len(problems) == 1 and "3a0c5517a87df8d82fd637b83298a3ba" in problems[0]
    assert "1000 indices for 1001 configs; missing 1000" in problems[0]


def test_predictions_round_trip(tmp_path):
    preds = {f"{XLA}:c": np.array([0.5, 0.25]), f"{TILE}:a": np.arange(3, dtype=np.float32)}
    path = tmp_path / "p" / "valid.npz"
    save_predictions(path, preds)
    back = load_predictions(path)
    assert sorted(back) == sorted(preds)
    for k, v in preds.items():
        np.testing.assert_array_equal(back[k], v)
    path.write_bytes(b"junk")
    with pytest.raises(TpurankError, match="unreadable predictions file"):
        load_predictions(path)


def test_a_ranking_of_100000_configs_reads_back(tmp_path) -> None:
    """One field of a full layout ranking passes csv's default 128 kB field limit (a real valid graph
    holds up to ~100,000 configs; the full-scale benchmark's validate step failed on one)."""
    from tpurank.submission.format import read_rows

    order = ";".join(map(str, range(100_000)))
    csv_file = tmp_path / "valid.csv"
    csv_file.write_text(f"ID,TopConfigs\nlayout:xla:random:big,{order}\n")
    rows, problems = read_rows(csv_file)
    assert not problems and len(rows) == 1


def test_a_shuffled_complete_csv_is_valid_with_a_note(tmp_path):
    """Kaggle matches rows by ID: another order is a note, never a problem."""
    f = tmp_path / "sub.csv"
    f.write_text("\n".join([GOOD[0], GOOD[3], GOOD[1], GOOD[2]]) + "\n")
    problems, parsed = check_csv(f, EXPECTED)
    assert problems == [] and set(parsed) == {e.id for e in EXPECTED}
    note = order_note(read_rows(f)[0], EXPECTED, str(f), "the sample")
    assert note is not None and "note:" in note and "tile:xla:a after xla" not in note
    assert f"{TILE}:a after {XLA}:c" in note
    f.write_text("\n".join(GOOD) + "\n")
    assert order_note(read_rows(f)[0], EXPECTED, str(f), "the sample") is None


def test_check_submission_and_score_accept_shuffled_rows(tiny_root, tmp_path, capsys):
    """A complete submission (test) and a valid-split CSV with their rows shuffled pass and score the same."""
    from tpurank.cli import main

    rng = np.random.default_rng(1)
    paths = Paths(data=tiny_root, out=tmp_path)
    for split in ("test", "valid"):
        expected = expected_for_split(paths, split)
        costs = {e.id: rng.random(e.num_configs) for e in expected}
        lines = render(costs, expected, "x").splitlines()
        shuffled = [lines[0], *[lines[1:][i] for i in rng.permutation(len(lines) - 1)]]
        assert shuffled[1:] != lines[1:]
        (tmp_path / f"{split}.csv").write_text("\n".join(lines) + "\n")
        (tmp_path / f"{split}_shuffled.csv").write_text("\n".join(shuffled) + "\n")
    capsys.readouterr()
    rc = main(["check-submission", str(tmp_path / "test_shuffled.csv"), "--data-dir", str(tiny_root)])
    r = capsys.readouterr()
    assert rc == 0, r.out + r.err
    assert "note: rows are not in the order" in r.err and "0 problem(s)" in r.err
    outs = []
    for name in ("valid.csv", "valid_shuffled.csv"):
        rc = main(["score", "--submission", str(tmp_path / name), "--data-dir", str(tiny_root)])
        s = capsys.readouterr()
        assert rc == 0, s.out + s.err
        outs.append(s.out)
    assert outs[0] == outs[1] and "overall" in outs[0]
