"""The model registry: each name loads a `Model` whose `train` and `predict` take what the stages
pass; the names are those `--model` offers; an unknown name, or a module this install lacks, is one
line; a missing library is not mistaken for a missing model."""

from __future__ import annotations

import inspect

import pytest

from tpurank.core.errors import TpurankError
from tpurank.core.names import Model as ModelName
from tpurank.models import registry
from tpurank.models.registry import MODEL_NAMES, REGISTRY, Model, check_name, get_model


def parameters(fn: object) -> list[str]:
    """The parameter names a caller passes (`self` of an unbound protocol method left out)."""
    return [p for p in inspect.signature(fn).parameters if p != "self"]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_each_name_loads_a_model_with_the_protocol_signatures(name: str) -> None:
    model = get_model(name)
    assert isinstance(model, Model)
    assert parameters(model.train) == parameters(Model.train) == ["paths", "cfg", "collection"]
    assert parameters(model.predict) == parameters(Model.predict) == ["paths", "cfg", "collection", "split"]
    assert get_model(name) is model  # the one object (or module) every stage calls


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
