"""`tpurank config show [--config F] [--set K=V ...] [--toml]`: the resolved config.

Every key of `Config` with its value, its default and each collection's override (the defaults of
`core/config.py`, then the presets, then `--config`, then `--set`: what a stage would run with).
`--toml` prints it as a file that `--config` reads back to the same config.
"""

from __future__ import annotations

import argparse
from typing import Any

from tpurank.core.config import Config, to_dict
from tpurank.core.toml_write import to_toml as write_toml


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


def table(cfg: Config) -> str:
    """A readable table; `*` marks a value that differs from the default."""
    out = [f"{'key':<34} {'value':<22} {'default':<22} per-collection override"]
    for key, v, d, per in rows(cfg):
        mark = "*" if v != d else " "
        over = "; ".join(f"{c}: {x!r}" for c, x in per.items())
        out.append(f"{key:<34}{mark}{v!r:<22} {d!r:<22} {over}".rstrip())
    return "\n".join(out)


def run(args: argparse.Namespace) -> int:
    print(to_toml(args.cfg) if args.toml else table(args.cfg), end="" if args.toml else "\n")
    return 0
