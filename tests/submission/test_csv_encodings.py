"""A submission CSV saved by a spreadsheet (a UTF-8 byte-order mark, CRLF line ends) reads as the
plain file in every reader a user hands one to: `check-submission`, `score` and `submit`."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from tpurank.cli import main
from tpurank.core.paths import Paths
from tpurank.submission import submit
from tpurank.submission.csvio import read_rows
from tpurank.submission.format import expected_for_split, render

BOM = b"\xef\xbb\xbf"


def _pair(tiny_root: Path, folder: Path, split: str) -> tuple[Path, Path]:
    """A valid CSV for `split` of the tiny data, as tpurank writes it and as a spreadsheet saves it."""
    expected = expected_for_split(Paths(data=tiny_root, out=folder), split)
    rng = np.random.default_rng(3)
    text = render({e.id: rng.random(e.num_configs) for e in expected}, expected, "x")
    plain, saved = folder / f"{split}.csv", folder / f"{split}_spreadsheet.csv"
    plain.write_bytes(text.encode())
    saved.write_bytes(BOM + text.replace("\n", "\r\n").encode())
    assert saved.read_bytes().startswith(BOM) and b"\r\n" in saved.read_bytes()
    return plain, saved


def test_the_rows_read_the_same(tiny_root: Path, tmp_path: Path) -> None:
    plain, saved = _pair(tiny_root, tmp_path, "test")
    rows, problems = read_rows(saved)
    assert problems == [] and rows == read_rows(plain)[0] and len(rows) > 2
    assert rows[0].id.startswith("tile:xla:") or rows[0].id.startswith("layout:")  # no mark left on it


def test_check_submission_accepts_it(tiny_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    for f in _pair(tiny_root, tmp_path, "test"):
        capsys.readouterr()
        assert main(["check-submission", str(f), "--data-dir", str(tiny_root)]) == 0
        out = capsys.readouterr()
        assert out.out == "" and "0 problem(s)" in out.err, out.out + out.err


def test_score_gives_the_plain_files_scores(
    tiny_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    tables = []
    for f in _pair(tiny_root, tmp_path, "valid"):
        capsys.readouterr()
        assert main(["score", "--submission", str(f), "--data-dir", str(tiny_root)]) == 0
        tables.append(capsys.readouterr().out)
    assert tables[0] == tables[1] and "overall (5 of 5)" in tables[0]


def test_submit_checks_and_sends_it(
    tiny_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """The check before the upload passes; the file goes to Kaggle as saved (pandas, which Kaggle
    reads it with, drops the mark itself)."""
    sent: list[bytes] = []

    def competition_submit(path: str, message: str, competition: str, quiet: bool) -> SimpleNamespace:
        sent.append(Path(path).read_bytes())
        return SimpleNamespace(message="Successfully submitted", ref=1)

    monkeypatch.setattr(submit, "kaggle_api", lambda: SimpleNamespace(competition_submit=competition_submit))
    _, saved = _pair(tiny_root, tmp_path, "test")
    capsys.readouterr()
    assert main(["submit", "--file", str(saved), "--data-dir", str(tiny_root)]) == 0, capsys.readouterr()
    assert sent == [saved.read_bytes()] and "submitted " in capsys.readouterr().out
