"""A Config from a merged table of settings (core/config_files.py gathers the layers): the
per-collection defaults go under the user's [collections] tables, the tables are put in one order,
and every key is checked, alone (`value()`, core/config_schema.py) and in the pairs that tie two keys.
A table tpurank saved reads its renamed keys under their new names (`with_new_names`).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

from tpurank.core.collection_defaults import collection_defaults
from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import RENAMED, Config, config_fields, to_dict
from tpurank.core.config_schema import build_checked, merge_tables
from tpurank.core.errors import TpurankError
from tpurank.core.names import LEARNED_MODELS


def from_dict(data: dict[str, Any]) -> Config:
    """Build and validate a Config; its [collections] tables go over the per-collection defaults, which
    give way to every key `data` sets at top level (core/collection_defaults.py)."""
    over = data.get("collections", {})
    if not isinstance(over, dict):
        raise TpurankError("config: collections must be a table")
    merged = merge_tables(collection_defaults(data), over, "collections")
    data = {**data, "collections": canonical_collections(merged)}
    cfg = build_checked(Config, data, "")
    check_pairs(cfg, "")
    for collection, over in cfg.collections.items():
        if collection not in COLLECTIONS:
            raise TpurankError(f"config: unknown collection {collection!r} in [collections]")
        # validate the override table against the schema now, not when first used
        base = to_dict(Config())
        base.pop("collections")
        where = f"collections.{collection}"
        check_pairs(build_checked(Config, merge_tables(base, over, where), where), where)
    return cfg


def canonical_collections(tables: dict[str, Any]) -> dict[str, Any]:
    """The per-collection tables in one order whatever the layers they were merged from: collections
    as COLLECTIONS lists them, keys as Config declares them (unknown ones last, for the check to name).

    Merging puts a key where the first layer that set it put it, so the same config resolved from other
    layers (`config show --toml` fed back with `--config`) would print its tables in another order."""
    order = {key: i for i, key in enumerate(config_fields())}

    def rank(dotted: str) -> int:
        return min(
            (i for key, i in order.items() if key == dotted or key.startswith(f"{dotted}.")),
            default=len(order),
        )

    def ordered(table: dict[str, Any], prefix: str) -> dict[str, Any]:
        keys = sorted(table, key=lambda k: rank(f"{prefix}{k}"))
        return {
            k: ordered(table[k], f"{prefix}{k}.") if isinstance(table[k], dict) else table[k] for k in keys
        }

    place = {c: i for i, c in enumerate(COLLECTIONS)}
    return {
        c: ordered(t, "") if isinstance(t, dict) else t
        for c, t in sorted(tables.items(), key=lambda item: place.get(item[0], len(place)))
    }


def check_pairs(cfg: Config, where: str) -> None:
    """The limits that tie two keys together (each key alone is checked by `value()`)."""
    at = f"{where}." if where else ""
    for section in ("gnn",):
        s = getattr(cfg, section)
        if s.hidden % s.heads:
            raise TpurankError(
                f"config: {at}{section}.heads ({s.heads}) must divide {at}{section}.hidden ({s.hidden}): "
                "each attention head takes an equal share of the width"
            )
    models = cfg.ensemble.models
    wrong = [m for m in models if m not in LEARNED_MODELS]
    if not models or wrong or len(set(models)) != len(models):
        raise TpurankError(
            f"config: {at}ensemble.models must list distinct models among {', '.join(LEARNED_MODELS)}"
            f" (the ensemble cannot be its own member), got {models!r}"
        )


def _tables(data: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(dotted prefix, table) of the top level of a config table and of each collection's table in it."""
    yield "", data
    tables = data.get("collections")
    for collection, table in (tables if isinstance(tables, dict) else {}).items():
        if isinstance(table, dict):
            yield f"collections.{collection}.", table


def old_names(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(old, new) dotted names of each key `data` sets under a name `RENAMED` replaced, at top level
    (`baseline.op_dim`) or in a collection's table (`collections.tile:xla.baseline.op_dim`)."""
    found = []
    for prefix, table in _tables(data):
        for old, new in RENAMED.items():
            section, key = old.split(".")
            if isinstance(table.get(section), dict) and key in table[section]:
                found.append((prefix + old, prefix + new))
    return found


def with_new_names(data: dict[str, Any]) -> dict[str, Any]:
    """A config table tpurank saved (a model's sidecar, a models dataset's config.toml) with each key
    `RENAMED` replaced under its new name: the models it describes trained with that setting, whatever
    it was called then. A user's own config with an old name is refused instead (core/config_files.py)."""
    out = copy.deepcopy(data)
    for _, table in _tables(out):
        for old, new in RENAMED.items():
            (section, key), (new_section, new_key) = old.split("."), new.split(".")
            if isinstance(table.get(section), dict) and key in table[section]:
                moved = table[section].pop(key)
                table.setdefault(new_section, {}).setdefault(new_key, moved)
    return out
