"""Bad input, defect 8: the smaller faults (defects 1-7 are in test_faults.py, the helpers in helpers.py)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from helpers import NPZ, common, first_file, layout_pb, one_error, valid_rows

from tpurank.cli import main
from tpurank.core.paths import Paths
from tpurank.data.npz import load_graph, save_graph


def test_check_warns_about_runtimes_that_do_not_fit_the_split(run_copy: Paths, capsys) -> None:
    test_file, train_file = first_file(run_copy, "tile/xla/test"), first_file(run_copy, "tile/xla/train")
    g = load_graph(test_file)
    save_graph(test_file, dataclasses.replace(g, config_runtime=np.arange(1, g.num_configs + 1)))
    g = load_graph(train_file)
    ones = np.ones_like(g.config_runtime_normalizers)  # as a test file's
    save_graph(
        train_file,
        dataclasses.replace(
            g, config_runtime=np.zeros_like(g.config_runtime), config_runtime_normalizers=ones
        ),
    )
    assert main(["check", str(run_copy.npz / "tile")]) == 0  # readable: warnings, not errors
    warned = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("tpurank check: warning: ")]
    assert len(warned) == 2
    assert f"{test_file}: a test file with measured runtimes" in warned[0] + warned[1]
    assert f"{train_file}: every runtime is 0 (as in a test file)" in warned[0] + warned[1]


def test_check_submission_partial_does_not_call_sample_ids_unknown(run_copy: Paths, capsys) -> None:
    assert main(["predict", "--model", "random", "--split", "test", *common(run_copy)]) == 0
    full = run_copy.submissions / "test_random.csv"
    gone = first_file(run_copy, "layout/xla/default/test")
    gone.unlink()
    capsys.readouterr()
    assert main(["check-submission", str(full), "--partial", *common(run_copy)[:2]]) == 1
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 1 and f"layout:xla:default:{gone.stem}" in out[0]
    assert "not in" not in out[0] and "its file is absent" in out[0]


@pytest.mark.parametrize("stage", ["prepare", "check", "all"])
def test_negative_jobs_is_a_usage_error(tmp_path: Path, capsys, stage: str) -> None:
    with pytest.raises(SystemExit) as e:
        main([stage, "--jobs", "-2", "--data-dir", str(tmp_path), "--out-dir", str(tmp_path)])
    assert e.value.code == 2
    assert "argument --jobs: must be >= 0 (0 = one per core), got -2" in capsys.readouterr().err


def test_synth_resume_regenerates_a_truncated_file(tmp_path: Path, capsys) -> None:
    args = ["synth", "--out", str(tmp_path), "--collections", "tile:xla", "--splits", "valid"]
    assert main(args) == 0
    f = sorted((tmp_path / NPZ / "tile/xla/valid").glob("*.npz"))[0]
    whole = f.read_bytes()
    f.write_bytes(whole[: len(whole) // 2])
    capsys.readouterr()
    assert main(args) == 0
    assert f"synth: regenerating {f}" in capsys.readouterr().err
    assert f.read_bytes() == whole  # byte-identical to an uninterrupted run


def test_featurize_pb_creates_no_missing_folders(tmp_path: Path, capsys) -> None:
    src = layout_pb(tmp_path / "m.pb")
    target = tmp_path / "no" / "such" / "m.npz"
    assert main(["featurize-pb", str(src), str(target)]) == 1
    assert one_error(capsys, "featurize-pb") == (
        f"tpurank featurize-pb: error: {target.parent}: no such folder (create it first)"
    )
    assert not (tmp_path / "no").exists()
    assert main(["featurize-pb", str(src), str(tmp_path / "no" / "tiles")]) == 1  # tile OUT's parent too
    assert not (tmp_path / "no").exists()


def test_featurize_pb_never_overwrites_an_unrelated_npz(tmp_path: Path, capsys) -> None:
    src = layout_pb(tmp_path / "m.pb")
    target = tmp_path / "mine.npz"
    target.write_bytes(b"someone else's file")
    assert main(["featurize-pb", str(src), str(target)]) == 1
    assert "exists and was not written by featurize-pb" in one_error(capsys, "featurize-pb")
    assert target.read_bytes() == b"someone else's file"
    assert main(["featurize-pb", str(src), str(target), "--force"]) == 0
    assert load_graph(target).num_configs == 1
    assert main(["featurize-pb", str(src), str(target), "--pad-layout-with", "-1"]) == 0  # its own: rewritten


def test_score_json_refuses_to_overwrite_the_scored_csv(run_copy: Paths, capsys) -> None:
    valid_rows(run_copy)
    csv = run_copy.submissions / "valid_random.csv"
    before = csv.read_bytes()
    assert main(["score", "--submission", str(csv), "--json", str(csv), *common(run_copy)[:2]]) == 1
    assert "--json would overwrite the CSV being scored" in one_error(capsys, "score")
    assert csv.read_bytes() == before


def test_os_errors_print_one_prefixed_line_without_errno(tmp_path: Path, capsys, monkeypatch) -> None:
    from tpurank.data import check_npz as check

    def denied(args) -> int:
        raise PermissionError(13, "Permission denied", str(tmp_path / "locked.npz"))

    def unreadable(path, kind=None):
        raise PermissionError(13, "Permission denied", str(path))

    (tmp_path / "locked.npz").write_bytes(b"")
    monkeypatch.setattr(check, "validate_file", unreadable)  # per file: one line on stdout
    assert main(["check", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines() == [f"{tmp_path / 'locked.npz'}: Permission denied"]
    monkeypatch.setattr(check, "run", denied)  # anywhere in a stage: one prefixed line
    assert main(["check", str(tmp_path)]) == 1
    assert one_error(capsys, "check") == f"tpurank check: error: {tmp_path / 'locked.npz'}: Permission denied"


def test_a_dangling_symlink_in_the_data_tree_is_one_line_and_the_rest_is_prepared(
    run_copy: Paths, capsys
) -> None:
    link = run_copy.npz / "tile/xla/train/gone.npz"
    link.symlink_to(run_copy.data / "nowhere.npz")
    assert main(["check", str(run_copy.npz / "tile")]) == 1
    assert capsys.readouterr().out.splitlines() == [f"{link}: a symbolic link to a missing file"]
    assert main(["prepare", "--jobs", "1", "--no-progress", *common(run_copy)]) == 1
    assert (
        one_error(capsys, "prepare")
        == f"tpurank prepare: error: {link}: a symbolic link to a missing file: skipped"
    )
    assert (
        main(["predict", "--model", "random", "--split", "valid", *common(run_copy)]) == 0
    )  # the rest is there
