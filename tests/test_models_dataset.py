"""build-models-dataset and infer's unpacking: config as TOML, archive or Kaggle-unpacked folder, checksums."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest

from tpurank.core.config import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.core.toml_write import to_toml
from tpurank.kaggle.infer import find_manifest, unpack
from tpurank.kaggle.models_dataset import ARCHIVE, MANIFEST, build


def test_config_round_trips_through_toml(tmp_path: Path) -> None:
    cfg = load_config(
        None,
        [
            "gnn.hidden=32", "lgbm.objective=rank_xendcg", "ensemble.models=[\"gnn\"]",
            'collections."tile:xla".gnn.hidden=64', "prepare.hops=2", "lgbm.learning_rate=0.125",
        ],
    )  # fmt: skip
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


def test_no_fitted_ensemble_is_a_one_line_error(tmp_path: Path) -> None:
    paths = Paths(data=tmp_path / "data", out=tmp_path / "run")
    with pytest.raises(TpurankError, match="ensemble not fitted"):
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
        cwd=Path(__file__).resolve().parents[1],
    )
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and f"{ds / MANIFEST}: not JSON (" in err[0], r.stderr
    assert not (tmp_path / "o" / "models").exists()  # nothing unpacked


def _fake_run(tmp_path: Path, weights: str = '{"members": ["lgbm"]}') -> Paths:
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
    assert "weights.json: " in message and "fit the ensemble again (./run.sh ensemble)" in message, message
    assert "\n" not in message
