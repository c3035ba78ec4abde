"""Shared fixtures: the real sample (skipped where ../shared is absent) and tiny synthetic data."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

SAMPLE_ROOT = Path(__file__).resolve().parents[2] / "shared" / "data" / "tpugraphs-sample"
SAMPLE_NPZ = SAMPLE_ROOT / "npz_all" / "npz"
UNET_VALID = SAMPLE_NPZ / "layout/xla/default/valid/unet_3d.4x4.bf16.npz"


@pytest.fixture(scope="session")
def sample_root() -> Path:
    """The real TpuGraphs sample beside the checkout (../shared); skips on a user's fresh clone."""
    if not SAMPLE_NPZ.is_dir():
        pytest.skip(f"real sample not found at {SAMPLE_ROOT} (../shared is absent on a fresh clone)")
    return SAMPLE_ROOT


def sample_files() -> list[Path]:
    return sorted(SAMPLE_NPZ.rglob("*.npz")) if SAMPLE_NPZ.is_dir() else []


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
    from tpurank.core.paths import Paths

    data, out = tmp_path / "data", tmp_path / "out"
    shutil.copytree(tiny_paths.data, data)
    shutil.copytree(tiny_paths.out, out)
    return Paths(data=data, out=out)


@pytest.fixture
def one_thread():
    """Tiny tensors on a shared CI machine: one intra-op thread is ~10x faster than contending for two."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
