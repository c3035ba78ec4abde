"""`tpurank config show [--profile P] [--config F] [--set K=V ...] [--toml]`: the resolved config.

Every key of `Config` with its value, its default, where the value came from and why the key
exists (its `value(doc=...)`), then each collection's own value beneath it: what a stage would run
with. `--toml` prints it as a file that `--config` reads back to the same config.

The same docs make the key table of docs/configuration.md (`markdown_keys`), so the reference there never
drifts from the code: tests/report/test_config_show.py fails, saying how to rewrite it, when it does.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tpurank.core.atomic import write_text
from tpurank.core.collection_defaults import DEFAULT_COLLECTIONS
from tpurank.core.config import Config, config_fields, to_dict
from tpurank.core.config_files import Layer
from tpurank.core.errors import TpurankError
from tpurank.core.toml_write import to_toml as write_toml

DEFAULT = "default"
COLLECTION_DEFAULT = "per-collection default"
MARKS = "*: differs from the default; indented: a collection's own value"
SOURCES = "source: the last layer that sets the key (profile < preset < --config < --set)"
DOCS_START, DOCS_END = "<!-- config-keys:start -->", "<!-- config-keys:end -->"
REGENERATE = (
    ".venv/bin/python -c 'from tpurank.report.config_show import write_key_table; "
    'write_key_table("docs/configuration.md")\''
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["show"], help="show: print the resolved config")
    p.add_argument("--toml", action="store_true", help="print a TOML file that --config reads back")


def flat(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"gnn": {"lr": 1e-3}}` -> `{"gnn.lr": 1e-3}` (lists stay values)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        out.update(flat(v, f"{key}.") if isinstance(v, dict) else {key: v})
    return out


def to_toml(cfg: Config) -> str:
    """The whole config as TOML, per-collection overrides as `[collections."<c>".<section>]` tables."""
    return write_toml(to_dict(cfg))


def rows(cfg: Config) -> list[tuple[str, Any, Any, dict[str, Any]]]:
    """(key, value, default, {collection: its override}) for every key of Config."""
    cur, default = to_dict(cfg), to_dict(Config())
    over = {c: flat(o) for c, o in cur.pop("collections").items()}
    default.pop("collections")
    base = flat(default)
    return [(k, v, base[k], {c: o[k] for c, o in over.items() if k in o}) for k, v in flat(cur).items()]


_UNSET = object()


def _at(data: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    """The value a (not yet validated) config table sets at `path`, or `_UNSET`."""
    node: Any = data
    for part in path:
        if not isinstance(node, Mapping) or part not in node:
            return _UNSET
        node = node[part]
    return node


def source(key: str, layers: list[Layer], collection: str | None = None) -> str:
    """Where the value of `key` ("gnn.lr") comes from: the last layer that sets it, else the
    per-collection defaults (core/collection_defaults.py) for a collection's value, else "default".

    Args:
        key: a dotted key of Config.
        layers: the run's layers, lowest first (core/config.py config_layers).
        collection: the collection whose own value is meant (`collections."<c>".<key>`), or None.
    """
    path = tuple(key.split("."))
    if collection is not None:
        path = ("collections", collection, *path)
    for layer in reversed(layers):
        if _at(layer.data, path) is not _UNSET:
            return layer.source
    if collection is not None and _at(DEFAULT_COLLECTIONS, path[1:]) is not _UNSET:
        return COLLECTION_DEFAULT
    return DEFAULT


def _cut(text: str, width: int | None) -> str:
    if width is None or len(text) <= width:
        return text
    return text[: max(width - 3, 0)] + "..."


def table(cfg: Config, layers: list[Layer] | None = None, width: int | None = None) -> str:
    """A readable table, a legend below it; `*` marks a value that differs from the default.

    Args:
        cfg: the resolved config.
        layers: the layers it was resolved from, for the source column (None: no source column).
        width: cut each description so a line fits this many characters (None: whole descriptions).
    """
    docs = {k: f.metadata.get("doc", "") for k, f in config_fields().items()}
    lines: list[tuple[str, str, str, str, str]] = []  # key, value (marked), default, source, description
    for key, v, d, per in rows(cfg):
        lines.append((key, f"{'*' if v != d else ' '}{v!r}", repr(d), _src(key, layers, None), docs[key]))
        for c, x in per.items():
            lines.append((f"  {c}", f"{'*' if x != d else ' '}{x!r}", "", _src(key, layers, c), ""))
    head = ("key", " value", "default", "source" if layers is not None else "", "description")
    cols = [max(len(r[i]) for r in [head, *lines]) for i in range(4)]
    cols[1], cols[2] = min(cols[1], 24), min(cols[2], 24)  # a long list overflows its cell, not the table
    used = sum(cols) + len(cols)
    out = []
    for row in [head, *lines]:
        cells = [row[i].ljust(cols[i]) for i in range(4) if i != 3 or layers is not None]
        desc = _cut(row[4], None if width is None else max(width - used, 20))
        out.append(" ".join([*cells, desc]).rstrip())
    out.append(MARKS if layers is None else f"{MARKS}; {SOURCES}")
    return "\n".join(out)


def _src(key: str, layers: list[Layer] | None, collection: str | None) -> str:
    return "" if layers is None else source(key, layers, collection)


def _toml(v: Any) -> str:
    """A default as it is written in a config file (JSON's spelling is TOML's for these types)."""
    return json.dumps(v)


def _allowed(meta: Mapping[str, Any], default: Any) -> str:
    """The range or choices `value()` declared, e.g. `>= 0`, `0 to 1`, `"sum", "mean"`."""
    if "choices" in meta:
        return ", ".join(f"`{_toml(c)}`" for c in meta["choices"])
    if isinstance(default, bool):
        return "`true`, `false`"
    lo, hi = meta.get("min"), meta.get("max")
    if lo is not None and hi is not None:
        return f"{lo:g} to {hi:g}"
    signs = ((">=", lo), (">", meta.get("above")), ("<=", hi), ("<", meta.get("below")))
    return ", ".join(f"{sign} {b:g}" for sign, b in signs if b is not None) or (
        "a list" if isinstance(default, list) else ""
    )


def _collection_defaults(key: str) -> str:
    """How the per-collection defaults change `key`'s default, e.g. `; by collection 11500 to 52000`."""
    path = tuple(key.split("."))
    found = {c: _at(sections, path) for c, sections in DEFAULT_COLLECTIONS.items()}
    found = {c: v for c, v in found.items() if v is not _UNSET}
    values: list[Any] = []  # distinct, in collection order (a list default would not hash)
    for v in found.values():
        values += [] if v in values else [v]
    if not values:
        return ""
    if len(values) > 2 and all(isinstance(v, int | float) for v in values):
        return f"; by collection {min(values):g} to {max(values):g}"
    return "; " + "; ".join(
        f"`{_toml(v)}` on {', '.join(c for c, x in found.items() if x == v)}" for v in values
    )


