"""bench/'s rooms (bench/README.md, "Rooms"): the scripts a user runs in runs/, the figures' renderer
in figures/, the modules both import in lib/. A .py file directly under bench/ (or in a folder that
is no room) fails here, as does a script that finds its helpers another way than the README's (the
checkout two folders up, bench/lib put on sys.path before its first helper is imported), a helper
that imports a script or a renderer, and a module nothing imports. Read from the source with ast;
that every script of runs/ answers --help is test_bench_scripts.py's."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import BENCH, BENCH_ROOMS, import_statements

ROOMS = {room: sorted((BENCH / room).glob("*.py")) for room in BENCH_ROOMS}
NAMES = {room: {p.stem for p in files} for room, files in ROOMS.items()}
ENTRY = [*ROOMS["runs"], BENCH / "figures" / "figures.py"]  # what a user runs
ROOT_LINE = "ROOT = Path(__file__).resolve().parents[2]"
LIB_LINE = "sys.path.insert(0, str(ROOT / 'bench' / 'lib'))"  # as ast.unparse writes it


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def _imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, top-level module name) of every import statement, those inside functions too."""
    out = []
    for node in import_statements(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name.split(".")[0]) for a in node.names]
        elif node.module and not node.level:
            out.append((node.lineno, node.module.split(".")[0]))
    return out


def test_every_python_file_is_in_a_room() -> None:
    outside = [
        str(p.relative_to(BENCH))
        for p in sorted(BENCH.rglob("*.py"))
        if p.parent.relative_to(BENCH).as_posix() not in BENCH_ROOMS
    ]
    assert outside == [], f"put each in runs/, figures/ or lib/ (bench/README.md, 'Rooms'): {outside}"
    assert all(ROOMS.values()), ROOMS


def test_a_name_is_in_one_room() -> None:
    """The rooms share one sys.path: a name in two rooms would import whichever comes first."""
    seen = [name for names in NAMES.values() for name in names]
    assert len(seen) == len(set(seen)), sorted(n for n in seen if seen.count(n) > 1)


@pytest.mark.parametrize("script", ENTRY, ids=[p.stem for p in ENTRY])
def test_a_script_puts_bench_lib_on_sys_path_before_its_helpers(script: Path) -> None:
    """A script runs as `.venv/bin/python bench/ROOM/SCRIPT.py` from the checkout: Python puts its
    own room first on sys.path, and the script puts bench/lib there itself, before any import of it."""
    tree = _tree(script)
    lines = {ast.unparse(node): node.lineno for node in tree.body if isinstance(node, ast.Assign | ast.Expr)}
    assert ROOT_LINE in lines and LIB_LINE in lines, f"{script.name}: no `{ROOT_LINE}` then `{LIB_LINE}`"
    helpers = [line for line, name in _imports(tree) if name in NAMES["lib"]]
    assert lines[ROOT_LINE] < lines[LIB_LINE] < min(helpers, default=lines[LIB_LINE] + 1), script.name


@pytest.mark.parametrize("path", sorted(BENCH.rglob("*.py")), ids=lambda p: p.stem)
def test_the_checkout_is_two_folders_up(path: Path) -> None:
    """bench/ROOM/x.py: every `Path(__file__)...parents[N]` names the checkout, N == 2."""
    for node in ast.walk(_tree(path)):
        if (
            isinstance(node, ast.Subscript)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "parents"
            and "__file__" in ast.unparse(node.value)
        ):
            assert ast.unparse(node.slice) == "2", f"{path.name}:{node.lineno} {ast.unparse(node)}"


def test_helpers_and_renderers_import_no_script() -> None:
    """lib/ is imported by the rest and imports neither a script nor a renderer; a renderer reads
    results and runs no benchmark."""
    wrong = [
        f"{path.relative_to(BENCH)}:{line} imports {name}"
        for room, forbidden in (("lib", NAMES["runs"] | NAMES["figures"]), ("figures", NAMES["runs"]))
        for path in ROOMS[room]
        for line, name in _imports(_tree(path))
        if name in forbidden
    ]
    assert wrong == []


def test_every_module_of_lib_and_figures_is_imported() -> None:
    """A module of lib/ or figures/ (but the figures' entry point) that nothing in bench/ imports is
    dead code or a script in the wrong room."""
    imported = {
        name for path in BENCH.rglob("*.py") for _, name in _imports(_tree(path)) if name != path.stem
    }
    unused = sorted((NAMES["lib"] | NAMES["figures"]) - {"figures"} - imported)
    assert unused == []
