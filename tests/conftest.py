"""Shared fixtures: the real sample (skipped where ../shared is absent), tiny synthetic data, and a
tiny tree with trained models, built once per session for every xdist worker (helpers.built_once).

Plain helper functions live in tests/helpers.py: test files never import from each other.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import io
import os
import shutil
import tempfile
from pathlib import Path


def _isolate_from_the_checkout() -> None:
    """The suite gives the same result whatever the checkout holds and whatever the user exported:
    before tpurank is imported (so nothing of the user's can reach even an import), every `TPURANK_*`
    variable is dropped and the project root ($TPURANK_HOME) is an empty folder of this process,
    so a demo run's data/, models/ and .last-data-root in the checkout are never seen. Children
    inherit it. Tests about the checkout itself unset $TPURANK_HOME with monkeypatch."""
    for key in [k for k in os.environ if k.startswith("TPURANK_")]:
        del os.environ[key]
    home = tempfile.mkdtemp(prefix="tpurank-test-home-")
    os.environ["TPURANK_HOME"] = home
    atexit.register(shutil.rmtree, home, True)


_isolate_from_the_checkout()

RAM_DISK = Path("/dev/shm")
RAM_DISK_ROOM = 4 << 30  # bytes free it must have; a run holds ~250 MB there at most


def _temp_on_a_ram_disk() -> None:
    """pytest's temporary folders (tmp_path, the shared trees) on a RAM disk where there is one with
    room, before pytest makes them: a run writes ~20,000 files, and on a disk mounted with online
    discard (ext4 `discard`, as on the 2-core machines it is timed on) each unlink takes ~3 ms: a minute
    for pytest to delete an old run's folder at the end of a new one. A temp root the user chose
    ($PYTEST_DEBUG_TEMPROOT, pytest's own) is kept; `./run.sh test` deletes a passed test's folder
    when it ends (-o tmp_path_retention_policy=failed), so a green run leaves nothing in memory."""
    if "PYTEST_DEBUG_TEMPROOT" in os.environ:
        return
    try:
        free = os.statvfs(RAM_DISK)
    except OSError:
        return
    if os.access(RAM_DISK, os.W_OK) and free.f_bavail * free.f_frsize >= RAM_DISK_ROOM:
        os.environ["PYTEST_DEBUG_TEMPROOT"] = str(RAM_DISK)


_temp_on_a_ram_disk()

import pytest  # noqa: E402
from helpers import (  # noqa: E402
    SAMPLE_NPZ,
    SAMPLE_ROOT,
    TRAIN_LOG,
    TRAINED_COLLECTION,
    TRAINED_ENSEMBLE,
    TRAINED_SMALL,
    built_once,
    common,
    copy_tree,
)


@pytest.fixture(scope="session")
def sample_root() -> Path:
    """The real TpuGraphs sample beside the checkout (../shared); skips on a user's fresh clone."""
    if not SAMPLE_NPZ.is_dir():
        pytest.skip(f"real sample not found at {SAMPLE_ROOT} (../shared is absent on a fresh clone)")
    return SAMPLE_ROOT


@pytest.fixture(scope="session")
def tiny_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A `tiny` synthetic dataset (seed 0), generated once per test worker."""
    from tpurank.synth import generate

    root = tmp_path_factory.mktemp("tiny-data")
    generate(root, scale="tiny", seed=0)
    return root


@pytest.fixture(scope="session")
def tiny_paths(tiny_root: Path, tmp_path_factory: pytest.TempPathFactory):
    """Paths over the tiny dataset whose out folder already holds its prepared cache (jobs=1)."""
    from tpurank.core.config import Config
    from tpurank.core.paths import Paths
    from tpurank.prepare.stage import prepare_dataset

    paths = Paths(data=tiny_root, out=tmp_path_factory.mktemp("tiny-out"))
    result = prepare_dataset(paths, Config(), jobs=1, progress=False)
    assert not result.failed, result.failed
    return paths


@pytest.fixture
def run_copy(tiny_paths, tmp_path: Path):
    """A private copy of the tiny dataset and its prepared cache, for tests that damage it."""
    return copy_tree(tiny_paths, tmp_path)


def _train_tree(tiny_paths, folder: Path) -> None:
    """The tiny data and cache with gnn and lgbm trained on one collection, their valid predictions
    and the ensemble of the two fitted; the training's stderr kept in TRAIN_LOG."""
    from tpurank.cli import main

    paths = copy_tree(tiny_paths, folder)
    one = ["--collections", TRAINED_COLLECTION, *common(paths)]
    small = [arg for item in TRAINED_SMALL for arg in ("--set", item)]
    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        assert main(["features", *one, *small]) == 0, err.getvalue()[-2000:]  # LightGBM's tables
        for m in ("gnn", "lgbm"):
            assert main(["train", "--model", m, *one, *small]) == 0, err.getvalue()[-2000:]
    (folder / TRAIN_LOG).write_text(err.getvalue())
    for m in ("gnn", "lgbm"):
        assert main(["predict", "--model", m, "--split", "valid", *one, *small]) == 0
    assert main(["train", "--model", "ensemble", *one, "--set", TRAINED_ENSEMBLE]) == 0


@pytest.fixture(scope="session")
def trained_tree(tiny_paths, tmp_path_factory: pytest.TempPathFactory):
    """The tiny tree with trained models (see _train_tree), built by the first worker that asks and
    shared read-only: tests copy it (the `trained` fixture) before they change anything."""
    from tpurank.core.paths import Paths

    key = [TRAINED_COLLECTION, TRAINED_SMALL, TRAINED_ENSEMBLE]
    folder = built_once(tmp_path_factory, "trained", key, lambda f: _train_tree(tiny_paths, f))
    return Paths(data=folder / "data", out=folder / "out")


@pytest.fixture
def trained(trained_tree, tmp_path: Path):
    """A private copy of the trained tree: one collection's gnn, lgbm and ensemble, valid predictions."""
    paths = copy_tree(trained_tree, tmp_path)
    shutil.copy(trained_tree.data.parent / TRAIN_LOG, tmp_path / TRAIN_LOG)
    return paths


@pytest.fixture
def one_thread():
    """Tiny tensors on a shared CI machine: one intra-op thread is ~10x faster than contending for two."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


# The longest tests (file, test), started first (pytest_collection_modifyitems): a long test left for
# the end keeps one worker busy while the other idles. xdist hands each worker two tests to start
# with (the first two to one, the next two to the other), then two more as it finishes them. The
# first builds the shared clean `all` that the rest of test_pipeline.py copies, the third the
# two-collection tree, the fourth the trained tree: each built by one worker while the other works.
# The notebooks (two fresh kernels, ~30 s) run beside the third and fourth.
LONGEST_FIRST = (
    ("test_pipeline.py", "test_all_end_to_end_on_tiny"),
    ("test_kaggle_notebooks.py", "test_notebooks_in_a_fresh_offline_environment"),
    ("test_pipeline.py", "test_all_follows_the_data_content_and_a_killed_all_resumes"),
    ("test_retrain.py", "test_an_interrupted_retrain_leaves_the_finished_model_and_resumes[2]"),
    ("test_readme_commands.py", "test_recipe_3_runs_as_written_after_the_quick_start_and_after_recipe_1"),
    ("test_gnn_ddp.py", "test_two_process_ddp_ends_with_identical_weights"),
    ("test_collection_processes.py", "test_side_by_side_trains_the_same_weights"),
    ("test_curves.py", "test_a_gnn_run_records_its_loss_between_validations_and_logs_a_few_lines"),
    ("test_imports.py", "test_one_fresh_interpreter_imports_everything_light_and_reads_no_variable"),
    ("test_demo_budget.py", "test_all_on_demo_data_without_a_budget_keeps_the_demos"),
    ("test_tune.py", "test_the_file_runtimes_of_the_measured_configs_never_enter_the_score"),
    ("test_tune.py", "test_every_config_measured_and_more_rounds_than_configs_say_so_in_one_line"),
    ("test_profiles.py", "test_all_within_a_tiny_budget_stops_training_on_time"),
    ("test_synth_effects.py", "test_difficulty_table_on_the_real_sample"),
)


def pytest_configure(config: pytest.Config) -> None:
    """xdist's load scheduling hands a worker consecutive chunks of up to a quarter of the tests
    left, so one chunk can hold several long end-to-end tests (alphabetical neighbours) that one
    worker then runs alone. Chunks of 2 (unless --maxschedchunk is given) keep both workers busy."""
    if getattr(config.option, "maxschedchunk", "no xdist") is None:
        config.option.maxschedchunk = 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """LONGEST_FIRST to the front, the rest in their order (every worker collects the same order)."""
    first = [item for key in LONGEST_FIRST for item in items if (item.path.name, item.name) == key]
    if first:
        items[:] = first + [item for item in items if item not in first]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Exempt what collection imported (torch, the package, every test module: objects that live as
    long as the worker) from the cyclic garbage collector: a full collection over them takes a few
    tenths of a second, and an in-process `all` runs one after each step (its first before it
    freezes what survives, core.memory.release_between_steps), besides Python's own. Garbage made
    later is still collected."""
    gc.freeze()
