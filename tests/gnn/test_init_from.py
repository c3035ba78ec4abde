"""`gnn.init_from`: a training that starts from another model's weights (e.g. one trained on the
synthetic tree), keyed by that checkpoint's content, refused in one line when the networks differ."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch
from helpers import TRAINED_COLLECTION, TRAINED_SMALL, common, small_cfg, snapshot

from tpurank.cli import main
from tpurank.core.config import Config
from tpurank.core.config_files import load_config
from tpurank.core.declared import starting_points
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.gnn.data import load_split
from tpurank.gnn.device import Runtime
from tpurank.gnn.families import baseline
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.nets.standardize import STATISTICS
from tpurank.gnn.training.checkpoints import CHECKPOINT, training_key
from tpurank.gnn.training.loop import fit
from tpurank.gnn.training.loop_state import build

COLLECTION = "layout:xla:default"
CPU = Runtime(device=torch.device("cpu"))


def starting_from(cfg: Config, path: Path | str) -> Config:
    return replace(cfg, gnn=replace(cfg.gnn, init_from=str(path)))


@pytest.fixture(scope="module")
def pretrained(tiny_paths: Paths, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A gnn trained two steps on the tiny train graphs: the model others start from."""
    paths = Paths(data=tiny_paths.data, out=tmp_path_factory.mktemp("pretrained"))
    train = load_split(tiny_paths, COLLECTION, "train", progress=False)
    valid = load_split(tiny_paths, COLLECTION, "valid", progress=False)
    cfg = small_cfg(max_steps=2, eval_every=2, configs_per_graph=8)
    fit(gnn_model.SPEC, paths, cfg, COLLECTION, train, valid, CPU, progress=False)
    return paths.model_dir("gnn", COLLECTION) / CHECKPOINT


def test_a_training_starts_from_the_weights_with_its_own_input_statistics(
    tiny_paths: Paths, pretrained: Path, tmp_path: Path
) -> None:
    train = load_split(tiny_paths, COLLECTION, "train", progress=False)[:1]  # other graphs: other statistics
    cfg = starting_from(small_cfg(max_steps=2, configs_per_graph=8), pretrained)
    started = build(gnn_model.SPEC, Paths(tiny_paths.data, tmp_path), cfg, COLLECTION, train, CPU, False)
    fresh = build(
        gnn_model.SPEC, Paths(tiny_paths.data, tmp_path), small_cfg(), COLLECTION, train, CPU, False
    )
    theirs = torch.load(pretrained, weights_only=True)["state_dict"]
    mine, new = started.model.state_dict(), fresh.model.state_dict()
    assert mine.keys() == theirs.keys()
    for k, v in mine.items():
        if k in STATISTICS:  # fitted on this training's graph, as a new model's are
            torch.testing.assert_close(v, new[k])
            assert not torch.equal(v, theirs[k])
        else:
            torch.testing.assert_close(v, theirs[k])
    changed = [k for k in mine if k not in STATISTICS and not torch.equal(mine[k], new[k])]
    assert changed, "the weights are a new model's, not the pretrained ones"


@pytest.mark.parametrize(
    ("other", "named"),
    [({"hidden": 8}, "hidden 16 (here 8)"), ({"layers": 3}, "layers 2 (here 3)")],
)
def test_another_network_is_refused_in_one_line_naming_the_file(
    tiny_paths: Paths, pretrained: Path, tmp_path: Path, other: dict, named: str
) -> None:
    train = load_split(tiny_paths, COLLECTION, "train", progress=False)
    cfg = starting_from(small_cfg(**other), pretrained)
    with pytest.raises(TpurankError) as e:
        build(gnn_model.SPEC, Paths(tiny_paths.data, tmp_path), cfg, COLLECTION, train, CPU, False)
    assert str(pretrained) in str(e.value) and named in str(e.value) and "\n" not in str(e.value)


