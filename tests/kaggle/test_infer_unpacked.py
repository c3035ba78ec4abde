"""`infer` never replaces models it did not unpack: an out folder holding trained models (the project
root, where `all` trains, is its default) is refused in one line unless `--replace-models`; what it
unpacked itself it may replace, as long as nothing changed it since."""

from __future__ import annotations

import hashlib
import json
import zipfile
from pathlib import Path

import pytest
from helpers import one_error, snapshot

from tpurank.cli import main
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.kaggle import unpacked
from tpurank.kaggle.infer import unpack
from tpurank.kaggle.models_dataset import ARCHIVE, MANIFEST

PACKED = {
    "models/lgbm/tile-xla/model.txt": b"packed trees",
    "models/lgbm/tile-xla/config.json": b"{}",
    "features/prepared/node_feature_rule.json": b'{"rule": 1}',
}


def dataset(root: Path, files: dict[str, bytes] = PACKED) -> tuple[Path, dict]:
    """A models dataset as build-models-dataset writes one (archive and manifest)."""
    ds = root / "input" / "tpurank-models"
    ds.mkdir(parents=True)
    with zipfile.ZipFile(ds / ARCHIVE, "w") as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
    manifest = {
        "members": ["lgbm"],
        "files": {rel: hashlib.sha256(d).hexdigest() for rel, d in files.items()},
    }
    (ds / MANIFEST).write_text(json.dumps(manifest))
    return ds, manifest


def trained(out: Path) -> Path:
    """An out folder where training wrote a newer model than the packed one."""
    model = out / "models/lgbm/tile-xla/model.txt"
    model.parent.mkdir(parents=True)
    model.write_bytes(b"newer trees, trained here")
    (out / "models/lgbm/tile-xla/metrics.csv").write_text("round,valid_score\n1,0.5\n")
    return model


def infer(ds: Path, tmp_path: Path, *extra: str) -> int:
    (tmp_path / "data").mkdir(exist_ok=True)
    return main(["infer", "--models-dataset", str(ds), "--data-dir", str(tmp_path / "data"), *extra])


def test_an_out_folder_holding_trained_models_is_refused_untouched(tmp_path: Path, capsys) -> None:
    ds, _ = dataset(tmp_path)
    out = tmp_path / "out"
    model = trained(out)
    before = snapshot(out)
    assert infer(ds, tmp_path, "--out-dir", str(out)) == 1
    line = one_error(capsys, "infer")
    assert line == (
        f"tpurank infer: error: {out}: holds models infer did not unpack ({model} and 1 more: trained "
        "here?), which the models dataset's would replace; name another --out-dir, or pass "
        "--replace-models to replace them"
    )
    assert snapshot(out) == before  # not a byte replaced, no marker left


def test_the_default_out_folder_the_project_root_is_protected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    ds, _ = dataset(tmp_path)
    home = tmp_path / "project"
    model = trained(home)
    monkeypatch.setenv("TPURANK_HOME", str(home))  # the project root, where `all` trains
    assert infer(ds, tmp_path) == 1
    assert "holds models infer did not unpack" in one_error(capsys, "infer")
    assert model.read_bytes() == b"newer trees, trained here"


def test_replace_models_replaces_them_and_marks_them_as_unpacked(tmp_path: Path, capsys) -> None:
    ds, manifest = dataset(tmp_path)
    out = tmp_path / "out"
    model = trained(out)
    infer(ds, tmp_path, "--out-dir", str(out), "--replace-models")  # the later steps fail: no data
    capsys.readouterr()
    assert model.read_bytes() == PACKED["models/lgbm/tile-xla/model.txt"]
    paths = Paths(data=tmp_path, out=out)
    assert unpacked.recorded(paths) == {n: [d] for n, d in manifest["files"].items()}
    assert unpacked.foreign(paths, manifest["files"]) == [out / "models/lgbm/tile-xla/metrics.csv"]


def test_infer_replaces_what_it_unpacked_but_not_a_model_trained_over_it(tmp_path: Path) -> None:
    ds, manifest = dataset(tmp_path)
    paths = Paths(data=tmp_path, out=tmp_path / "out")
    for _ in range(2):  # a fresh folder, then its own unpacking again: nothing foreign
        unpacked.refuse_foreign(paths, manifest["files"], replace=False)
        unpacked.record(paths, manifest["files"])
        unpack(ds, manifest, paths)
        unpacked.prune(paths)
    newer, _ = dataset(tmp_path / "v2", {**PACKED, "models/lgbm/tile-xla/model.txt": b"v2 trees"})
    v2 = json.loads((newer / MANIFEST).read_text())
    unpacked.refuse_foreign(paths, v2["files"], replace=False)  # a new version over its own: allowed
    model = paths.models / "lgbm/tile-xla/model.txt"
    model.write_bytes(b"retrained by all")  # training wrote over what infer unpacked
    with pytest.raises(TpurankError, match=f"holds models infer did not unpack \\({model}: trained here"):
        unpacked.refuse_foreign(paths, v2["files"], replace=False)
    # a rule the work folder's cache was built with is protected too, unless identical
    paths = Paths(data=tmp_path, out=tmp_path / "fresh", work=tmp_path / "work")
    rule = paths.prepared / "node_feature_rule.json"
    rule.parent.mkdir(parents=True)
    rule.write_bytes(PACKED["features/prepared/node_feature_rule.json"])
    unpacked.refuse_foreign(paths, manifest["files"], replace=False)
    rule.write_bytes(b'{"rule": "fitted here"}')
    assert unpacked.foreign(paths, manifest["files"]) == [rule]


def test_the_marker_is_never_packed_nor_keyed(tmp_path: Path) -> None:
    from tpurank.core.staleness import Files

    ds, manifest = dataset(tmp_path)
    paths = Paths(data=tmp_path, out=tmp_path / "out")
    unpacked.record(paths, manifest["files"])
    assert unpacked.marker_path(paths).name.startswith(".")  # hidden: out of step records and listings
    assert unpacked.marker_path(paths) not in Files(paths.models).list()
    assert unpacked.marker_path(paths).parent == paths.models  # beside, not inside, a model folder


def test_a_failed_unpacking_stays_infer_s_to_replace(tmp_path: Path, capsys) -> None:
    """A dataset whose archive holds another model than its manifest names: infer fails in one line, and
    what it wrote is still its own, so the next infer with a sound dataset needs no --replace-models."""
    ds, manifest = dataset(tmp_path / "bad")
    with zipfile.ZipFile(ds / ARCHIVE, "w") as zf:  # the archive changed after the manifest was written
        for rel, data in {**PACKED, "models/lgbm/tile-xla/model.txt": b"damaged trees"}.items():
            zf.writestr(rel, data)
    out = tmp_path / "out"
    assert infer(ds, tmp_path, "--out-dir", str(out)) == 1
    capsys.readouterr()
    paths = Paths(data=tmp_path, out=out)
    assert unpacked.foreign(paths, manifest["files"]) == []  # not "trained here?" next time
    good, _ = dataset(tmp_path / "good")
    infer(good, tmp_path, "--out-dir", str(out))  # the later steps fail: no data
    assert "did not unpack" not in capsys.readouterr().err
    assert (out / "models/lgbm/tile-xla/model.txt").read_bytes() == PACKED["models/lgbm/tile-xla/model.txt"]
