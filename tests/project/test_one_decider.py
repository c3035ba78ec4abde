"""Work is skipped in one place: `tpurank.core.staleness.current`.

Every comparison of keys in the package (a name holding key, stamp, digest or fingerprint on either
side of `==` or `!=`) is the one inside `current`, or sits in a module named in NOT_A_SKIP with why
it decides no skip. docs/architecture.md's "Where work is skipped" names that one function, and
the list under it names exactly the modules that ask it: a new cache shows up in both places.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tpurank"
DOC = SRC.parents[1] / "docs" / "architecture.md"
KEYISH = re.compile(r"key|stamp|digest|fingerprint", re.I)
DECIDER = "core/staleness.py"
# modules that compare keys for another reason than skipping work
NOT_A_SKIP = {
    "core/config_build.py": "config key names, not content keys",
    "kaggle/infer.py": "a shipped file against its recorded digest: a mismatch is an error",
    "kaggle/unpacked.py": "which files infer unpacked itself (refused otherwise), not whether to redo work",
    "lgbm/saved.py": "a model file against the digest training saved: a mismatch is an error",
    "prepare/belongs.py": "the cache against the data it must belong to: a mismatch is an error",
    "prepare/built_with.py": "the cache's settings against the run's: a mismatch is an error",
    "run/records.py": "why a step runs, once `current` said it must, and whose timing to reuse",
}


def _rel(f: Path) -> str:
    return f.relative_to(SRC).as_posix()


def _modules() -> list[Path]:
    return [f for f in sorted(SRC.rglob("*.py")) if not f.name.endswith("_pb2.py")]


def _key_comparisons(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Compare) and any(isinstance(o, ast.Eq | ast.NotEq) for o in node.ops)):
            continue
        sides = [node.left, *node.comparators]
        if any(isinstance(s, ast.Constant) for s in sides):  # a name against a literal: not a key
            continue
        if any(KEYISH.search(ast.unparse(s)) for s in sides):
            found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def _asks_current(tree: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "current"
        for n in ast.walk(tree)
    )


def _listed(title: str) -> set[str]:
    """The modules of the list under the heading `title` (lines `- \\`module.py\\`: ...`)."""
    section = DOC.read_text().split(f"{title}\n", 1)[1].split("\n#", 1)[0]
    return set(re.findall(r"^- `([\w/]+\.py)`", section, re.M))


def test_keys_are_compared_only_by_current() -> None:
    strays = {}
    for f in _modules():
        if _rel(f) in (DECIDER, *NOT_A_SKIP):
            continue
        if found := _key_comparisons(ast.parse(f.read_text())):
            strays[_rel(f)] = found
    assert not strays, f"keys compared outside tpurank.core.staleness.current: {strays}"


def test_the_exceptions_still_compare_keys() -> None:
    """An exception that no longer compares keys leaves the list (it would hide a new one)."""
    for rel in NOT_A_SKIP:
        assert _key_comparisons(ast.parse((SRC / rel).read_text())), rel


def test_every_module_that_skips_work_is_listed_in_the_docs() -> None:
    asking = {_rel(f) for f in _modules() if _rel(f) != DECIDER and _asks_current(ast.parse(f.read_text()))}
    assert asking == _listed("### Who asks `current`, and what it skips")


def test_the_list_of_where_work_is_skipped_has_one_entry() -> None:
    assert _listed("## Where work is skipped") == {DECIDER}


def _calls(tree: ast.AST, name: str) -> list[int]:
    """Lines that call `name` (as a bare name or an attribute)."""
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Call)
        and (getattr(n.func, "id", None) == name or getattr(n.func, "attr", None) == name)
    ]


def test_every_key_comes_from_a_declaration() -> None:
    """A stage's declaration is built in core/declared.py alone, and every key of a stage run or of
    a finer cache is made through one (`StageIO.piece_key`, `config_key`): a change to what a stage
    reads is made in its declaration and nowhere else."""
    outside = {}
    for f in _modules():
        rel = _rel(f)
        tree = ast.parse(f.read_text())
        if rel != "core/declared.py" and (lines := _calls(tree, "StageIO")):
            outside[f"{rel} builds a StageIO"] = lines
        if rel != DECIDER and (lines := _calls(tree, "content_key")):
            outside[f"{rel} calls content_key"] = lines
    assert outside == {}
