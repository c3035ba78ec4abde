"""`build-models-dataset` packs whatever was trained (here LightGBM alone, no ensemble), and `infer`
writes the submission from it with the model `rank` would choose, saying which in one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import clean_all_tree
from runners import in_process

from tpurank.core.collections import COLLECTIONS
from tpurank.kaggle.choice import SEEDS_SUMMARY


def test_the_seeds_summary_is_the_gnns() -> None:
    from tpurank.gnn.seeds import SUMMARY

    assert SEEDS_SUMMARY[0] == SUMMARY


def test_lgbm_alone_packs_and_infers(
    tiny_root: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    clean = clean_all_tree(tmp_path_factory, tiny_root)
    out = tmp_path / "run"
    shutil.copytree(clean / "run", out, symlinks=True)
    for model in ("gnn", "ensemble"):
        shutil.rmtree(out / "models" / model)
    dest = tmp_path / "kaggle-models"
    r = in_process(
        "build-models-dataset",
        "--out-dir",
        str(out),
        "--dest",
        str(dest),
        "--allow-synthetic",
        "--kaggle-user",
        "someone",
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    manifest = json.loads((dest / "tpurank-models.json").read_text())
    assert manifest["members"] == ["lgbm"] and manifest["models"] == {c: ["lgbm"] for c in COLLECTIONS}
    assert all(not name.startswith(("models/gnn/", "models/ensemble/")) for name in manifest["files"])
    assert "lgbm for tile:xla" in r.stdout
    r = in_process(
        "infer",
        "--models-dataset",
        str(dest),
        "--data-dir",
        str(clean / "data"),
        "--out-dir",
        str(tmp_path / "infer"),
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    made = [x for x in r.stderr.splitlines() if "the submission is made by" in x]
    assert len(made) == 1 and f"lgbm for {', '.join(COLLECTIONS)}" in made[0], r.stderr[-2000:]
    assert "no fitted ensemble: ranked by lgbm, the only trained model" in made[0]
    submission = tmp_path / "infer" / "submissions" / "submission.csv"
    check = in_process("check-submission", str(submission), "--data-dir", str(clean / "data"))
    assert check.returncode == 0, check.stdout + check.stderr
    # the same ranking as LightGBM's own test CSV of the clean run
    assert submission.read_text() == (clean / "run" / "submissions" / "test_lgbm.csv").read_text()
    assert json.loads(submission.with_suffix(".json").read_text())["models"] == {
        c: "lgbm" for c in COLLECTIONS
    }
