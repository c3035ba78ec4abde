"""tpurank.memory: the heap's free pages go back to the system between training steps.

Its effect on memory is measured at full scale (bench/bench_scale.py, bench/bench_gnn_memory.py,
README "Scale"); a small heap here gives free pages back on its own, so these check that the call
runs where it can, and where the trainer makes it.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

from tpurank.config import Config
from tpurank.gnn import model as gnn_model
from tpurank.gnn import trainer
from tpurank.memory import release_free_memory
from tpurank.paths import Paths


def test_malloc_trim_runs_on_linux() -> None:
    assert release_free_memory() is sys.platform.startswith("linux")


def test_cpu_training_frees_the_heap_after_every_step_and_validation(
    tiny_paths: Paths, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Validation's freed tensors are given back before the next step: without it, a step stacked
    its own tensors on that heap (a 3.6 GB peak where steps alone reached 2.6 GB, README "Scale")."""
    events: list[str] = []
    evaluate, step = trainer.evaluate, trainer.train_step

    def logged(name: str, fn):
        def run(*args, **kwargs):
            events.append(name)
            return fn(*args, **kwargs)

        return run

    monkeypatch.setattr(trainer, "evaluate", logged("validation", evaluate))
    monkeypatch.setattr(trainer, "train_step", logged("step", step))
    monkeypatch.setattr(trainer, "release_free_memory", lambda: events.append("free") or True)
    paths = Paths(data=tiny_paths.data, out=tmp_path)
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "prepared").symlink_to(tiny_paths.prepared, target_is_directory=True)
    cfg = Config()
    cfg.gnn = replace(cfg.gnn, hidden=8, layers=1, max_steps=4, eval_every=2, seeds=1, configs_per_graph=4)
    trainer.train_collection(gnn_model.SPEC, paths, cfg, "layout:xla:random", progress=False)
    assert events.count("validation") == 2 and events.count("step") == 4
    for i, e in enumerate(events[:-1]):
        if e in ("step", "validation"):
            assert events[i + 1] == "free", events  # every step and validation is followed by a trim


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux /proc")
def test_peak_rss_is_measured_from_its_reset() -> None:
    import numpy as np

    from tpurank.memory import peak_rss_gb, reset_peak_rss

    reset_peak_rss()
    base = peak_rss_gb()
    block = np.ones(200_000_000 // 8)  # 200 MB, touched
    assert peak_rss_gb() >= base + 0.15
    del block
    release_free_memory()
    reset_peak_rss()
    assert peak_rss_gb() < base + 0.15  # the reset forgot the block's peak
