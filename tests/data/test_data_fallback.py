"""A command run by hand finds the synthetic data `all` made when data/ holds none, says so in one
line, and every "no data here" error names the folder it tried and how to name another.

The end-to-end check on the runs of `all` (check, check-submission, score, validate without
--data-dir) is in tests/run/test_pipeline.py, on the tiny run its module fixture made.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tpurank import cli
from tpurank.core import paths as paths_mod
from tpurank.core.paths import LAST_DATA_ROOT, NPZ_SUBDIR, Paths, remember_data_root


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty project root (TPURANK_HOME), the current folder, with nothing naming a data root."""
    monkeypatch.setenv("TPURANK_HOME", str(tmp_path))
    monkeypatch.delenv("TPURANK_DATA", raising=False)
    monkeypatch.setattr(paths_mod, "KAGGLE_INPUT", tmp_path / "no-kaggle")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _tree(root: Path, scale: str | None) -> Path:
    """A dataset folder (NPZ_SUBDIR); with `scale`, a finished synthetic tree (its synth.json)."""
    (root / NPZ_SUBDIR).mkdir(parents=True)
    if scale is not None:
        (root / "synth.json").write_text(json.dumps({"scale": scale}))
    return root


def _resolve(capsys: pytest.CaptureFixture[str], **kw: object) -> tuple[Path, list[str]]:
    paths = Paths.resolve(fallback=True, **kw)  # type: ignore[arg-type]
    return paths.data, capsys.readouterr().err.splitlines()


def test_the_fallback_rule(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = home / "data"
    assert _resolve(capsys) == (data, [])  # nothing anywhere: data/, silently (its errors say more)
    _tree(data / "synthetic-unfinished", None)  # no synth.json: a tree being generated is not used
    tiny = _tree(data / "synthetic-tiny", "tiny")
    root, err = _resolve(capsys)
    assert root == tiny and len(err) == 1, err
    assert err[0].startswith("tpurank: data: data/synthetic-tiny (synthetic 'tiny', ")
    assert err[0].endswith("--data-dir DIR to use another)")
    demo = _tree(data / "synthetic-demo", "demo")
    assert _resolve(capsys)[0] == demo  # what `all` makes wins over another scale...
    remember_data_root(tiny)
    assert (data / LAST_DATA_ROOT).read_text() == "synthetic-tiny\n"
    root, err = _resolve(capsys)
    assert root == tiny and "the last `tpurank all` used" in err[0]  # ...unless `all` used the other last
    # never for a stage that fills the data root, a named root, or a data/ that holds a dataset
    assert Paths.resolve(fallback=False).data == data
    assert _resolve(capsys, data_dir=home / "mine") == (home / "mine", [])
    _tree(data, None)
    assert _resolve(capsys) == (data, [])


def test_all_records_only_the_synthetic_trees_of_data(home: Path, tmp_path: Path) -> None:
    elsewhere = _tree(tmp_path / "elsewhere" / "synthetic-demo", "demo")
    remember_data_root(elsewhere)  # a tree the user named: named again next time
    remember_data_root(_tree(home / "data" / "synthetic-real", None))  # no synth.json: real data
    assert not (home / "data" / LAST_DATA_ROOT).exists()


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize(
    "argv",
    [
        ["check"],
        ["prepare", "--jobs", "1"],
        ["check-submission", "submissions/submission.csv"],
        ["score", "--submission", "submissions/valid_random.csv"],
    ],
)
def test_no_data_errors_name_the_folder_and_the_option(
    home: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    (home / "submissions").mkdir()
    for name in ("submission.csv", "valid_random.csv"):
        (home / "submissions" / name).write_text("ID,TopConfigs\ntile:xla:a,0;1\n")
    assert cli.main(argv) == 1
    line = _one_error(capsys)
    assert str(home / "data" / NPZ_SUBDIR) in line, line
    assert "--data-dir DIR" in line and "$TPURANK_DATA" in line, line


def test_validate_without_the_data_of_its_csvs_names_the_folder_and_the_option(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (home / "submissions").mkdir()
    (home / "submissions" / "valid_random.csv").write_text("ID,TopConfigs\ntile:xla:a,0;1\n")
    assert cli.main(["validate"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    skipped, last = err[0], err[-1]
    assert skipped.startswith("validate: skipped random: ") and "--data-dir DIR" in skipped, err
    assert last.startswith("tpurank validate: error: no valid_<model>.csv passed its check"), err
    assert str(home / "data" / NPZ_SUBDIR) in last and "--data-dir DIR" in last, err
    assert "$TPURANK_DATA" in last


def test_all_records_the_synthetic_data_it_uses(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`all` still finds or makes its data as before (the fallback is not its own), and records it."""
    import tpurank.synth
    from tpurank.run import pipeline

    monkeypatch.setattr(pipeline, "have_credentials", lambda: False)
    made, workers = [], []
    monkeypatch.setattr(pipeline, "usable_cores", lambda: 2)

    def generate(root: Path, scale: str, seed: int, progress: bool, jobs: int) -> None:
        made.append(_tree(root, scale))
        workers.append(jobs)

    monkeypatch.setattr(tpurank.synth, "generate", generate)
    record = home / "data" / LAST_DATA_ROOT
    demo = home / "data" / "synthetic-demo"
    assert pipeline.resolve_data(Paths.resolve(), seed=0) == (demo, "demo") and made == [demo]
    assert workers == [2]  # the demo's files written by the usable cores
    assert record.read_text() == "synthetic-demo\n"
    tiny = _tree(home / "data" / "synthetic-tiny", "tiny")
    assert pipeline.resolve_data(Paths.resolve(tiny), seed=0) == (tiny, "tiny")
    assert record.read_text() == "synthetic-tiny\n" and made == [demo]
    with pytest.raises(
        pipeline.TpurankError, match=r"no dataset here .*--data-dir DIR or set \$TPURANK_DATA"
    ):
        pipeline.resolve_data(Paths.resolve(home / "named"), seed=0)