def markdown_keys() -> str:
    """The key table of docs/configuration.md: every key, its default, its range or choices and its doc."""
    out = ["| key | default | range or choices | what it does |", "|---|---|---|---|"]
    defaults = flat({k: v for k, v in to_dict(Config()).items() if k != "collections"})
    for key, f in config_fields().items():
        doc = f.metadata.get("doc", "").replace("|", "\\|")
        if key == "collections":
            out.append(
                f'| `collections."<collection>".<key>` | per-collection defaults | any key above | {doc} |'
            )
            continue
        d = defaults[key]
        out.append(
            f"| `{key}` | `{_toml(d)}`{_collection_defaults(key)} | {_allowed(f.metadata, d)} | {doc} |"
        )
    return "\n".join(out) + "\n"


def with_key_table(text: str, where: str) -> str:
    """`text` (a Markdown page) with the block between the config-keys markers replaced by `markdown_keys()`."""
    start, end = text.find(DOCS_START), text.find(DOCS_END)
    if start < 0 or end < start:
        raise TpurankError(f"{where}: no {DOCS_START} ... {DOCS_END} block to hold the config key table")
    return text[: start + len(DOCS_START)] + "\n" + markdown_keys() + text[end:]


def write_key_table(path: str | Path) -> None:
    """Rewrite the key table in the page at `path` (docs/configuration.md) from core/config.py."""
    path = Path(path)
    write_text(path, with_key_table(path.read_text(encoding="utf-8"), str(path)))


def run(args: argparse.Namespace) -> int:
    if args.toml:
        print(to_toml(args.cfg), end="")
        return 0
    width = shutil.get_terminal_size().columns if sys.stdout.isatty() else None
    print(table(args.cfg, getattr(args, "layers", None), width))
    return 0
