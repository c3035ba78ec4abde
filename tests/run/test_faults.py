"""Bad input and faults, one test per defect found by trying 50 of them (defects 1-7;
the smaller ones, 8, are in test_faults_minor.py).

Each test drives the command line (`tpurank.cli.main`, or a subprocess where a process must be
killed) on a copy of the tiny synthetic dataset and asserts the one-line error, the warning, or
that finished output survives. The table "What bad input gets" of docs/stages.md lists every case tried.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import shutil
import signal
import subprocess
import sys
import time
import typing
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psutil
import pytest
from helpers import common, error_lines, first_file, one_error, valid_rows

from tpurank.cli import main
from tpurank.core.errors import TpurankError
from tpurank.core.lock import LOCK_NAME, output_lock
from tpurank.core.paths import Paths
from tpurank.data.npz import load_graph, save_graph
from tpurank.models.predictions import load_predictions
from tpurank.prepare.cache import INDEX_FILE

EMPTY_TEST = "0 configs: a test graph needs at least one for its submission row"


# ----------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def held_by_another_run(folder: Path) -> Iterator[None]:
    """Hold a folder's lock through a separate open file, as another tpurank process would."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / LOCK_NAME, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        fh.write("pid 4242, tpurank prepare\n")
        fh.flush()
        yield


def without_configs(path: Path) -> None:
    """Rewrite a dataset file with 0 configs, as featurize-pb writes for a pb without runs."""
    g = load_graph(path)
    if g.kind == "tile":
        empty = {"config_feat": g.config_feat[:0], "config_runtime": g.config_runtime[:0]}
        empty["config_runtime_normalizers"] = g.config_runtime_normalizers[:0]
    else:
        empty = {"node_config_feat": g.node_config_feat[:0], "config_runtime": g.config_runtime[:0]}
    save_graph(path, dataclasses.replace(g, **empty))


