"""Typed config (unknown keys are errors, per-collection overrides) and data-root resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

from tpurank.core import paths as paths_mod
from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.dataset import GraphFile, classify_path, discover


def test_defaults_and_file_and_overrides(tmp_path: Path) -> None:
    cfg_file = tmp_path / "c.toml"
    cfg_file.write_text(
        'seed = 7\n[gnn]\nhidden = 32\n[collections."layout:xla:default".gnn]\ncross_config_attention = true\n'
    )
    cfg = load_config(cfg_file, ["gnn.layers=5", "lgbm.learning_rate=0.1", "lgbm.objective=rank_xendcg"])
    assert cfg.seed == 7 and cfg.gnn.hidden == 32 and cfg.gnn.layers == 5
    assert cfg.lgbm.learning_rate == 0.1 and cfg.lgbm.objective == "rank_xendcg"
    assert cfg.gnn.cross_config_attention is False
    c = cfg.for_collection("layout:xla:default")
    assert c.gnn.cross_config_attention is True and c.gnn.hidden == 32 and c.collections == {}
    assert cfg.for_collection("layout:nlp:random").gnn.cross_config_attention is False


def test_per_collection_defaults_merge_under_the_users_tables(tmp_path: Path) -> None:
    """DEFAULT_COLLECTIONS (layer attention on the default collections) survives a user's own
    [collections] table for the same collection, and the user's keys win."""
    assert Config().for_collection("layout:xla:default").gnn.layer_attention is True
    assert Config().for_collection("layout:nlp:default").gnn.layer_attention is True
    assert Config().for_collection("layout:xla:random").gnn.layer_attention is False
    f = tmp_path / "c.toml"
    f.write_text('[collections."layout:xla:default".gnn]\nhidden = 8\n')
    c = load_config(f).for_collection("layout:xla:default")
    assert c.gnn.hidden == 8 and c.gnn.layer_attention is True
    off = load_config(f, ['collections."layout:nlp:default".gnn.layer_attention=false'])
    assert off.for_collection("layout:nlp:default").gnn.layer_attention is False
    applied = off.for_collection("layout:nlp:default")
    assert applied.collections == {}  # applied once: the defaults do not come back
    assert applied.for_collection("layout:nlp:default").gnn.layer_attention is False
    assert DEFAULT_COLLECTIONS["layout:nlp:default"]["gnn"]["layer_attention"] is True  # not mutated


def test_a_top_level_key_beats_the_per_collection_defaults_and_a_users_table_beats_both(
    tmp_path: Path,
) -> None:
    """The GPU scale of each collection is a default: `--set gnn.max_steps=16` means 16 steps everywhere."""
    gpu = Config()
    steps = {c: gpu.for_collection(c).gnn.max_steps for c in COLLECTIONS}
    assert steps == {c: DEFAULT_COLLECTIONS[c]["gnn"]["max_steps"] for c in COLLECTIONS}
    assert gpu.for_collection("layout:xla:random").gnn.configs_per_graph == 128
    assert gpu.for_collection("layout:xla:default").gnn.configs_per_graph == 64
    short = load_config(None, ["gnn.max_steps=16", "gnn.layer_attention=false"])
    for c in COLLECTIONS:
        g = short.for_collection(c).gnn
        assert (g.max_steps, g.layer_attention) == (16, False)
        assert g.warmup_steps == DEFAULT_COLLECTIONS[c]["gnn"]["warmup_steps"]  # keys not set keep theirs
    f = tmp_path / "c.toml"
    f.write_text('[gnn]\nmax_steps = 16\n[collections."tile:xla".gnn]\nmax_steps = 99\n')
    mixed = load_config(f)
    assert mixed.for_collection("tile:xla").gnn.max_steps == 99  # the user's own table
    assert mixed.for_collection("layout:nlp:random").gnn.max_steps == 16


