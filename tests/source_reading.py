"""What the project tests share to read the package's source with ast (test files never import each
other)."""

from __future__ import annotations

import ast


def docstring_ids(tree: ast.Module) -> set[int]:
    """The ids of the docstring constants of a module, its classes and functions: they describe the
    code to its reader, a user never reads them in a message or a path."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out