def write_csv(path: Path, rows: list[tuple[str, str]]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("ID,TopConfigs\n" + "".join(f"{i},{t}\n" for i, t in rows))
    return path


# ----------------------------------------------------------------------------- 1: test file missing from the cache


def test_predict_test_names_a_file_missing_from_the_prepared_cache(run_copy: Paths, capsys) -> None:
    """A test file added after `prepare`: exit 1 naming it, not exit 0 with an old CSV in place."""
    assert main(["predict", "--model", "random", "--split", "test", *common(run_copy)]) == 0
    csv = run_copy.submissions / "test_random.csv"
    before = csv.read_bytes()
    src = first_file(run_copy, "tile/xla/test")
    shutil.copy(src, src.with_name("added_after_prepare.npz"))
    sample = run_copy.sample_submission
    lines = sample.read_text().splitlines()
    sample.write_text("\n".join([lines[0], "tile:xla:added_after_prepare,0;1;2;3;4", *lines[1:]]) + "\n")
    capsys.readouterr()
    assert main(["predict", "--model", "random", "--split", "test", *common(run_copy)]) == 1
    lines = [ln for ln in error_lines(capsys) if ": error: " in ln]
    assert any("tile:xla:added_after_prepare" in ln and "prepare" in ln for ln in lines), lines
    assert not any("not written yet" in ln for ln in lines)
    assert csv.read_bytes() == before  # the older CSV is not passed off as the new one's output
    assert "not rewritten" in lines[-1]


# ----------------------------------------------------------------------------- 2: one output lock per folder


def test_a_second_run_into_a_folder_in_use_is_refused_in_one_line(run_copy: Paths, capsys) -> None:
    prepared = run_copy.prepared
    index_before = (prepared / INDEX_FILE).read_bytes()
    with held_by_another_run(prepared):
        rc = main(["prepare", "--jobs", "1", "--no-progress", "--set", "prepare.hops=3", *common(run_copy)])
    assert rc == 1
    line = one_error(capsys, "prepare")
    assert f"{prepared} is in use by another tpurank run (pid 4242, tpurank prepare)" in line
    assert (prepared / INDEX_FILE).read_bytes() == index_before  # nothing written meanwhile
    # released: the same run now goes ahead, and its provenance matches its files
    assert (
        main(["prepare", "--jobs", "1", "--no-progress", "--set", "prepare.hops=3", *common(run_copy)]) == 0
    )
    assert json.loads((prepared / "provenance.json").read_text())["config"]["prepare"]["hops"] == 3


def test_the_lock_is_taken_by_every_writing_stage_and_is_reentrant(run_copy: Paths, capsys) -> None:
    with output_lock(run_copy.predictions / "random", "predict"):  # this process: re-entrant (tpurank all)
        assert main(["predict", "--model", "random", "--split", "valid", *common(run_copy)]) == 0
    with held_by_another_run(run_copy.predictions / "random"):  # --force: up to date, it would not write
        assert main(["predict", "--model", "random", "--split", "valid", "--force", *common(run_copy)]) == 1
        assert "is in use by another tpurank run" in one_error(capsys, "predict")
    with held_by_another_run(run_copy.out / "models" / "random"):
        assert main(["train", "--model", "random", *common(run_copy)]) == 1
        assert "is in use" in one_error(capsys, "train")
    with held_by_another_run(run_copy.tabular):
        assert main(["features", *common(run_copy)]) == 1
        assert "is in use" in one_error(capsys, "features")


def test_a_lock_held_by_another_process_names_its_pid(run_copy: Paths, capsys) -> None:
    folder = run_copy.prepared
    code = (
        "import sys, time; from tpurank.core.lock import output_lock\n"
        f"with output_lock({str(folder)!r}, 'prepare'):\n    print('held', flush=True); time.sleep(60)\n"
    )
    holder = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert main(["prepare", "--jobs", "1", "--no-progress", *common(run_copy)]) == 1
        assert f"(pid {holder.pid}, tpurank prepare)" in one_error(capsys, "prepare")
    finally:
        holder.kill()
        holder.wait()
    assert main(["prepare", "--jobs", "1", "--no-progress", *common(run_copy)]) == 0  # the kernel freed it


# ----------------------------------------------------------------------------- 3: files with zero configs


def test_zero_config_files_are_one_line_each_and_never_crash(run_copy: Paths, capsys) -> None:
    valid_layout = first_file(run_copy, "layout/xla/default/valid")
    test_tile = first_file(run_copy, "tile/xla/test")
    train_tile = first_file(run_copy, "tile/xla/train")
    for f in (valid_layout, test_tile, train_tile):
        without_configs(f)
    # check: a test file without configs is bad; train and valid ones get a warning
    assert main(["check", str(run_copy.npz)]) == 1
    out = capsys.readouterr()
    assert out.out.strip().splitlines() == [f"{test_tile}: {EMPTY_TEST}"]
    warned = [ln for ln in out.err.splitlines() if ln.startswith("tpurank check: warning: ")]
    assert len(warned) == 2 and all("0 configs" in w for w in warned)
    # prepare: the test file is one error line (no raw ValueError), the others are skipped with a warning
    assert main(["prepare", "--jobs", "1", "--no-progress", *common(run_copy)]) == 1
    lines = error_lines(capsys)
    errors = [ln for ln in lines if ": error: " in ln]
    assert errors == [f"tpurank prepare: error: {test_tile}: {EMPTY_TEST}"]
    assert sum("warning" in ln and "0 configs" in ln for ln in lines) == 2
    # predict valid: the empty valid graph has nothing to score and is left out, no traceback
    assert main(["predict", "--model", "random", "--split", "valid", *common(run_copy)]) == 0
    error_lines(capsys)
    rows = (run_copy.submissions / "valid_random.csv").read_text().splitlines()[1:]
    assert rows and not any(r.startswith(f"layout:xla:default:{valid_layout.stem},") for r in rows)


def test_a_layout_test_file_without_configs_is_named_not_a_bad_submission(run_copy: Paths, capsys) -> None:
    test_layout = first_file(run_copy, "layout/nlp/random/test")
    without_configs(test_layout)
    assert main(["prepare", "--jobs", "1", "--no-progress", *common(run_copy)]) == 1
    assert str(test_layout) in one_error(capsys, "prepare")
    assert main(["predict", "--model", "random", "--split", "test", *common(run_copy)]) == 1
    lines = [ln for ln in error_lines(capsys) if ": error: " in ln]
    assert any(test_layout.stem in ln for ln in lines) and not any("permutation" in ln for ln in lines)


def test_metrics_of_a_graph_without_configs_are_undefined() -> None:
    from tpurank.core.metrics import graph_metrics

    for collection in ("tile:xla", "layout:xla:default"):
        m = graph_metrics(collection, np.zeros(0, dtype=np.int64), np.zeros(0))
        assert np.isnan(m["score"]) and np.isnan(m["slowdown@1"])


# ----------------------------------------------------------------------------- 4: tracebacks instead of one line


def test_a_huge_index_is_one_problem_line_everywhere(run_copy: Paths, capsys) -> None:
    rows = valid_rows(run_copy)
    rows[0] = (rows[0][0], "99999999999999999999999999;" + rows[0][1].split(";", 1)[1])
    bad = write_csv(run_copy.submissions / "valid_huge.csv", rows)
    capsys.readouterr()
    assert main(["check-submission", str(bad), "--split", "valid", *common(run_copy)[:2]]) == 1
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    assert out.out.splitlines() == [
        f"{bad}:2: {rows[0][0]}: index out of range (beyond 64 bits): 999999999999999999999999..."
    ]
    assert main(["score", "--submission", str(bad), *common(run_copy)[:2]]) == 1
    assert "index out of range" in one_error(capsys, "score")
    assert main(["validate", *common(run_copy)]) == 0
    assert any("skipped huge" in ln and "index out of range" in ln for ln in error_lines(capsys))


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        ("lgbm.num_boost_round=0", "config: lgbm.num_boost_round must be >= 1, got 0"),
        ("gnn.lr=-1", "config: gnn.lr must be > 0, got -1.0"),
        ("gnn.hidden=0", "config: gnn.hidden must be >= 1, got 0"),
        ("gnn.dropout=1", "config: gnn.dropout must be < 1, got 1.0"),
        (
            "lgbm.objective=lambda",
            "config: lgbm.objective must be one of 'lambdarank', 'rank_xendcg', got 'lambda'",
        ),
        (
            'collections."tile:xla".gnn.layers=0',
            "config: collections.tile:xla.gnn.layers must be >= 1, got 0",
        ),
    ],
)
def test_out_of_range_config_values_are_one_line(tmp_path: Path, capsys, setting: str, message: str) -> None:
    """Every key's range is declared next to its field (config.value) and checked for every stage."""
    rc = main(
        ["train", "--model", "gnn", "--set", setting, "--out-dir", str(tmp_path), "--data-dir", str(tmp_path)]
    )
    assert rc == 1
    assert one_error(capsys, "train") == f"tpurank train: error: {message}"
    assert not (tmp_path / "models").exists()  # nothing trained, nothing replaced


