"""Every path of the dataset and the cache is named once: the npz folder of a data root
(`core.paths.NPZ_SUBDIR`) and the prepared index (`prepare.cache.INDEX_FILE`) are spelled in their
own modules and nowhere else in code (docstrings and comments may name them)."""

from __future__ import annotations

import ast
from pathlib import Path

from helpers import ROOT
from source_reading import docstring_ids

from tpurank.core.paths import NPZ_SUBDIR
from tpurank.prepare.cache import INDEX_FILE

NAMED = {
    NPZ_SUBDIR.parts[0]: "src/tpurank/core/paths.py",
    INDEX_FILE: "src/tpurank/prepare/cache.py",
}
FOLDERS = ("src", "tests", "bench")


def spelled(path: Path) -> list[str]:
    """Where `path`'s code (not its docstrings) spells one of NAMED in a string."""
    tree = ast.parse(path.read_text())
    docs = docstring_ids(tree)
    return [
        f"{path.relative_to(ROOT)}:{node.lineno} {name!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
        for name, home in NAMED.items()
        if name in node.value and path.relative_to(ROOT).as_posix() != home
    ]


def test_dataset_and_cache_paths_are_named_once() -> None:
    files = sorted(f for folder in FOLDERS for f in (ROOT / folder).rglob("*.py"))
    assert len(files) > 300
    found = [hit for f in files if f != Path(__file__) for hit in spelled(f)]
    assert found == []
