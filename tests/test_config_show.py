"""`tpurank config show` and `tpurank runs`."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tpurank.cli import main
from tpurank.core.config import Config, load_config, to_dict
from tpurank.report.config_show import flat


def all_keys(cls: type = Config, prefix: str = "") -> list[str]:
    """Every key of the Config dataclasses, nested ones dotted (not the overrides table)."""
    out = []
    for f in dataclasses.fields(cls):
        if f.name == "collections":
            continue
        t = f.default_factory if f.default_factory is not dataclasses.MISSING else None  # type: ignore[misc]
        if t is not None and dataclasses.is_dataclass(t):
            out += all_keys(t, f"{prefix}{f.name}.")
        else:
            out.append(f"{prefix}{f.name}")
    return out


@pytest.mark.parametrize("sets", [[], ["gnn.lr=0.002", 'collections."layout:nlp:random".gnn.hidden=32']])
def test_config_show_prints_every_key_and_round_trips(sets: list[str], tmp_path: Path, capsys) -> None:
    args = [x for s in sets for x in ("--set", s)]
    assert main(["config", "show", *args]) == 0
    shown = capsys.readouterr().out.splitlines()
    keys = {ln.split()[0] for ln in shown[1:]}
    assert keys == set(all_keys()) and len(keys) > 60
    if sets:
        lr = next(ln for ln in shown if ln.startswith("gnn.lr "))
        assert "*0.002" in lr.replace(" ", "")[:20] and "0.001" in lr
        hidden = next(ln for ln in shown if ln.startswith("gnn.hidden "))
        assert "layout:nlp:random: 32" in hidden
    assert main(["config", "show", "--toml", *args]) == 0
    f = tmp_path / "shown.toml"
    f.write_text(capsys.readouterr().out)
    assert to_dict(load_config(f)) == to_dict(load_config(None, sets))


def test_config_show_reports_a_bad_value_in_one_line(capsys) -> None:
    assert main(["config", "show", "--set", "gnn.lr=-1"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["tpurank config: error: config: gnn.lr must be > 0, got -1.0"]


def _run(out: Path, lr: float, score: float, seconds: float) -> None:
    cfg = Config()
    cfg.gnn.lr = lr
    record = {"config": to_dict(cfg), "git_commit": "abc123", "data_fingerprint": "sha256:x:1files"}
    (out / "submissions").mkdir(parents=True)
    (out / "submissions/valid_gnn.json").write_text(
        json.dumps({**record, "scores": {"layout:xla:random": score, "overall": score}})
    )
    (out / "models/gnn/layout-xla-random").mkdir(parents=True)
    (out / "models/gnn/layout-xla-random/model.json").write_text(json.dumps({**record, "seconds": seconds}))


def test_runs_tables_what_differs_and_the_scores(tmp_path: Path, capsys) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    _run(a, 1e-3, 0.41, 600.0)
    _run(b, 2e-3, 0.45, 300.0)
    assert main(["runs", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    lr = next(ln for ln in out.splitlines() if ln.startswith("gnn.lr"))
    assert lr.split()[1:] == ["0.0010", "0.0020"]
    assert "gnn.hidden" not in out  # the same in both: not listed
    assert next(ln for ln in out.splitlines() if ln.startswith("gnn xla:random")).split()[2:] == [
        "0.4100",
        "0.4500",
    ]
    assert next(ln for ln in out.splitlines() if ln.startswith("gnn layout-xla-random")).split()[2:] == [
        "10.0000",
        "5.0000",
    ]
    assert main(["runs", str(tmp_path / "nothing")]) == 1
    assert "no run here" in capsys.readouterr().err
    assert flat({"a": {"b": 1, "c": [2]}}) == {"a.b": 1, "a.c": [2]}


@pytest.mark.parametrize(
    ("outs", "names"),
    [
        (["x/a", "x/b"], ["a", "b"]),
        (["early-stop/seed-0", "features/seed-0"], ["early-stop/seed-0", "features/seed-0"]),
        (["r/xla/seed-0", "s/xla/seed-0", "s/nlp/seed-0"], ["r/xla/seed-0", "s/xla/seed-0", "s/nlp/seed-0"]),
    ],
)
def test_runs_names_columns_by_the_path_parts_that_tell_them_apart(
    tmp_path: Path, outs: list[str], names: list[str]
) -> None:
    from tpurank.report.runs import labels

    assert labels([tmp_path / o for o in outs]) == names