def test_every_numeric_config_key_declares_its_range() -> None:
    """A new int or float key declares its range with config.value (a str key may be free: a path)."""
    from tpurank.core.config import Config

    missing: list[str] = []

    def walk(cls: type, where: str) -> None:
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            if dataclasses.is_dataclass(hints[f.name]):
                walk(hints[f.name], f"{where}{f.name}.")
            elif hints[f.name] in (int, float) and not f.metadata:
                missing.append(f"{where}{f.name}")

    walk(Config, "")
    assert missing == []


def test_a_config_file_that_is_not_utf8_or_is_a_folder_is_one_line(tmp_path: Path, capsys) -> None:
    bad = tmp_path / "latin1.toml"
    bad.write_bytes("[gnn]\n# caf\xe9\nhidden = 8\n".encode("latin-1"))
    assert main(["config", "show", "--config", str(bad)]) == 1
    assert (
        one_error(capsys, "config")
        == f"tpurank config: error: {bad}: not UTF-8 text at byte 11 (a TOML file is UTF-8)"
    )
    assert main(["config", "show", "--config", str(tmp_path)]) == 1
    assert (
        one_error(capsys, "config")
        == f"tpurank config: error: {tmp_path}: is a folder, not a TOML config file"
    )


# ----------------------------------------------------------------------------- 5: a failed --force keeps finished output