def test_a_missing_file_or_another_family_is_refused(
    tiny_paths: Paths, pretrained: Path, tmp_path: Path
) -> None:
    train = load_split(tiny_paths, COLLECTION, "train", progress=False)
    paths = Paths(tiny_paths.data, tmp_path)
    with pytest.raises(
        TpurankError,
        match="nothing.pt: no such checkpoint \\(gnn.init_from names the model.pt to start from\\)",
    ):
        build(
            gnn_model.SPEC,
            paths,
            starting_from(small_cfg(), tmp_path / "nothing.pt"),
            COLLECTION,
            train,
            CPU,
            False,
        )
    state = torch.load(pretrained, weights_only=True)
    other = tmp_path / "baseline.pt"
    torch.save({**state, "model": baseline.SPEC.name}, other)
    with pytest.raises(TpurankError, match="a baseline model; gnn.init_from needs a gnn one"):
        build(gnn_model.SPEC, paths, starting_from(small_cfg(), other), COLLECTION, train, CPU, False)


def test_the_key_follows_the_starting_checkpoints_content(
    tiny_paths: Paths, pretrained: Path, tmp_path: Path
) -> None:
    copy = tmp_path / "start.pt"
    copy.write_bytes(pretrained.read_bytes())
    cfg = starting_from(small_cfg(), copy)
    key = training_key(gnn_model.SPEC, tiny_paths, cfg, COLLECTION)
    assert key != training_key(gnn_model.SPEC, tiny_paths, small_cfg(), COLLECTION)
    assert key == training_key(gnn_model.SPEC, tiny_paths, cfg, COLLECTION)
    state = torch.load(copy, weights_only=True)
    state["state_dict"] = {k: v + 1 for k, v in state["state_dict"].items()}
    torch.save(state, copy)  # the same path, other weights: the model trains again
    assert key != training_key(gnn_model.SPEC, tiny_paths, cfg, COLLECTION)


def test_each_collection_starts_from_its_own_checkpoint() -> None:
    cfg = load_config(None, ['collections."layout:xla:default".gnn.init_from=~/a.pt', "gnn.init_from=b.pt"])
    assert starting_points(cfg, "gnn", ["layout:xla:default"]) == [Path("~/a.pt").expanduser()]
    assert starting_points(cfg, "gnn", ["tile:xla", "layout:nlp:random"]) == [Path("b.pt")]
    assert starting_points(cfg, "lgbm", ["tile:xla"]) == []  # a section without init_from
    assert starting_points(load_config(None, []), "gnn", ["tile:xla"]) == []


def test_train_starts_from_a_checkpoint_and_a_missing_one_is_one_line(
    trained: Paths, tmp_path: Path, capsys: pytest.CaptureFixture, one_thread
) -> None:
    """Through the CLI: `--set gnn.init_from` retrains from the named weights once (its content keys the
    model, so a second run is up to date); a missing file is one line, and the finished model stays."""
    final = trained.model_dir("gnn", TRAINED_COLLECTION)
    start = tmp_path / "start.pt"
    start.write_bytes((final / CHECKPOINT).read_bytes())
    small = [arg for item in TRAINED_SMALL for arg in ("--set", item)]
    args = ["train", "--model", "gnn", "--collections", TRAINED_COLLECTION, *common(trained), *small]
    before = snapshot(final)
    assert main([*args, "--set", f"gnn.init_from={start}"]) == 0
    after = snapshot(final)
    assert after != before  # another key: trained again, from the named weights
    assert main([*args, "--set", f"gnn.init_from={start}"]) == 0 and snapshot(final) == after
    capsys.readouterr()
    assert main([*args, "--set", f"gnn.init_from={tmp_path / 'gone.pt'}"]) == 1
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if "error" in ln]
    assert len(errors) == 1 and errors[0].startswith("tpurank train: error: ") and "Traceback" not in err
    assert errors[0].endswith("gone.pt: no such checkpoint (gnn.init_from names the model.pt to start from)")
    assert snapshot(final) == after and not any(p.name.startswith(".next-") for p in final.parent.iterdir())
