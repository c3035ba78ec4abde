"""A profile sized for a GPU (gpu, kaggle-t4) chosen on a machine without a usable one: `train` and
`all` say so in their profile line, with the training time projected on this CPU and the way out
(`--profile cpu`). The device is faked: no GPU is at hand."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from helpers import error_lines

from tpurank.cli import main
from tpurank.core import profiles
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config_files import config_layers, from_layers


def no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles, "nvidia_device_files", lambda: False)


def a_gpu(monkeypatch: pytest.MonkeyPatch, gb: float = 22.0) -> None:
    """A usable CUDA device as torch reports one (an A10G by default), without one."""
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(profiles, "nvidia_device_files", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: (8, 6))
    monkeypatch.setattr(torch.cuda, "get_arch_list", lambda: ["sm_80", "sm_86"])
    props = types.SimpleNamespace(name="NVIDIA A10G", total_memory=int(gb * 2**30))
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)


def _train(profile: str, tmp_path: Path, capsys: pytest.CaptureFixture, model: str = "gnn") -> list[str]:
    """The lines of `train --model M --profile P` on an empty data root: its profile line, then the
    one error (nothing to train on): the profile is said before any work."""
    (tmp_path / "data").mkdir(exist_ok=True)
    argv = ["train", "--model", model, "--profile", profile]
    assert main([*argv, "--data-dir", str(tmp_path / "data"), "--out-dir", str(tmp_path / "out")]) == 1
    return error_lines(capsys)


@pytest.mark.parametrize("profile", ["gpu", "kaggle-t4"])
def test_a_gpu_profile_without_a_gpu_warns_in_one_line_with_a_projection(
    profile: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    no_gpu(monkeypatch)
    lines = _train(profile, tmp_path, capsys)
    warned = [ln for ln in lines if "no usable CUDA GPU" in ln]
    assert len(warned) == 1, lines
    line = warned[0]
    assert line.startswith(f"[train] profile {profile}: chosen with --profile; warning: no usable CUDA GPU: ")
    assert "steps at this profile's scale take a projected " in line and "h on this CPU" in line
    assert "s a step: a PROJECTION" in line and "time budget" not in line  # `train` alone: no budget
    assert line.endswith("; --profile cpu is sized for a CPU")


def test_no_warning_on_a_gpu_or_for_the_cpu_profile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    no_gpu(monkeypatch)
    assert not any("no usable CUDA GPU" in ln for ln in _train("cpu", tmp_path, capsys))
    a_gpu(monkeypatch)
    lines = [ln for ln in _train("gpu", tmp_path, capsys) if ln.startswith("[train] profile")]
    assert lines == ["[train] profile gpu: chosen with --profile"]


def test_lightgbm_alone_is_not_warned_about(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    no_gpu(monkeypatch)
    assert not any("no usable CUDA GPU" in ln for ln in _train("gpu", tmp_path, capsys, model="lgbm"))


def test_the_projection_counts_steps_seeds_and_time_budgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(profiles.os, "cpu_count", lambda: profiles.CPU_STEP_CORES)
    cfg = from_layers(config_layers(profile=profiles.Profile("gpu", "test").file))
    seconds, steps, per = profiles.cpu_projection(cfg, list(COLLECTIONS))
    per_collection = [cfg.for_collection(c).gnn for c in COLLECTIONS]
    assert steps == sum(g.max_steps * g.seeds for g in per_collection) > 100_000
    assert per >= profiles.CPU_STEP_SECONDS  # the measured step, at the gpu profile's width and configs
    assert seconds == pytest.approx(steps * per)  # no time budget: every step
    one = profiles.cpu_projection(cfg, ["layout:xla:default"])
    g = cfg.for_collection("layout:xla:default").gnn
    assert one[0] == pytest.approx(g.max_steps * g.seeds * profiles.CPU_STEP_SECONDS)  # 256 configs a step
    capped = from_layers(
        config_layers(None, ["gnn.time_budget_min=10"], None, profiles.Profile("gpu", "t").file)
    )
    seconds, _, _ = profiles.cpu_projection(capped, ["layout:xla:default"])
    assert seconds == pytest.approx(10 * 60 * g.seeds)


def test_all_s_budget_is_weighed_against_the_projection(monkeypatch: pytest.MonkeyPatch) -> None:
    """`all` stops training within its budget: the warning says what share of the steps it reaches."""
    import argparse

    from tpurank.run.context import resolve_config

    no_gpu(monkeypatch)
    ns = argparse.Namespace(
        profile="gpu", config_file=None, set=[], budget=None, collections=list(COLLECTIONS)
    )
    resolve_config(ns, Path("/nonexistent"))  # `all` on the gpu profile: its default budget, 8h
    line = ns.profile_info.line
    assert "its time budget (8 h) reaches ~" in line and line.endswith("--profile cpu is sized for a CPU")
    ns = argparse.Namespace(profile="cpu", config_file=None, set=[], budget="2h", collections=None)
    resolve_config(ns, Path("/nonexistent"))
    assert ns.profile_info.warning == ""
