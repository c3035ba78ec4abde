"""Imports inside functions: only where a stage's face loads its work when it runs (the light-face
pattern, docs/architecture.md), where a process must stay light beside the work, or where a client
is optional; each says why in a comment on it or just above its block, and this list holds them
all, so a new one is a decision, not a habit."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "tpurank"

# module (under src/tpurank) -> the modules its functions import
INNER: dict[str, set[str]] = {
    # the light-face pattern: a stage's face loads its work when the stage runs
    "features/cli.py": {"tpurank.features.stage"},
    "predict/cli.py": {"tpurank.predict.stage"},
    "prepare/cli.py": {"tpurank.prepare.stage"},
    "train/cli.py": {"tpurank.train.stage"},
    "validate/cli.py": {"tpurank.validate.stage"},
    "synth/cli.py": {"tpurank.synth.stage"},
    # processes that stay light beside the work: all's own, a stage waiting on its workers
    "run/pipeline.py": {"tpurank.synth"},
    "train/collection_processes.py": {"tpurank.gnn.device"},
    "train/pace.py": {"numpy"},
    "core/workers.py": {"torch"},
    "core/profiles.py": {"torch"},
    # the model registry: a model's module loads when the model is used, not when a face reads its names
    "models/registry.py": {"tpurank.models.untrained", "tpurank.lgbm", "tpurank.gnn.entry", "tpurank.models"},
    # heavy libraries only the functions that need them load (each module's docstring says why)
    "core/metrics.py": {"scipy.stats"},
    "core/normalize.py": {"scipy.stats"},
    "rank/select.py": {"scipy.stats"},
    "validate/stage.py": {"scipy.stats", "tpurank.report"},
    # optional clients: the network, Kaggle, TensorBoard
    "data/net.py": {"requests", "requests.adapters", "urllib3.exceptions", "urllib3.util.retry"},
    "data/download.py": {"kaggle.api.kaggle_api_extended", "kagglesdk"},
    "gnn/training/run_log.py": {"torch.utils.tensorboard"},
}


def _blocks(body: list[ast.stmt]) -> list[list[ast.Import | ast.ImportFrom]]:
    """Runs of consecutive import statements in one statement list."""
    runs: list[list[ast.Import | ast.ImportFrom]] = []
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.Import | ast.ImportFrom):
            if i and isinstance(body[i - 1], ast.Import | ast.ImportFrom) and runs:
                runs[-1].append(stmt)
            else:
                runs.append([stmt])
    return runs


def inner_imports(path: Path) -> list[tuple[list[ast.Import | ast.ImportFrom], bool]]:
    """Each block of imports inside a function of `path`, and whether a comment gives its reason
    (on its first line or the line above)."""
    lines = path.read_text().splitlines()
    found = []
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            for field in ("body", "orelse", "finalbody"):
                stmts = getattr(node, field, None)
                for block in _blocks(stmts if isinstance(stmts, list) else []):
                    first = block[0].lineno - 1
                    said = "#" in lines[first] or lines[first - 1].strip().startswith("#")
                    found.append((block, said))
    return found


def _names(stmt: ast.Import | ast.ImportFrom) -> set[str]:
    if isinstance(stmt, ast.Import):
        return {a.name for a in stmt.names}
    return {stmt.module or ""}


def test_every_import_inside_a_function_is_listed_and_says_why() -> None:
    seen: dict[str, set[str]] = {}
    unexplained = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        for block, said in inner_imports(path):
            for stmt in block:
                seen.setdefault(rel, set()).update(_names(stmt))
            if not said:
                unexplained.append(f"{rel}:{block[0].lineno}")
    assert not unexplained, f"imports inside functions without a reason: {unexplained}"
    assert seen == INNER
