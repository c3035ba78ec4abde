"""How a config table becomes a checked dataclass: `value()` declares a key's doc and allowed values
beside its default, and `build_checked` turns a table into the dataclass, refusing unknown keys,
wrong types and values out of range with a one-line error (tpurank.core.config holds the keys).
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import field
from typing import Any

from tpurank.core.errors import TpurankError


def value(
    default: Any,
    *,
    doc: str = "",
    min: float | None = None,  # shadows the builtin inside this function only
    max: float | None = None,
    above: float | None = None,
    below: float | None = None,
    choices: tuple[Any, ...] | None = None,
) -> Any:
    """A config field with its reason and allowed values beside it: `lr: float = value(1e-3, doc=..., above=0)`.

    Every key is checked when a config is built (file, `--set` and per-collection overrides alike),
    so a bad value is a one-line error before any stage starts. The doc is what `config show` and the
    key table of docs/configuration.md print (`field_docs`), so it lives here once, not in a comment.

    Args:
        default: the default value; a list or dict is copied for each instance (a default_factory).
        doc: one line saying what the key does and why it has this default.
        min, max: inclusive bounds.
        above, below: exclusive bounds.
        choices: the only values allowed.
    """
    allowed = {"min": min, "max": max, "above": above, "below": below, "choices": choices}
    metadata = {"doc": doc, **{k: v for k, v in allowed.items() if v is not None}}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return field(default=default, metadata=metadata)


def merge_tables(base: dict[str, Any], over: dict[str, Any], where: str) -> dict[str, Any]:
    """`base` with `over`'s keys set over it, nested tables merged key by key (not replaced)."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = merge_tables(out[k], v, f"{where}.{k}")
        else:
            out[k] = v
    return out


@functools.cache
def type_hints(cls: type) -> dict[str, Any]:
    """`typing.get_type_hints(cls)`, once per class: the config modules' annotations are strings
    (`from __future__ import annotations`) that each call compiles and evaluates again, and every
    config built or split per collection asks for them: ~4 ms a Config, hundreds a stage. Read only."""
    return typing.get_type_hints(cls)


def _coerce(value: Any, typ: Any, where: str) -> Any:
    origin = typing.get_origin(typ)
    if dataclasses.is_dataclass(typ):
        if not isinstance(value, dict):
            raise TpurankError(f"config: {where} must be a table")
        return build_checked(typ, value, where)
    if origin is list:
        (inner,) = typing.get_args(typ)
        if not isinstance(value, list):
            raise TpurankError(f"config: {where} must be a list")
        return [_coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise TpurankError(f"config: {where} must be a table")
        return value
    if origin in (typing.Union, types.UnionType):
        return value
    if typ is bool:
        if not isinstance(value, bool):
            raise TpurankError(f"config: {where} must be true or false, got {value!r}")
        return value
    if typ is float and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if typ in (int, float, str) and not (isinstance(value, typ) and not isinstance(value, bool)):
        raise TpurankError(f"config: {where} must be {typ.__name__}, got {value!r}")
    if typ is float and not math.isfinite(value):  # inf or nan would train, and write, garbage
        raise TpurankError(f"config: {where} must be a finite number, got {value!r}")
    return value


def build_checked(cls: type, data: dict[str, Any], where: str) -> Any:
    """An instance of the dataclass `cls` from `data`, every key known, typed and within its range.

    Args:
        cls: a config dataclass (sections nest).
        data: its table.
        where: the table's dotted name, for the error ("" at top level).
    """
    hints = type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise TpurankError(f"config: {_unknown(where, unknown[0], known)}")
    kwargs = {k: _coerce(v, hints[k], f"{where}.{k}" if where else k) for k, v in data.items()}
    for f in dataclasses.fields(cls):
        if f.name in kwargs and f.metadata:
            check_value(kwargs[f.name], f.metadata, f"{where}.{f.name}" if where else f.name)
    return cls(**kwargs)


def unknown_key(cls: type, data: Mapping[str, Any], where: str) -> str | None:
    """What `build_checked` says of the first key of `data` (a table of the dataclass `cls`, its
    sections nested) that `cls` lacks, or None. Each layer of a run's config is checked so before
    the layers merge, so that the error can name the file that sets the key.

    Args:
        cls: a config dataclass.
        data: its table, as a layer sets it (not validated).
        where: the table's dotted name ("" at top level).
    """
    hints = type_hints(cls)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        return _unknown(where, unknown[0], known)
    for k, v in data.items():
        nested = dataclasses.is_dataclass(hints[k]) and isinstance(v, dict)
        if nested and (found := unknown_key(hints[k], v, f"{where}.{k}" if where else k)):
            return found
    return None


def _unknown(where: str, name: str, known: set[str]) -> str:
    """The words for an unknown key `name` of the table `where`, with the keys the table knows."""
    prefix = f"{where}." if where else ""
    return f"unknown key {prefix}{name} (known: {', '.join(sorted(known))})"


def check_value(v: Any, allowed: Mapping[str, Any], where: str) -> None:
    """Raise a one-line error when `v` breaks the range or choices declared with `value()`."""
    choices = allowed.get("choices")
    if choices is not None and v not in choices:
        raise TpurankError(f"config: {where} must be one of {', '.join(map(repr, choices))}, got {v!r}")
    tests = (
        ("min", lambda b: v >= b, ">="),
        ("max", lambda b: v <= b, "<="),
        ("above", lambda b: v > b, ">"),
        ("below", lambda b: v < b, "<"),
    )
    for key, ok, sign in tests:
        bound = allowed.get(key)
        if bound is not None and not ok(bound):
            raise TpurankError(f"config: {where} must be {sign} {bound:g}, got {v!r}")
