"""Every message names a tpurank command the way a user types it: `tpurank <stage> ...`, through
one helper (tpurank.core.errors.command), never as the Python module (`python -m tpurank`)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import ROOT
from source_reading import docstring_ids

from tpurank.core.errors import TpurankError, command
from tpurank.prepare.cache import INDEX_FILE

SRC = ROOT / "src" / "tpurank"
MODULE_SPELLING = "python -m tpurank"


def _strings(path: Path) -> list[tuple[int, str]]:
    """Every string literal of a module but its docstrings, f-strings' literal parts included."""
    tree = ast.parse(path.read_text())
    skip = docstring_ids(tree)
    return [
        (n.lineno, n.value)
        for n in ast.walk(tree)
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip
    ]


def test_no_message_names_the_python_module() -> None:
    found = [
        f"{f.relative_to(ROOT)}:{line}: {text[:80]!r}"
        for f in sorted(SRC.rglob("*.py"))
        for line, text in _strings(f)
        if MODULE_SPELLING in text
    ]
    assert found == []


def test_the_scan_sees_a_message_inside_an_f_string(tmp_path: Path) -> None:
    """The test above would find the old spelling where it stood: in an f-string's literal part."""
    f = tmp_path / "m.py"
    f.write_text(
        '"""Doc: python -m tpurank."""\nx = 1\nmsg = f"{x}: run `python -m tpurank prepare` first"\n'
    )
    assert [(line, MODULE_SPELLING in text) for line, text in _strings(f)] == [(3, True)]


def test_a_missing_prerequisite_names_the_command_as_typed(tmp_path: Path) -> None:
    from tpurank.prepare.cache import read_index

    assert command("predict --split test") == "`tpurank predict --split test`"
    with pytest.raises(TpurankError) as raised:
        read_index(tmp_path)
    assert str(raised.value) == f"{tmp_path / INDEX_FILE}: no prepared index; run `tpurank prepare` first"