@pytest.mark.parametrize(
    ("profile", "preset"),
    [("profile-cpu.toml", None), *[(f"profile-{p}.toml", "demo.toml") for p in ("cpu", "kaggle-t4", "gpu")]],
)
def test_the_presets_stay_lean_under_the_gpu_defaults(profile: str, preset: str | None) -> None:
    """The cpu profile, and the demo preset above any profile, set the keys they care about at top
    level: none of the GPU scale leaks in."""
    demo = paths_mod.preset_file(preset) if preset else None
    cfg = load_config(None, [], preset=demo, profile=paths_mod.preset_file(profile))
    for c in COLLECTIONS:
        g = cfg.for_collection(c).gnn
        assert g.hidden <= 64 and g.configs_per_graph <= 64 and g.seeds <= 3 and g.dropout == 0.0
        assert g.max_steps <= 4_000 and g.warmup_steps <= 100 and g.eval_every <= 200, (preset, c)


@pytest.mark.parametrize(
    ("collection", "how"),
    [("tile:xla", "zscore"), ("layout:xla:default", "rank"), ("layout:nlp:random", "rank")],
)
def test_tile_ensembles_z_scores_and_layout_ranks(collection: str, how: str) -> None:
    """The tile score looks at 5 top configs, where z-scores keep a member's confident picks."""
    assert Config().for_collection(collection).ensemble.normalize == how
    rank = load_config(None, [f'collections."{collection}".ensemble.normalize=rank'])
    assert rank.for_collection(collection).ensemble.normalize == "rank"  # the user's table wins


@pytest.mark.parametrize(
    "overrides, message",
    [
        (["gnn.hiden=3"], "unknown key gnn.hiden"),
        (["nosection.x=1"], "unknown key nosection"),
        (["gnn.hidden=abc"], "gnn.hidden must be int"),
        (["gnn.cross_config_attention=1"], "must be true or false"),
        (['collections."tile:xyz".gnn.hidden=3'], "unknown collection"),
        (["oops"], "must look like section.key=value"),
    ],
)
def test_config_errors_are_one_line(overrides: list[str], message: str) -> None:
    with pytest.raises(TpurankError, match=message):
        load_config(None, overrides)


def test_unknown_key_inside_collection_override() -> None:
    with pytest.raises(TpurankError, match="unknown key collections.layout:nlp:random.gnn.bogus"):
        load_config(None, ['collections."layout:nlp:random".gnn.bogus=1'])


def test_an_unknown_key_names_the_file_or_set_that_sets_it(tmp_path: Path) -> None:
    typo = tmp_path / "typo.toml"
    typo.write_text('seed = 3\n[collections."tile:xla".gnn]\nhiden = 3\n')
    with pytest.raises(TpurankError) as e:
        load_config(typo)
    assert str(e.value).startswith(f"{typo}: unknown key collections.tile:xla.gnn.hiden (known: aggr, ")
    with pytest.raises(TpurankError, match=r"^--set: unknown key gnn\.hiden \(known: aggr, "):
        load_config(None, ["gnn.hiden=3"])


def test_a_renamed_key_is_refused_naming_the_file_and_the_new_name(tmp_path: Path) -> None:
    """`baseline.op_dim` is `baseline.opcode_dim` now (one name for the opcode embedding's width, as
    `gnn.opcode_dim`): a user's config with the older name is refused in one line that says what to
    write; a config tpurank saved (a models dataset's) reads under the new name."""
    old = tmp_path / "old.toml"
    old.write_text("[baseline]\nop_dim = 32\n")
    with pytest.raises(TpurankError) as e:
        load_config(old)
    assert str(e.value) == (
        f"{old}: baseline.op_dim is now baseline.opcode_dim (renamed, the same setting): write opcode_dim"
    )
    per = tmp_path / "per.toml"
    per.write_text('[collections."tile:xla".baseline]\nop_dim = 24\n')
    with pytest.raises(TpurankError, match=r"per\.toml: collections\.tile:xla\.baseline\.op_dim is now "):
        load_config(per)
    with pytest.raises(TpurankError, match=r"^--set: baseline\.op_dim is now baseline\.opcode_dim"):
        load_config(None, ["baseline.op_dim=32"])
    assert load_config(None, ["baseline.opcode_dim=32"]).baseline.opcode_dim == 32
    assert load_config(old, saved=True).baseline.opcode_dim == 32
    saved = load_config(per, saved=True)
    assert saved.for_collection("tile:xla").baseline.opcode_dim == 24 and saved.baseline.opcode_dim == 64


