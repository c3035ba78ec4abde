"""The prepare settings a cache was built with, held against a run's: a stage run alone never reads a
cache that `prepare` would build differently today."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tpurank.core.config import Config, to_dict
from tpurank.core.errors import TpurankError, command

PROVENANCE_FILE = "provenance.json"  # beside the cache: what `prepare` built it with (prepare/stage.py)


def _prepare_settings(config: dict[str, Any], collection: str | None) -> dict[str, Any]:
    """The prepare keys that decide what a cache holds, from a config dict, with the collection's
    overrides applied (None: none); `prepare.jobs` changes only how fast it is built."""
    over = config["collections"].get(collection, {}).get("prepare", {}) if collection else {}
    return {k: v for k, v in {**config["prepare"], **over}.items() if k != "jobs"}


def check_prepared(prepared: Path, cfg: Config, collections: list[str] | None) -> None:
    """Stop a stage run alone that would read a prepared cache built with other prepare settings.

    `prepare` records the config it built the cache with (its provenance.json); `all` reruns it
    when they differ, but `train --set prepare.hops=2` alone would silently read the old cache.

    Args:
        prepared: the cache folder.
        cfg: the run's config.
        collections: the collections the stage reads (None: every one the cache holds).

    Raises:
        TpurankError: the first setting that differs, in one line, with the command that fixes it.
    """
    try:
        built = json.loads((prepared / PROVENANCE_FILE).read_text())
        config = built["config"]
        had = {c: _prepare_settings(config, c) for c in built["collections"]}
        had_base = _prepare_settings(config, None)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return  # no cache yet, or no record of one: the stage names what is missing
    now = to_dict(cfg)
    for c in collections or sorted(had):
        has = _prepare_settings(now, c)
        for key in sorted(has.keys() & had.get(c, {}).keys()):
            if has[key] != had[c][key]:
                where = "" if had_base.get(key) != _prepare_settings(now, None)[key] else f" for {c}"
                raise TpurankError(
                    f"{prepared} was built with prepare.{key}={json.dumps(had[c][key])} but "
                    f"this run has {json.dumps(has[key])}{where}: rerun {command('prepare')} with this "
                    f"setting (or {command('all')})"
                )
