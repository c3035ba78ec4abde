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
from tpurank.kaggle.infer import find_manifest, unpack
from tpurank.kaggle.models_dataset import ARCHIVE, MANIFEST, build, to_toml


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
