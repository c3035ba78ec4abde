"""A run's config from its files: TOML files, `--set` strings, and the layers they make.

The layers, lowest first: a profile (configs/profile-<name>.toml), a preset (configs/demo.toml on small
synthetic data), the user's `--config` file, then `--set`. Each goes over the ones below key by key
(core/config.py validates the result); `config show` names the layer each value came from. Each layer's
keys are checked as it is read, so that a key the config lacks (or names no more) is an error naming
the file, or `--set`, that sets it.
"""

from __future__ import annotations

import copy
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tpurank.core.config import Config
from tpurank.core.config_build import from_dict, old_names, with_new_names
from tpurank.core.config_schema import merge_tables, unknown_key
from tpurank.core.errors import TpurankError


def _parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text  # a bare string


def apply_overrides(data: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Apply `section.key=value` strings (TOML values; bare words are strings)."""
    for item in overrides:
        if "=" not in item:
            raise TpurankError(f"config: override {item!r} must look like section.key=value")
        dotted, text = item.split("=", 1)
        keys = [k.strip('"') for k in re.findall(r'"[^"]*"|[^.]+', dotted.strip())]
        node = data
        for k in keys[:-1]:
            node = node.setdefault(k, {})
            if not isinstance(node, dict):
                raise TpurankError(f"config: {dotted} does not name a key inside a table")
        node[keys[-1]] = _parse_value(text.strip())
    return data


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML config file as a table; every way it can fail is a one-line error naming the file."""
    path = Path(path)
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TpurankError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise TpurankError(f"{path}: is a folder, not a TOML config file") from None
    except OSError as e:
        raise TpurankError(f"{path}: cannot read the config file ({e.strerror or e})") from None
    except UnicodeDecodeError as e:
        raise TpurankError(f"{path}: not UTF-8 text at byte {e.start} (a TOML file is UTF-8)") from None
    except tomllib.TOMLDecodeError as e:
        raise TpurankError(f"{path}: not valid TOML ({e})") from None


@dataclass(frozen=True)
class Layer:
    """One source of config values, in the order they apply (each above the ones before it).

    Args:
        source: what `config show` names as the source of its keys: "profile cpu", "preset demo.toml",
            "file my.toml" or "--set".
        data: its table, as read (not yet validated).
    """

    source: str
    data: dict[str, Any]


def checked_keys(data: dict[str, Any], where: str) -> dict[str, Any]:
    """`data` (one layer's table) when the config has every key it sets, else a one-line error naming
    `where` (the file, or `--set`): a renamed key with its new name, any other unknown key with the
    keys its table knows. Types and ranges are checked once the layers merge (`from_dict`)."""
    if found := old_names(data):
        old, new = found[0]
        raise TpurankError(
            f"{where}: {old} is now {new} (renamed, the same setting): write {new.rsplit('.', 1)[1]}"
        )
    message = unknown_key(Config, data, "")
    tables = data.get("collections")
    for collection, table in (tables if isinstance(tables, dict) else {}).items():
        if message is None and isinstance(table, dict):
            message = unknown_key(Config, table, f"collections.{collection}")
    if message is not None:
        raise TpurankError(f"{where}: {message}")
    return data


def config_layers(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    preset: str | Path | None = None,
    profile: str | Path | None = None,
    saved: bool = False,
) -> list[Layer]:
    """The layers of a run's config, lowest first: profile, preset, the user's file, `--set`.

    Args:
        path: the user's TOML file (`--config`).
        overrides: `section.key=value` strings (`--set`), applied last.
        preset: a TOML file applied under `path` (what `all` uses on small synthetic data).
        profile: a profile file (configs/profile-<name>.toml), right above the defaults.
        saved: `path` is a config tpurank wrote (a models dataset's config.toml): a key renamed
            since reads under its new name instead of being refused.
    """
    layers = []
    if profile is not None:
        data = checked_keys(read_toml(profile), str(profile))
        layers.append(Layer(f"profile {data.get('profile', Path(profile).stem)}", data))
    if preset is not None:
        layers.append(Layer(f"preset {Path(preset).name}", checked_keys(read_toml(preset), str(preset))))
    if path is not None:
        data = with_new_names(read_toml(path)) if saved else read_toml(path)
        layers.append(Layer(f"file {path}", checked_keys(data, str(path))))
    if overrides:
        layers.append(Layer("--set", checked_keys(apply_overrides({}, overrides), "--set")))
    return layers


def from_layers(layers: list[Layer]) -> Config:
    """The validated config of `layers` (config_layers) merged key by key over the defaults."""
    data: dict[str, Any] = {}
    for layer in layers:
        data = merge_tables(_without_keys_set_in(data, layer.data), layer.data, "")
    return from_dict(data)


def _without_keys_set_in(data: dict[str, Any], upper: dict[str, Any]) -> dict[str, Any]:
    """`data` without the per-collection values of the keys `upper` sets at top level: a key set at top
    level by a higher layer (`--set gnn.eval_every=0`) applies to every collection, as it does over the
    per-collection defaults (core/collection_defaults.py)."""
    tables = data.get("collections")
    if not isinstance(tables, dict):
        return data
    out = copy.deepcopy(data)
    for sections in out["collections"].values():
        for section, keys in (sections if isinstance(sections, dict) else {}).items():
            top = upper.get(section)
            if isinstance(top, dict) and isinstance(keys, dict):
                sections[section] = {k: v for k, v in keys.items() if k not in top}
    return out


def load_config(
    path: str | Path | None = None,
    overrides: list[str] | None = None,
    preset: str | Path | None = None,
    profile: str | Path | None = None,
    saved: bool = False,
) -> Config:
    """Defaults, then a profile, then a preset (e.g. configs/demo.toml), then the TOML file, then `--set`.

    Args:
        path: the user's TOML file (`--config`).
        overrides: `section.key=value` strings (`--set`), applied last.
        preset: a TOML file applied under `path`, key by key (what `all` uses on small data).
        profile: a profile file (configs/profile-<name>.toml), right above the defaults.
        saved: `path` is a config tpurank wrote (`config_layers`).
    """
    return from_layers(config_layers(path, overrides, preset, profile, saved))
