"""The size rules of the code, read by a reviewer and kept here: no module over 400 lines and no
function over 60 in the package, the benchmarks and the tests, and no comment that turns the formatter off
anywhere (hand-packed lines hide a function's real length from the rule, and from the reader)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT

MAX_MODULE_LINES = 400  # past it a module holds two ideas: split it along its own seams
MAX_FUNCTION_LINES = 60  # a function a reader takes in at once
CHECKED = [ROOT / "src" / "tpurank", ROOT / "bench", ROOT / "tests"]
GENERATED = "_pb2.py"  # protoc's output
# the spellings ruff and black accept, and yapf's; spelled apart so this file does not hold them
ESCAPES = tuple("fmt" + s for s in (": skip", ":skip", ": off", ":off")) + ("yapf" + ": disable",)


def _sources(folders: list[Path]) -> list[Path]:
    return sorted(f for d in folders for f in d.rglob("*.py") if not f.name.endswith(GENERATED))


@pytest.mark.parametrize("folder", CHECKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_no_long_module_or_function(folder: Path) -> None:
    long = []
    for f in _sources([folder]):
        text = f.read_text()
        if (n := text.count("\n")) > MAX_MODULE_LINES:
            long.append(f"{f.relative_to(ROOT)}: {n} lines")
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            if (n := node.end_lineno - node.lineno + 1) > MAX_FUNCTION_LINES:
                long.append(f"{f.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert long == []


def test_no_formatter_escapes() -> None:
    folders = [*CHECKED, ROOT / "notebooks"]
    files = [*_sources(folders), *sorted((ROOT / "notebooks").rglob("*.ipynb"))]
    found = [
        f"{f.relative_to(ROOT)}:{i}"
        for f in files
        for i, line in enumerate(f.read_text().splitlines(), 1)
        if any(escape in line for escape in ESCAPES)
    ]
    assert found == []
    assert len(files) > 150  # the folders were found
