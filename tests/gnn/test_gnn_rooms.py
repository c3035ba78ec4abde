"""The rooms of the GNN package (docs/architecture.md, "The GNN package"): every import inside
tpurank.gnn points to a lower room, so the networks stay on the ground floor and an arrow back up
fails here. Read from the source with ast (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import import_statements

GNN = Path(__file__).resolve().parents[2] / "src" / "tpurank" / "gnn"

# bottom to top; a room is a subpackage or a module of tpurank.gnn. Rooms on one floor do not
# import each other.
FLOORS: list[tuple[str, ...]] = [
    ("nets",),
    ("data", "device", "recipe"),
    ("gst",),
    ("scoring",),
    ("training",),
    ("predict",),
    ("seeds", "families"),
    ("entry",),
]
FLOOR = {room: i for i, rooms in enumerate(FLOORS) for room in rooms}


def _room(module: str) -> str | None:
    """The room of a tpurank.gnn module (its first component below tpurank.gnn); None for the
    package itself or a module outside it."""
    parts = module.split(".")
    return parts[2] if parts[:2] == ["tpurank", "gnn"] and len(parts) > 2 else None


def _targets(node: ast.AST) -> list[str]:
    """The tpurank modules one import statement names (`from tpurank.gnn import gst` names the
    module tpurank.gnn.gst)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("tpurank")]
    if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tpurank"):
        subs = [f"{node.module}.{a.name}" for a in node.names]
        return [s if _room(s) and _room(node.module) is None else node.module for s in subs]
    return []


def _imports() -> dict[str, set[str]]:
    """tpurank.gnn module -> the tpurank modules it imports."""
    out: dict[str, set[str]] = {}
    for f in sorted(GNN.rglob("*.py")):
        parts = f.relative_to(GNN.parents[1]).with_suffix("").parts
        module = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        tree = ast.parse(f.read_text(), str(f))
        out[module] = {t for node in import_statements(tree) for t in _targets(node)} - {module}
    return out


IMPORTS = _imports()


def test_every_module_is_in_a_room() -> None:
    rooms = {_room(m) for m in IMPORTS} - {None}
    assert rooms == set(FLOOR), f"rooms without a floor: {sorted(rooms - set(FLOOR))}"


@pytest.mark.parametrize("module", sorted(m for m in IMPORTS if _room(m)))
def test_imports_point_down(module: str) -> None:
    here = _room(module)
    for target in sorted(IMPORTS[module]):
        there = _room(target)
        if target == "tpurank.gnn":
            pytest.fail(f"{module} imports the package tpurank.gnn itself")
        if there is None or there == here:
            continue
        assert FLOOR[there] < FLOOR[here], f"{module} imports {target}: {there} is not below {here}"


def test_the_package_files_only_describe_their_rooms() -> None:
    """Each __init__.py is a docstring: nothing imported, so importing one room loads no other."""
    for f in GNN.rglob("__init__.py"):
        body = ast.parse(f.read_text()).body
        assert len(body) == 1 and isinstance(body[0], ast.Expr), f"{f}: more than a docstring"
        assert isinstance(body[0].value, ast.Constant) and len(body[0].value.value) > 40, f


def test_a_family_declares_a_spec_and_nothing_else() -> None:
    """A model family module holds one `ModelSpec` subclass and its instance `SPEC` (its network and
    recipe are the class's methods); training and prediction are shared (entry.py)."""
    families = sorted((GNN / "families").glob("[!_]*.py"))
    assert len(families) >= 2
    for f in families:
        tree = ast.parse(f.read_text())
        names = {
            t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        classes = [n for n in tree.body if isinstance(n, ast.ClassDef)]
        assert "SPEC" in names, f
        assert len(classes) == 1 and ast.unparse(classes[0].bases[0]).startswith("ModelSpec["), f
        assert not functions & {"train", "predict", "model_args"}, f
