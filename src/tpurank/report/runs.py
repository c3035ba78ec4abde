"""`tpurank runs [OUT ...]`: runs side by side, one column per out folder (default: --out-dir).

What differs in their configs, each model's validation score per collection, each trained model's
minutes, and the commit and data they came from, all read from the files the runs left: the
provenance sidecars (`submissions/valid_<model>.json`, `models/*/*/model.json` and
`provenance.json`). Only the config keys that differ between the runs are listed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from tpurank.core.collections import COLLECTIONS
from tpurank.core.errors import TpurankError
from tpurank.report.config_show import flat


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("outs", nargs="*", type=Path, metavar="OUT", help="out folders (default: --out-dir)")


def _json(f: Path) -> dict[str, Any]:
    try:
        rec = json.loads(f.read_text())
    except (OSError, ValueError):
        return {}
    return rec if isinstance(rec, dict) else {}


def read_run(out: Path) -> dict[str, Any]:
    """What one out folder tells: config (flat), scores, training minutes, commit, data.

    Raises:
        TpurankError: when the folder holds no validation results or trained models.
    """
    sides = sorted((out / "submissions").glob("valid_*.json"))
    models = sorted(
        f for f in (out / "models").glob("*/*/*.json") if f.name in ("model.json", "provenance.json")
    )
    if not sides and not models:
        raise TpurankError(f"{out}: no run here (no submissions/valid_*.json, no trained model)")
    run: dict[str, Any] = {"config": {}, "scores": {}, "minutes": {}, "commit": "?", "data": "?"}
    for f in [*sides, *models]:
        rec = _json(f)
        if rec.get("config") and not run["config"]:
            run.update(
                config=flat(rec["config"]),
                commit=rec.get("git_commit", "?"),
                data=rec.get("data_fingerprint", "?"),
            )
    for f in sides:
        scores = _json(f).get("scores") or {}
        model = f.stem.removeprefix("valid_")
        for c in [*COLLECTIONS, "overall"]:
            if isinstance(scores.get(c), int | float):
                run["scores"][f"{model} {c.removeprefix('layout:')}"] = scores[c]
    for f in models:
        rec = _json(f)
        if isinstance(rec.get("seconds"), int | float):
            run["minutes"][f"{f.parent.parent.name} {f.parent.name}"] = rec["seconds"] / 60
    return run


def _fmt(v: Any) -> str:
    return f"{v:.4f}" if isinstance(v, float) else str(v)


def labels(outs: list[Path]) -> list[str]:
    """Column names: each run folder's name, or as many of its last path parts as tell the runs apart
    (`early-stop/seed-0` beside `features/seed-0`)."""
    parts = [Path(o).resolve().parts for o in outs]
    for n in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-n:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(o) for o in outs]  # the same folder twice


def table(outs: list[Path], runs: list[dict[str, Any]]) -> str:
    """The side-by-side table (one column per run)."""
    names = labels(outs)
    width = max(14, *(len(n) for n in names))
    lines = [f"{'':<34}" + "".join(f"{n:>{width + 2}}" for n in names)]

    def section(title: str, keys: list[str], get: Any) -> None:
        if keys:
            lines.append(f"-- {title}")
            for k in keys:
                lines.append(f"{k:<34}" + "".join(f"{_fmt(get(r, k)):>{width + 2}}" for r in runs))

    keys = sorted({k for r in runs for k in r["config"]})
    differ = [k for k in keys if len({json.dumps(r["config"].get(k), default=str) for r in runs}) > 1]
    section("config (keys that differ)", differ, lambda r, k: r["config"].get(k, "-"))
    section(
        "valid score", sorted({k for r in runs for k in r["scores"]}), lambda r, k: r["scores"].get(k, "-")
    )
    section(
        "training minutes",
        sorted({k for r in runs for k in r["minutes"]}),
        lambda r, k: r["minutes"].get(k, "-"),
    )
    section("source", ["commit", "data"], lambda r, k: str(r[k])[:12])
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    outs = [Path(o) for o in args.outs] or [args.paths.out]
    print(table(outs, [read_run(o) for o in outs]))
    return 0
