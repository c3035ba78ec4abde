"""build-models-dataset and infer's unpacking: config as TOML, archive or Kaggle-unpacked folder, checksums."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.core.toml_write import to_toml
from tpurank.kaggle.infer import find_manifest, unpack
from tpurank.kaggle.models_dataset import ARCHIVE, MANIFEST, build


def test_config_round_trips_through_toml(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        [
            "gnn.hidden=32",
            "lgbm.objective=rank_xendcg",
            'ensemble.models=["gnn"]',
            'collections."tile:xla".gnn.hidden=64',
            "prepare.hops=2",
            "lgbm.learning_rate=0.125",
        ],
    )
    from tpurank.core.config import to_dict

    f = tmp_path / "c.toml"
    f.write_text(to_toml(to_dict(cfg)))
    back = load_config(f)
    assert back == cfg
    assert back.for_collection("tile:xla").gnn.hidden == 64 and back.gnn.hidden == 32


def _fake_dataset(tmp_path: Path) -> tuple[Path, dict]:
    files = {"models/gnn/tile-xla/model.pt": b"weights", "features/prepared/node_feature_rule.json": b"{}"}
    ds = tmp_path / "input" / "tpurank-models"
    ds.mkdir(parents=True)
    with zipfile.ZipFile(ds / ARCHIVE, "w") as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
    manifest = {"members": ["gnn"], "files": {rel: hashlib.sha256(d).hexdigest() for rel, d in files.items()}}
    (ds / MANIFEST).write_text(json.dumps(manifest))
    return ds, manifest


def test_unpack_archive_or_the_folder_kaggle_unpacked(tmp_path: Path) -> None:
    ds, manifest = _fake_dataset(tmp_path)
    assert find_manifest(tmp_path / "input") == ds / MANIFEST  # searched below the input root
    unpack(ds, manifest, Paths(data=tmp_path, out=tmp_path / "out1"))
    assert (tmp_path / "out1/models/gnn/tile-xla/model.pt").read_bytes() == b"weights"
    # with a work folder, the cache's rule goes there (where prepare reads it), the models to out
    unpack(ds, manifest, Paths(data=tmp_path, out=tmp_path / "out3", work=tmp_path / "work3"))
    assert (tmp_path / "work3/features/prepared/node_feature_rule.json").read_bytes() == b"{}"
    assert (tmp_path / "out3/models/gnn/tile-xla/model.pt").read_bytes() == b"weights"
    assert not (tmp_path / "out3/features").exists()
    # Kaggle unpacks an uploaded zip into a folder: no archive, the files one level down
    with zipfile.ZipFile(ds / ARCHIVE) as zf:
        zf.extractall(ds / "models")
    (ds / ARCHIVE).unlink()
    unpack(ds, manifest, Paths(data=tmp_path, out=tmp_path / "out2"))
    assert (tmp_path / "out2/features/prepared/node_feature_rule.json").read_bytes() == b"{}"


def test_unpack_refuses_a_changed_file(tmp_path: Path) -> None:
    ds, manifest = _fake_dataset(tmp_path)
    manifest["files"]["models/gnn/tile-xla/model.pt"] = "0" * 64
    with pytest.raises(TpurankError, match="different from the models dataset"):
        unpack(ds, manifest, Paths(data=tmp_path, out=tmp_path / "out"))


def test_no_trained_model_is_a_one_line_error(tmp_path: Path) -> None:
    """Any trained subset packs (tests/kaggle/test_models_subset.py); nothing trained is one line."""
    paths = Paths(data=tmp_path / "data", out=tmp_path / "run")
    with pytest.raises(TpurankError, match="no trained models"):
        build(paths, load_config(), tmp_path / "dest", "me")


# ------------------------------------------------------------------ our own files, broken by hand


MANIFEST_CASES = {
    "not JSON": ("{members: [", "not JSON ("),
    "not an object": ("[1, 2]", "expected a JSON object, found list"),
    "no members": ('{"files": {"models/a": "' + "0" * 64 + '"}}', "'members' must be a non-empty list"),
    "members of the wrong type": ('{"members": "gnn", "files": {}}', "'members' must be a non-empty list"),
    "an unknown member": ('{"members": ["ensemble"], "files": {}}', "'members' must be a non-empty list"),
    "files a list": ('{"members": ["gnn"], "files": ["models/a"]}', "'files' must be a non-empty object"),
    "a bad digest": (
        '{"members": ["gnn"], "files": {"models/a": 7}}',
        "'files': models/a: 7 is not a sha256",
    ),
    "a path outside": (
        '{"members": ["gnn"], "files": {"models/../../x": "' + "0" * 64 + '"}}',
        "'files': 'models/../../x' is not a path below features/ or models/",
    ),
    "an absolute path": (
        '{"members": ["gnn"], "files": {"/etc/x": "' + "0" * 64 + '"}}',
        "'files': '/etc/x' is not a path below",
    ),
}


@pytest.mark.parametrize("case", list(MANIFEST_CASES))
def test_a_broken_manifest_is_one_line(case: str, tmp_path: Path) -> None:
    from tpurank.kaggle.models_dataset import read_manifest

    text, problem = MANIFEST_CASES[case]
    f = tmp_path / MANIFEST
    f.write_text(text)
    with pytest.raises(TpurankError) as e:
        read_manifest(f)
    message = str(e.value)
    assert message.startswith(f"{f}: ") and problem in message, message
    assert "\n" not in message and message.endswith("rebuild the models dataset with build-models-dataset")


def test_infer_with_a_manifest_that_is_not_json_exits_in_one_line(tmp_path: Path) -> None:
    import subprocess
    import sys

    ds, _ = _fake_dataset(tmp_path)
    (ds / MANIFEST).write_text("not json")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tpurank",
            "infer",
            "--models-dataset",
            str(ds),
            "--out-dir",
            str(tmp_path / "o"),
        ],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f"{ds / MANIFEST}: not JSON (" in err[0], r.stderr
    assert not (tmp_path / "o" / "models").exists()  # nothing unpacked


def _fake_run(
    tmp_path: Path, weights: str = '{"members": ["lgbm"], "weights": [1.0], "normalize": "rank"}'
) -> Paths:
    from tpurank.core.collections import COLLECTIONS

    paths = Paths(data=tmp_path / "data", out=tmp_path / "run")
    for c in COLLECTIONS:
        paths.model_dir("ensemble", c).mkdir(parents=True)
        (paths.model_dir("ensemble", c) / "weights.json").write_text(weights)
        paths.model_dir("lgbm", c).mkdir(parents=True)
        (paths.model_dir("lgbm", c) / "provenance.json").write_text("{}")  # no config: not compared
    return paths


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"config": ', "not JSON ("),
        ("[]", "expected a JSON object, found list"),
        ('{"config": 3}', "'config' is not a JSON object"),
        ('{"config": {"prepare": "hops=2"}}', "'config': [prepare] is not a JSON object"),
    ],
)
def test_build_models_dataset_with_a_broken_provenance_is_one_line(
    tmp_path: Path, text: str, problem: str
) -> None:
    from tpurank.core.collections import COLLECTIONS

    paths = _fake_run(tmp_path)
    side = paths.model_dir("lgbm", COLLECTIONS[2]) / "provenance.json"
    side.write_text(text)
    with pytest.raises(TpurankError) as e:
        build(paths, load_config(), tmp_path / "dest", "me")
    message = str(e.value)
    assert message.startswith(f"{side}: {problem}") and "\n" not in message, message
    assert "retrain lgbm for" in message
    assert not (tmp_path / "dest").exists()


@pytest.mark.parametrize("weights", ["not json", "{}", '{"members": "lgbm"}', '{"members": [1]}'])
def test_build_models_dataset_with_broken_ensemble_weights_is_one_line(tmp_path: Path, weights: str) -> None:
    paths = _fake_run(tmp_path, weights)
    with pytest.raises(TpurankError) as e:
        build(paths, load_config(), tmp_path / "dest", "me")
    message = str(e.value)
    assert "weights.json: " in message and "refit it: `tpurank train --model ensemble`" in message, message
    assert "\n" not in message


# ------------------------------------------------------- what the models were trained on and with


def _data_tree(root: Path, scale: str | None) -> Path:
    """A data root (npz_all/npz); with `scale`, a synthetic tree (its synth.json)."""
    (root / NPZ_SUBDIR).mkdir(parents=True)
    if scale is not None:
        (root / "synth.json").write_text(json.dumps({"scale": scale}))
    return root


def _trained_run(tmp_path: Path, data: Path) -> Paths:
    """An lgbm + ensemble run trained on `data` with the demo preset (each collection's config in its
    sidecars, as training writes them); the lgbm sidecars record their own boosting rounds."""
    from tpurank.core.collections import COLLECTIONS
    from tpurank.core.paths import preset_file
    from tpurank.core.provenance import write_sidecar
    from tpurank.prepare.node_features import RULE_FILE

    demo = load_config(None, ["seed=7"], preset=preset_file("demo.toml"))
    lgbm = load_config(None, ["seed=7", "lgbm.num_boost_round=77"], preset=preset_file("demo.toml"))
    paths = Paths(data=tmp_path / "current-data", out=tmp_path / "run")
    for c in COLLECTIONS:
        ens = paths.model_dir("ensemble", c)
        ens.mkdir(parents=True)
        (ens / "weights.json").write_text('{"members": ["lgbm"], "weights": [1.0], "normalize": "rank"}')
        write_sidecar(ens / "provenance.json", demo.for_collection(c), data, model="ensemble")
        paths.model_dir("lgbm", c).mkdir(parents=True)
        write_sidecar(
            paths.model_dir("lgbm", c) / "provenance.json", lgbm.for_collection(c), data, model="lgbm"
        )
    paths.prepared.mkdir(parents=True)
    (paths.prepared / RULE_FILE).write_text("{}")
    return paths


def _build_cli(paths: Paths, dest: Path, *extra: str) -> list[str]:
    return ["build-models-dataset", "--out-dir", str(paths.out), "--dest", str(dest), *extra]


def test_models_trained_on_synthetic_data_are_refused_in_one_line(tmp_path: Path, capsys) -> None:
    from tpurank import cli

    synthetic = _data_tree(tmp_path / "data" / "synthetic-demo", "demo")
    paths = _trained_run(tmp_path, synthetic)
    dest = tmp_path / "dest"
    assert cli.main(_build_cli(paths, dest, "--kaggle-user", "someone")) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "trained on synthetic data" in err[0], err
    assert str(synthetic) in err[0] and "'demo' scale" in err[0] and "--allow-synthetic" in err[0]
    assert "not Kaggle scores" in err[0] and not dest.exists()
    # decided from what the models recorded: the current data root (real here) does not matter
    _data_tree(paths.data, None)
    with pytest.raises(TpurankError, match="trained on synthetic data"):
        build(paths, load_config(), dest, "someone")
    # sidecars written before `data_synthetic` existed: their data root's synth.json says it
    for f in paths.models.glob("*/*/provenance.json"):
        record = json.loads(f.read_text())
        assert record.pop("data_synthetic") == "demo"
        f.write_text(json.dumps(record))
    with pytest.raises(TpurankError, match="trained on synthetic data"):
        build(paths, load_config(), dest, "someone")


def test_allow_synthetic_packs_and_the_manifest_names_the_data_and_the_config(tmp_path: Path, capsys) -> None:
    from tpurank import cli
    from tpurank.core.provenance import data_fingerprint

    synthetic = _data_tree(tmp_path / "data" / "synthetic-demo", "demo")
    paths = _trained_run(tmp_path, synthetic)
    dest = tmp_path / "dest"
    assert cli.main(_build_cli(paths, dest, "--allow-synthetic", "--kaggle-user", "someone")) == 0
    captured = capsys.readouterr()
    assert "SYNTHETIC" in captured.err and f"trained on: {synthetic} (synthetic 'demo'" in captured.out
    manifest = json.loads((dest / MANIFEST).read_text())
    assert manifest["data_root"] == str(synthetic) and manifest["data"] == "synthetic"
    assert manifest["data_synthetic"] == "demo"
    assert manifest["data_fingerprint"] == data_fingerprint(synthetic)
    assert len(manifest["trained_on"]) == 1 and len(manifest["trained_on"][0]["models"]) == 10
    assert manifest["config_source"] == "the models' sidecars" and manifest["seed"] == 7
    # the config the models were trained with (the demo preset), not the current (GPU-scale) one
    packed, current = load_config(dest / "config.toml"), load_config()
    assert packed.seed == 7 != current.seed
    for c, steps in (("tile:xla", 600), ("layout:nlp:random", 240)):
        assert packed.for_collection(c).gnn.max_steps == steps != current.for_collection(c).gnn.max_steps
        assert packed.for_collection(c).lgbm.num_boost_round == 77  # lgbm's own record, not the ensemble's
    assert manifest["config"]["gnn"]["hidden"] == 32 and current.gnn.hidden != 32


def test_models_trained_on_real_data_pack_without_the_flag(tmp_path: Path) -> None:
    real = _data_tree(tmp_path / "tpugraphs", None)
    paths = _trained_run(tmp_path, real)
    manifest = build(paths, load_config(), tmp_path / "dest", "someone")
    assert manifest["data"] == "real" and manifest["data_synthetic"] is None
    assert manifest["data_root"] == str(real)


def test_models_whose_configs_say_op_dim_pack_and_read_under_the_new_name(tmp_path: Path) -> None:
    """Models trained while `baseline.opcode_dim` was called `op_dim`: their sidecars' configs, and a
    models dataset's config.toml written then, say `op_dim`; both read as `opcode_dim`."""
    import tomllib

    paths = _trained_run(tmp_path, _data_tree(tmp_path / "tpugraphs", None))
    for f in paths.models.glob("*/*/provenance.json"):
        record = json.loads(f.read_text())
        section = record["config"]["baseline"]
        assert section.pop("opcode_dim") == 64
        section["op_dim"] = 48
        f.write_text(json.dumps(record))
    dest = tmp_path / "dest"
    build(paths, load_config(), dest, "someone")
    packed = load_config(dest / "config.toml")
    assert packed.baseline.opcode_dim == 48 and packed.gnn.opcode_dim == load_config().gnn.opcode_dim
    # the config.toml of a models dataset built then: infer and rank read it (saved), a user's is refused
    table = tomllib.loads((dest / "config.toml").read_text())
    table["baseline"]["op_dim"] = table["baseline"].pop("opcode_dim")
    older = tmp_path / "older" / "config.toml"
    older.parent.mkdir()
    older.write_text(to_toml(table))
    assert load_config(older, saved=True) == packed
    with pytest.raises(TpurankError, match="config.toml: baseline.op_dim is now baseline.opcode_dim"):
        load_config(older)


