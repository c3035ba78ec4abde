"""`REGISTRY`: model name -> the module that trains and predicts it (imported only when used).

A model module provides `train(paths, cfg, collection) -> None` and
`predict(paths, cfg, collection, split) -> dict[str, np.ndarray]` (graph ID -> cost per original
config index, lower = faster). `cfg` is the collection's config (`Config.for_collection`): the
callers (the train, predict and ensemble stages) apply the per-collection overrides, once. A value `module:attr` names an object inside a module that
provides both (the two untrained rankers share tpurank.models.untrained).
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any

from tpurank.core.errors import TpurankError

REGISTRY: dict[str, str] = {
    "random": "tpurank.models.untrained:RANDOM",
    "heuristic": "tpurank.models.untrained:HEURISTIC",
    "lgbm": "tpurank.lgbm.model",
    "gnn": "tpurank.gnn.entry:GNN",
    "baseline": "tpurank.gnn.entry:OFFICIAL",
    "ensemble": "tpurank.models.ensemble",
}
MODEL_NAMES: tuple[str, ...] = tuple(REGISTRY)


def check_name(name: str) -> str:
    """The registry's target of a model name, nothing imported (a stage that only waits on its
    training processes stays light).

    Raises:
        TpurankError: for an unknown name.
    """
    target = REGISTRY.get(name)
    if target is None:
        raise TpurankError(f"unknown model {name!r}; expected one of {', '.join(MODEL_NAMES)}")
    return target


def get_model(name: str) -> ModuleType | Any:
    """The object with `train` and `predict` for a model name.

    Raises:
        TpurankError: for an unknown name or a module missing from this version.
    """
    target = check_name(name)
    module_name, _, attr = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and module_name.startswith(e.name):
            raise TpurankError(f"model {name!r} ({module_name}) is not available in this version") from None
        raise
    obj = getattr(module, attr) if attr else module
    for fn in ("train", "predict"):
        if not callable(getattr(obj, fn, None)):
            raise TpurankError(f"model {name!r}: {target} has no {fn}()")
    return obj
