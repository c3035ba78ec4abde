"""The `--help` of scripts, run once per session for every worker and test file: the bench scripts
all at once (tests/project/test_bench_scripts.py), any script with its subcommand (test_docs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import BENCH, BENCH_ROOMS, ROOT, built_once
from runners import script_helps


def bench_helps(factory: pytest.TempPathFactory) -> dict[str, list]:
    """`--help` of every file in bench/'s rooms (an import for a helper module, with bench/lib on
    sys.path as its importers put it), run once per session for every worker and test file, in the
    worker that comes first (runners.script_helps): {"bench/ROOM/x.py": [exit, stdout]}."""
    files = sorted(p for room in BENCH_ROOMS for p in (BENCH / room).glob("*.py"))
    scripts = [str(p.relative_to(ROOT)) for p in files]
    entry = [str(p.relative_to(ROOT)) for p in files if "__main__" in p.read_text()]
    modules = [s for s in scripts if s not in entry]

    def run(folder: Path) -> None:
        helps = script_helps(ROOT, entry) | script_helps(ROOT, modules, path=(BENCH / "lib",))
        (folder / "helps.json").write_text(json.dumps(helps))

    return json.loads((built_once(factory, "bench-helps", scripts, run) / "helps.json").read_text())


def script_help(factory: pytest.TempPathFactory, script: str | Path, *sub: str) -> str:
    """`python SCRIPT [SUB] --help` (SCRIPT relative to the checkout, or absolute below it), run once
    per session for every worker and test file (runners.script_helps). Asserts it exits 0."""
    rel = Path(script).resolve().relative_to(ROOT) if Path(script).is_absolute() else Path(script)
    if not sub and rel.parts[0] == "bench":  # all of bench/ at once
        code, text = bench_helps(factory)[str(rel)]
        assert code == 0, f"{rel} --help: {code}"
        return text

    def run(folder: Path) -> None:
        code, text = script_helps(ROOT, [str(rel)], *sub)[str(rel)]
        assert code == 0, f"{rel} {' '.join(sub)} --help: {code}"
        (folder / "help.txt").write_text(text)

    return (built_once(factory, "help", [str(rel), *sub], run) / "help.txt").read_text()