@pytest.mark.parametrize("user", ["YOUR_KAGGLE_USERNAME", "USERNAME", "<user>", "your-username", "$USER"])
@pytest.mark.parametrize("how", ["flag", "env"])
def test_a_placeholder_user_is_refused_in_one_line(
    tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch, user: str, how: str
) -> None:
    from tpurank import cli

    paths = _trained_run(tmp_path, _data_tree(tmp_path / "tpugraphs", None))
    dest = tmp_path / "dest"
    extra = ["--kaggle-user", user] if how == "flag" else []
    if how == "env":
        monkeypatch.setenv("KAGGLE_USERNAME", user)
    assert cli.main(_build_cli(paths, dest, *extra)) == 1
    err = capsys.readouterr().err.strip().splitlines()
    where = "--kaggle-user" if how == "flag" else "KAGGLE_USERNAME"
    assert len(err) == 1 and f"{where} {user!r} is a placeholder: pass your Kaggle user name" in err[0], err
    assert not dest.exists()


def test_kaggle_user_names() -> None:
    from tpurank.kaggle.code_dataset import check_user

    for ok in ("someone", "flag-user", "me", "User42"):
        assert check_user(ok, "--kaggle-user") == ok
    for bad in ("a b", "me/you", "-x"):
        with pytest.raises(TpurankError, match="is not a Kaggle user name"):
            check_user(bad, "--kaggle-user")