def test_a_renamed_key_on_the_command_line_is_one_error_line(tmp_path: Path, capsys) -> None:
    from helpers import one_error

    from tpurank import cli

    old = tmp_path / "old.toml"
    old.write_text("[baseline]\nop_dim = 32\n")
    assert cli.main(["config", "show", "--config", str(old)]) == 1
    line = one_error(capsys, "config")
    assert line.endswith(
        f"{old}: baseline.op_dim is now baseline.opcode_dim (renamed, the same setting): write opcode_dim"
    )


def test_bad_toml_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = = 3")
    with pytest.raises(TpurankError, match="bad.toml: not valid TOML"):
        load_config(bad)
    with pytest.raises(TpurankError, match="config file not found"):
        load_config(tmp_path / "missing.toml")


def test_data_root_resolution_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TPURANK_DATA", str(tmp_path / "env"))
    # (root, named by the user): a named root is used or refused, never replaced by a fallback
    assert paths_mod.resolve_data_root(tmp_path / "cli") == (tmp_path / "cli", True)
    assert paths_mod.resolve_data_root(None) == (tmp_path / "env", True)
    monkeypatch.delenv("TPURANK_DATA")
    kaggle = tmp_path / "kaggle"
    kaggle.mkdir()
    monkeypatch.setattr(paths_mod, "KAGGLE_INPUT", kaggle)
    assert paths_mod.resolve_data_root(None) == (kaggle, False)
    monkeypatch.setattr(paths_mod, "KAGGLE_INPUT", tmp_path / "absent")
    assert paths_mod.resolve_data_root(None) == (paths_mod.project_root() / "data", False)
    assert paths_mod.Paths.resolve(None, tmp_path).data_named is False


def test_discover_real_sample_and_ids(sample_root: Path) -> None:
    files = discover(sample_root / NPZ_SUBDIR)
    assert len(files) == 15
    assert [f.collection for f in files] == sorted((f.collection for f in files), key=COLLECTIONS.index)
    ids = {f.id for f in files if f.split == "test"}
    sample_ids = {
        line.split(",")[0] for line in (sample_root / "sample_submission.csv").read_text().splitlines()[1:]
    }
    assert ids <= sample_ids and len(ids) == 10
    tests = discover(sample_root / NPZ_SUBDIR, collections=["layout:xla:random"], splits=["test"])
    assert tests == [
        GraphFile("layout:xla:random", "test", "cd708819d3f5103afd6460b15e74eaf3", tests[0].path)
    ]
    assert tests[0].id == "layout:xla:random:cd708819d3f5103afd6460b15e74eaf3"
    assert classify_path(tests[0].path) == ("layout:xla:random", "test")


def test_discover_rejects_unknown_names(tmp_path: Path) -> None:
    with pytest.raises(TpurankError, match="unknown collection"):
        discover(tmp_path, collections=["layout:xla:fast"])
    with pytest.raises(TpurankError, match="unknown split"):
        discover(tmp_path, splits=["dev"])


def test_project_root_is_the_checkout_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Outputs and the demo data go to the checkout whatever the current folder (not to $PWD)."""
    monkeypatch.delenv("TPURANK_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    root = Path(__file__).resolve().parents[2]
    assert paths_mod.checkout_root() == root and paths_mod.project_root() == root
    assert paths_mod.preset_file("demo.toml") == root / "configs" / "demo.toml"
    assert paths_mod.Paths.resolve().out == root
