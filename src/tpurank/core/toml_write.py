"""Config dicts written as TOML that `load_config` reads back to the same config (tomllib only
reads): what `build-models-dataset` packs and what `config show --toml` prints."""

from __future__ import annotations

import json
from typing import Any

from tpurank.core.errors import TpurankError


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    raise TpurankError(f"config value {v!r} cannot be written as TOML")


def _toml_key(k: str) -> str:
    return k if k.replace("_", "").replace("-", "").isalnum() else json.dumps(k)


def to_toml(data: dict[str, Any], prefix: str = "") -> str:
    """A config dict (to_dict) as TOML that load_config reads back to the same config."""
    scalars = [f"{_toml_key(k)} = {_toml_value(v)}" for k, v in data.items() if not isinstance(v, dict)]
    out = []
    if scalars:
        out.append((f"[{prefix}]\n" if prefix else "") + "\n".join(scalars) + "\n")
    for k, v in data.items():
        if isinstance(v, dict):
            out.append(to_toml(v, f"{prefix}.{_toml_key(k)}" if prefix else _toml_key(k)))
    return "\n".join(s for s in out if s)
