"""`tpurank config show` (sources, descriptions, a closed pipe), the docs' key table, and `tpurank runs`."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tpurank.cli import main
from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.config import Config, field_docs, to_dict
from tpurank.core.config_files import Layer, from_layers, load_config
from tpurank.core.errors import TpurankError
from tpurank.report.config_show import (
    REGENERATE,
    flat,
    markdown_keys,
    source,
    table,
    with_key_table,
    write_key_table,
)
from tpurank.run.stages import guarded

ROOT = Path(__file__).resolve().parents[2]


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


def _key_lines(shown: list[str]) -> dict[str, list[str]]:
    """A shown table's key rows (header and legend left out), each with its indented per-collection rows."""
    out: dict[str, list[str]] = {}
    key = ""
    for ln in shown[1:-1]:
        if not ln.startswith("  "):
            key = ln.split()[0]
        out.setdefault(key, []).append(ln)
    return out


@pytest.mark.parametrize("sets", [[], ["gnn.lr=0.002", 'collections."layout:nlp:random".gnn.hidden=32']])
def test_config_show_prints_every_key_and_round_trips(sets: list[str], tmp_path: Path, capsys) -> None:
    args = ["--profile", "gpu", *[x for s in sets for x in ("--set", s)]]
    assert main(["config", "show", *args]) == 0
    shown = capsys.readouterr().out.splitlines()
    keys = _key_lines(shown)
    assert set(keys) == set(all_keys()) and len(keys) > 60
    assert shown[0].split() == ["key", "value", "default", "source", "description"]
    assert shown[-1].startswith("*: differs from the default")
    if sets:
        lr = keys["gnn.lr"][0]
        assert "*0.002" in lr.replace(" ", "")[:20] and "0.001" in lr and " --set " in lr
        hidden = keys["gnn.hidden"]
        assert hidden[1].split() == ["layout:nlp:random", "*32", "--set"]
    assert main(["config", "show", "--toml", *args]) == 0
    f = tmp_path / "shown.toml"
    f.write_text(capsys.readouterr().out)
    assert to_dict(load_config(f)) == to_dict(load_config(None, sets))


def test_every_key_has_a_one_line_doc() -> None:
    docs = field_docs()
    assert set(docs) == {*all_keys(), "collections"}
    assert "seed" in docs and "gnn.lr" in docs and "ensemble.models" in docs
    empty = [k for k, d in docs.items() if not d.strip()]
    assert not empty, f"keys without a doc (value(..., doc=...) in core/config.py): {empty}"
    assert not [k for k, d in docs.items() if "\n" in d or len(d) > 110]


def test_list_defaults_are_fresh_per_config() -> None:
    a, b = Config(), Config()
    a.prepare.exclude.append("x")
    a.ensemble.models.append("baseline")
    a.collections["tile:xla"]["gnn"]["max_steps"] = 1
    assert b.prepare.exclude == [] and b.ensemble.models == ["lgbm", "gnn"]
    assert (
        b.collections["tile:xla"]["gnn"]["max_steps"]
        == DEFAULT_COLLECTIONS["tile:xla"]["gnn"]["max_steps"]
        != 1
    )


def test_source_is_the_last_layer_that_sets_a_key() -> None:
    layers = [
        Layer("profile cpu", {"gnn": {"hidden": 32, "lr": 0.002}}),
        Layer(
            "file my.toml",
            {"gnn": {"hidden": 64}, "collections": {"layout:xla:random": {"gnn": {"max_steps": 9}}}},
        ),
        Layer("--set", {"lgbm": {"threads": 2}, "collections": {"tile:xla": {"gnn": {"hidden": 16}}}}),
    ]
    assert source("gnn.hidden", layers) == "file my.toml"
    assert source("gnn.lr", layers) == "profile cpu"
    assert source("lgbm.threads", layers) == "--set"
    assert source("seed", layers) == "default"
    assert source("gnn.max_steps", layers, "layout:xla:random") == "file my.toml"
    assert source("gnn.max_steps", layers, "layout:nlp:random") == "per-collection default"
    assert source("gnn.hidden", layers, "tile:xla") == "--set"
    assert source("gnn.hidden", layers[:2], "tile:xla") == "default"

    keys = _key_lines(table(from_layers(layers), layers).splitlines())
    assert keys["gnn.hidden"][0].split()[:4] == ["gnn.hidden", "*64", "256", "file"]
    assert keys["gnn.hidden"][1].split() == ["tile:xla", "*16", "--set"]
    assert keys["seed"][0].split()[:4] == ["seed", "0", "0", "default"]
    steps = {ln.split()[0]: ln.split()[1:] for ln in keys["gnn.max_steps"][1:]}
    assert steps["layout:xla:random"] == ["*9", "file", "my.toml"]
    assert steps["layout:nlp:random"] == ["*52000", "per-collection", "default"]
    assert keys["gnn.lr"][0].split()[-1] == "decay)"  # the whole doc when no width is given


def test_config_show_names_the_profile_and_the_set_layers(capsys) -> None:
    assert main(["config", "show", "--profile", "cpu", "--set", "gnn.lr=0.003"]) == 0
    keys = _key_lines(capsys.readouterr().out.splitlines())
    assert keys["profile"][0].split()[:5] == ["profile", "*'cpu'", "'gpu'", "profile", "cpu"]
    assert keys["gnn.lr"][0].split()[3] == "--set"
    assert keys["gnn.seeds"][0].split()[:5] == ["gnn.seeds", "*3", "5", "profile", "cpu"]


