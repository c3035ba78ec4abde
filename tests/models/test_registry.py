"""The model registry: each name loads a `Model` whose `train` and `predict` take what the stages
pass, and whose declarations (`train_io`, `predict_io`) are tpurank.core.declared's for its name;
the names are those `--model` offers; an unknown name, or a module this install lacks, is one
line; a missing library is not mistaken for a missing model."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest

from tpurank.core import declared
from tpurank.core.collections import SPLITS
from tpurank.core.errors import TpurankError
from tpurank.core.names import Model as ModelName
from tpurank.core.paths import Paths
from tpurank.core.staleness import Files
from tpurank.models import registry
from tpurank.models.registry import MODEL_NAMES, REGISTRY, Model, check_name, get_model

# the protocol's members, read off the class: a member added to `Model` is checked on every model
MEMBERS = tuple(n for n, v in vars(Model).items() if callable(v) and not n.startswith("_"))


def parameters(fn: object) -> list[str]:
    """The parameter names a caller passes (`self` of an unbound protocol method left out)."""
    return [p for p in inspect.signature(fn).parameters if p != "self"]


def signature(fn: object) -> inspect.Signature:
    """`fn`'s signature as a caller sees it: names, kinds, defaults and annotations, `self` left out."""
    sig = inspect.signature(fn)
    return sig.replace(parameters=[p for p in sig.parameters.values() if p.name != "self"])


def test_the_protocol_is_what_a_model_does_and_what_it_reads_and_writes() -> None:
    assert MEMBERS == ("train", "predict", "train_io", "predict_io")


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_each_name_loads_a_model_with_the_protocol_signatures(name: str) -> None:
    model = get_model(name)
    assert isinstance(model, Model)
    for member in MEMBERS:  # each one there, callable, and taking what the protocol's takes
        assert callable(getattr(model, member, None)), f"{name} lacks {member}"
        assert signature(getattr(model, member)) == signature(getattr(Model, member)), f"{name}.{member}"
    assert parameters(model.train) == ["paths", "cfg", "collection"]
    assert parameters(model.predict) == ["paths", "cfg", "collection", "split"]
    assert parameters(model.train_io) == ["paths", "starts"]
    assert parameters(model.predict_io) == ["paths", "split"]
    assert get_model(name) is model  # the one object (or module) every stage calls


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_a_models_declarations_are_those_of_its_name(name: str, tmp_path: Path) -> None:
    """What a model says it reads and writes is what a stage that has not imported it reads off
    tpurank.core.declared for its name, for the same paths, starting points and split."""
    paths = Paths(data=tmp_path / "data", out=tmp_path / "out")
    model, starts = get_model(name), [tmp_path / "elsewhere" / "model.pt"]
    assert model.train_io(paths) == declared.train_io(paths, name)
    assert model.train_io(paths, starts) == declared.train_io(paths, name, starts)
    assert model.train_io(paths).writes == [Files(paths.models / name)]  # its own folder, by its name
    for split in SPLITS:
        assert model.predict_io(paths, split) == declared.predict_io(paths, name, split)
        assert Files(paths.prediction_file(name, split)) in model.predict_io(paths, split).writes


def test_the_names_are_the_models_of_the_cli() -> None:
    assert tuple(m.value for m in ModelName) == MODEL_NAMES
    assert check_name("lgbm") is REGISTRY["lgbm"] is registry.lgbm


def test_an_unknown_name_is_one_line() -> None:
    with pytest.raises(TpurankError, match=r"^unknown model 'xgb'; expected one of random, heuristic, lgbm,"):
        get_model("xgb")


def test_a_module_this_install_lacks_is_one_line_and_a_missing_library_is_raised(monkeypatch) -> None:
    def lacking() -> Model:
        import tpurank.models.not_shipped  # noqa: F401

        raise AssertionError("unreachable")

    def library() -> Model:
        import not_a_library_tpurank_uses  # noqa: F401

        raise AssertionError("unreachable")

    monkeypatch.setitem(REGISTRY, "lgbm", lacking)
    with pytest.raises(TpurankError, match=r"^model 'lgbm' \(tpurank.models.not_shipped\) is not available"):
        get_model("lgbm")
    monkeypatch.setitem(REGISTRY, "lgbm", library)
    with pytest.raises(ModuleNotFoundError, match="not_a_library_tpurank_uses"):
        get_model("lgbm")