def test_a_failed_force_predict_replaces_only_what_succeeded(run_copy: Paths, capsys, monkeypatch) -> None:
    from tpurank.models.untrained import RANDOM
    from tpurank.predict import stage as predict_split

    assert main(["predict", "--model", "random", "--split", "valid", *common(run_copy)]) == 0
    pred_file = run_copy.prediction_file("random", "valid")
    before = load_predictions(pred_file)
    csv_before = (run_copy.submissions / "valid_random.csv").read_bytes()

    class Damaged:
        """RANDOM with one collection's model file damaged."""

        def train(self, *a) -> None: ...

        def predict(self, paths, cfg, collection, split):
            if collection == "layout:xla:random":
                raise TpurankError("models/random/layout-xla-random/model.txt: truncated model file")
            return {k: v + 1 for k, v in RANDOM.predict(paths, cfg, collection, split).items()}

        def predict_io(self, paths, split):
            return RANDOM.predict_io(paths, split)  # the declaration its predictions are keyed on

    monkeypatch.setattr(predict_split, "get_model", lambda name: Damaged())
    capsys.readouterr()
    assert main(["predict", "--model", "random", "--split", "valid", "--force", *common(run_copy)]) == 1
    lines = [ln for ln in error_lines(capsys) if ": error: " in ln]
    assert len(lines) == 2 and "layout:xla:random" in lines[0] and "truncated model file" in lines[0]
    after = load_predictions(pred_file)
    assert sorted(after) == sorted(before) and len(after) == 12  # nothing dropped
    for k, v in after.items():  # the failed collection kept its old predictions, the others were replaced
        np.testing.assert_array_equal(v, before[k] if k.startswith("layout:xla:random:") else before[k] + 1)
    assert (run_copy.submissions / "valid_random.csv").read_bytes() == csv_before


def test_a_damaged_predictions_file_is_recomputed_not_a_blocker(run_copy: Paths, capsys) -> None:
    """Keeping finished predictions must not make a damaged file block every later run."""
    assert main(["predict", "--model", "random", "--split", "valid", *common(run_copy)]) == 0
    pred_file = run_copy.prediction_file("random", "valid")
    before = load_predictions(pred_file)
    pred_file.write_bytes(b"damaged")
    pred_file.with_suffix(".json").write_text("{not json")
    capsys.readouterr()
    assert main(["predict", "--model", "random", "--split", "valid", *common(run_copy)]) == 0
    warned = [ln for ln in error_lines(capsys) if "warning" in ln]
    assert len(warned) == 1 and "unreadable predictions file" in warned[0] and "recomputing" in warned[0]
    after = load_predictions(pred_file)
    assert sorted(after) == sorted(before) and all(np.array_equal(after[k], before[k]) for k in before)


# ----------------------------------------------------------------------------- 6: workers die with their parent


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_pool_workers_die_when_the_stage_is_killed(tmp_path: Path) -> None:
    """SIGKILL of a stage running a process pool (prepare's `run_tasks`) leaves no worker behind.
    Each task marks a file, then blocks: a marked worker has run the pool's initializer."""
    task = f"import time; open({str(tmp_path)!r} + '/started-%d' % {{}}, 'w').close(); time.sleep(60)"
    code = (
        "from tpurank.prepare.pool import run_tasks\n"
        f"run_tasks(exec, [({task!r}.format(0),), ({task!r}.format(1),)], 2, False, 'sleep')\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code])
    workers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 60
        while len(list(tmp_path.glob("started-*"))) < 2 and time.monotonic() < deadline:
            assert parent.poll() is None, "the stage ended before its tasks started"
            time.sleep(0.05)
        kids = psutil.Process(parent.pid).children()
        workers = [k for k in kids if "resource_tracker" not in " ".join(k.cmdline())]
        assert len(workers) >= 2, "the pool never started its workers"
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and any(_alive(w.pid) for w in workers):
            time.sleep(0.05)
        assert not any(_alive(w.pid) for w in workers)
    finally:
        if parent.poll() is None:
            parent.kill()
        for w in workers:  # never leave orphans behind, even when the assertion failed
            if _alive(w.pid):
                w.kill()


# ----------------------------------------------------------------------------- 7: validate skips an unreadable CSV


def test_validate_lists_an_unreadable_csv_as_skipped(run_copy: Paths, capsys) -> None:
    valid_rows(run_copy)
    (run_copy.submissions / "valid_broken.csv").write_bytes(b"ID,TopConfigs\n\xff\xfe garbage\n")
    (run_copy.submissions / "valid_folder.csv").mkdir()
    capsys.readouterr()
    assert main(["validate", *common(run_copy)]) == 0
    skipped = [ln for ln in error_lines(capsys) if "skipped" in ln]
    assert len(skipped) == 2 and all("unreadable" in ln or ": a folder" in ln for ln in skipped), skipped
    report = (run_copy.reports / "validation.md").read_text()
    assert "- broken:" in report and "- folder:" in report and "random" in report