def test_table_cuts_descriptions_to_the_width() -> None:
    cfg = Config()
    wide = table(cfg, [], width=None).splitlines()
    narrow = table(cfg, [], width=120).splitlines()
    assert max(map(len, wide[:-1])) > 120  # the test means something: some rows are wider
    assert max(map(len, narrow[:-1])) <= 120
    cut = [n for w, n in zip(wide, narrow, strict=True) if w != n]
    assert cut and all(
        n.endswith("...") and w.startswith(n[:-3]) for w, n in zip(wide, narrow, strict=True) if w != n
    )


def test_closed_pipe_ends_quietly() -> None:
    """`config show | head -1`: the reader leaves, the command exits 0 with nothing on stderr."""
    cmd = [sys.executable, "-m", "tpurank", "config", "show", "--profile", "gpu"]
    # the reader gone before the first write: the write surely fails
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    p.stdout.close()
    err = p.stderr.read().decode()
    assert (p.wait(timeout=120), err) == (0, "")
    # as a shell runs it: `head` reads one line, then leaves
    shell = f'{shlex.join(cmd)} | head -1; echo "rc=${{PIPESTATUS[0]}}"'
    r = subprocess.run(["bash", "-c", shell], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.stdout.splitlines()[0].split()[0] == "key" and r.stdout.splitlines()[-1] == "rc=0"
    assert r.stderr == ""


def test_a_broken_pipe_that_is_not_stdout_stays_an_error(capsys) -> None:
    """A worker's pipe breaking is a failure: only our own stdout losing its reader is quiet."""

    def worker_died() -> int:
        raise BrokenPipeError(32, "Broken pipe")

    assert guarded("prepare", worker_died) == 1
    assert capsys.readouterr().err == "tpurank prepare: error: Broken pipe\n"


def test_the_docs_key_table_is_generated_from_the_config() -> None:
    page = ROOT / "docs" / "configuration.md"
    text = page.read_text()
    assert with_key_table(text, str(page)) == text, (
        f"docs/configuration.md: the config key table differs from core/config.py; rewrite it with {REGENERATE}"
    )
    table_rows = markdown_keys().splitlines()[2:]
    assert len(table_rows) == len(field_docs())
    hops = next(r for r in table_rows if r.startswith("| `prepare.hops` |"))
    assert hops.split(" | ")[1:3] == ["`1`", ">= -1"]
    steps = next(r for r in table_rows if r.startswith("| `gnn.max_steps` |"))
    assert "11500 to 52000" in steps
    with pytest.raises(TpurankError, match="x.md: no <!-- config-keys:start -->"):
        with_key_table("no markers here", "x.md")


def test_write_key_table_rewrites_only_the_block(tmp_path: Path) -> None:
    page = tmp_path / "configuration.md"
    page.write_text("before\n<!-- config-keys:start -->\nSTALE ROW\n<!-- config-keys:end -->\nafter\n")
    write_key_table(page)
    text = page.read_text()
    assert text.startswith("before\n<!-- config-keys:start -->\n| key |") and text.endswith(
        "<!-- config-keys:end -->\nafter\n"
    )
    assert "STALE ROW" not in text and "| `gnn.lr` | `0.001` | > 0 |" in text


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
    pivot = {ln.split()[0]: ln.split()[2:9] for ln in out.splitlines() if ln.split()[1:2] == ["gnn"]}
    assert pivot == {  # scores per collection and overall, then training m:ss (test_runs.py: more)
        "a": ["-", "-", "0.4100", "-", "-", "0.4100", "10:00"],
        "b": ["-", "-", "0.4500", "-", "-", "0.4500", "5:00"],
    }
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


DEMO_SETS = [
    "gnn.max_steps=100",
    'collections."tile:xla".gnn.hidden=8',
    "gnn.warmup_steps=5",
    'collections."layout:xla:random".gnn.configs_per_graph=16',
]


def test_toml_fed_back_with_config_gives_the_same_config_on_demo_data(
    tiny_root: Path, tmp_path: Path, capsys
) -> None:
    """On small synthetic data the demo preset applies under --config and --set: the shown TOML, fed
    back with --config on the same data, resolves to the same config and prints the same TOML."""
    import argparse

    from tpurank.run.context import resolve_config

    sets = [x for s in DEMO_SETS for x in ("--set", s)]
    data = ["--data-dir", str(tiny_root)]
    assert main(["config", "show", "--toml", *data, *sets]) == 0
    shown = capsys.readouterr().out
    f = tmp_path / "shown.toml"
    f.write_text(shown)
    assert main(["config", "show", "--toml", *data, "--config", str(f)]) == 0
    assert capsys.readouterr().out == shown  # the same file, table for table, key for key
    first = argparse.Namespace(profile=None, config_file=None, set=DEMO_SETS)
    again = argparse.Namespace(profile=None, config_file=str(f), set=[])
    for ns in (first, again):
        resolve_config(ns, tiny_root)
        assert "preset demo.toml" in [layer.source for layer in ns.layers]  # applied once, never lost
    assert again.cfg == first.cfg and to_dict(again.cfg) == to_dict(first.cfg)
    assert list(again.cfg.collections) == list(first.cfg.collections)
    assert again.cfg.for_collection("tile:xla").gnn.hidden == 8
    assert again.cfg.for_collection("tile:xla").gnn.max_steps == 100  # --set at top level beats the preset's
    assert main(["config", "show", *data, *sets]) == 0
    table_first = [ln.split()[:2] for ln in capsys.readouterr().out.splitlines()]
    assert main(["config", "show", *data, "--config", str(f)]) == 0
    assert [ln.split()[:2] for ln in capsys.readouterr().out.splitlines()] == table_first
