"""The package's layers (docs/architecture.md): every import points down, and no two modules import
each other, directly or in a circle. Read from the source (imports inside functions count too),
so a new arrow back up fails here before anyone has to draw the picture again."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from helpers import import_statements

SRC = Path(__file__).resolve().parents[2] / "src" / "tpurank"

# bottom to top; a module may import its own package and any lower layer. Packages in one layer
# (the two learned rankers) do not import each other.
LAYERS: list[tuple[str, ...]] = [
    ("core",),
    ("data",),
    ("pb",),
    ("synth",),
    ("prepare",),
    ("features",),
    ("submission",),
    ("lgbm", "gnn"),
    ("models",),
    ("report",),
    ("train", "predict", "validate"),
    ("run",),
    ("kaggle",),
    ("rank",),
    ("tune",),
    ("cli",),
    ("__main__",),
]
RANK = {room: i for i, rooms in enumerate(LAYERS) for room in rooms}


def _module(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _room(module: str) -> str | None:
    """The layer name of a tpurank module (its first component below tpurank), None for the root."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _imports() -> dict[str, set[str]]:
    """tpurank module -> the tpurank modules it imports (module level and inside functions)."""
    out: dict[str, set[str]] = {}
    for f in sorted(SRC.rglob("*.py")):
        if f.name.endswith("_pb2.py"):
            continue
        mod = _module(f)
        found: set[str] = set()
        for node in import_statements(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tpurank"):
                for alias in node.names:  # `from tpurank.gnn import gst` imports tpurank.gnn.gst
                    sub = f"{node.module}.{alias.name}"
                    found.add(
                        sub
                        if (SRC.parent / Path(*sub.split("."))).with_suffix(".py").exists()
                        else node.module
                    )
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name.startswith("tpurank"))
        out[mod] = {m for m in found if m != mod}
    return out


IMPORTS = _imports()


def test_every_module_belongs_to_a_layer() -> None:
    rooms = {_room(m) for m in IMPORTS} - {None}
    assert rooms <= set(RANK), f"modules outside every layer: {sorted(rooms - set(RANK))}"
    assert len(IMPORTS) > 60


@pytest.mark.parametrize("module", sorted(IMPORTS))
def test_imports_point_down(module: str) -> None:
    here = _room(module)
    if here is None:  # tpurank/__init__.py: the version only
        assert not IMPORTS[module]
        return
    for target in sorted(IMPORTS[module]):
        there = _room(target)
        if there is None or there == here:
            continue
        assert RANK[there] < RANK[here], f"{module} imports {target}: {there} is not below {here}"


def test_no_circles() -> None:
    """Depth-first search for a module that can reach itself (a circle of imports)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done

    def visit(m: str, path: list[str]) -> None:
        state[m] = 1
        for t in sorted(IMPORTS.get(m, ())):
            if t not in IMPORTS:
                continue
            if state.get(t) == 1:
                circle = path[path.index(t) :] + [t] if t in path else [m, t]
                pytest.fail("circle of imports: " + " -> ".join(circle))
            if state.get(t) is None:
                visit(t, [*path, t])
        state[m] = 2

    for m in sorted(IMPORTS):
        if m not in state:
            visit(m, [m])


def test_the_generator_stands_below_every_model() -> None:
    models = ("lgbm", "gnn", "models", "features", "prepare")
    for module, targets in IMPORTS.items():
        if _room(module) == "synth":
            assert not [t for t in targets if _room(t) in models], module


def test_the_top_of_the_run_is_imported_by_no_other_room() -> None:
    """`run` sits below kaggle, rank and tune because they run stages (`run.stages`); `all` and its
    budget (`run.pipeline`, `run.plan`, `run.budget`) stand above everything but the CLI, which
    loads `all` by name: no module outside the run's room imports them."""
    top = {"tpurank.run.pipeline", "tpurank.run.plan", "tpurank.run.budget"}
    assert top <= set(IMPORTS)
    assert {m for m, targets in IMPORTS.items() if targets & top and _room(m) != "run"} == set()
