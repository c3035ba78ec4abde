"""Every benchmark script still imports and parses its options: a broken import fails CI, not the
next person who runs the benchmark (the benchmarks themselves are too long for the suite)."""

from __future__ import annotations

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
SCRIPTS = sorted(BENCH.glob("*.py"))


def test_every_script_is_listed_in_the_bench_readme() -> None:
    readme = (BENCH / "README.md").read_text()
    missing = [s.name for s in SCRIPTS if s.name not in readme]
    assert not missing, f"bench/README.md does not list {missing}"
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_script_imports_and_prints_its_help(script: Path) -> None:
    if "__main__" not in script.read_text():  # a helper module of the benchmarks: importing is its test
        cmd = [sys.executable, "-c", f"import sys; sys.path.insert(0, {str(BENCH)!r}); import {script.stem}"]
    else:
        cmd = [sys.executable, str(script), "--help"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=BENCH.parent, timeout=120)
    assert r.returncode == 0, r.stderr[-2000:]
    if "--help" in cmd:
        assert "usage:" in r.stdout


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_every_tpurank_name_a_script_uses_exists(script: Path) -> None:
    """`--help` runs only the top of a script: the names it takes from tpurank inside functions
    (imports and `module.attribute` uses) are checked here, so a moved function fails CI too."""
    tree = ast.parse(script.read_text())
    modules: dict[str, object] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tpurank"):
            module = importlib.import_module(node.module)
            for alias in node.names:
                if not hasattr(module, alias.name):  # a submodule: `from tpurank.gnn import loop`
                    importlib.import_module(f"{node.module}.{alias.name}")
                obj = getattr(module, alias.name)
                if inspect.ismodule(obj):
                    modules[alias.asname or alias.name] = obj
    uses = [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id in modules
    ]
    for node in uses:
        if not isinstance(node.ctx, ast.Store):  # a script may patch a module (bench_gnn_memory)
            assert hasattr(modules[node.value.id], node.attr), (
                f"line {node.lineno}: {node.value.id}.{node.attr}"
            )


def _runs(row: str, xla: list[float], nlp: list[float]) -> list[dict]:
    """Result records of one row of bench_budget: a score per seed and collection."""
    return [
        {"row": row, "collection": c, "seed": s, "score": v}
        for c, scores in (("layout:xla:random", xla), ("layout:nlp:default", nlp))
        for s, v in enumerate(scores)
    ]


def _bench_budget():
    """bench/bench_budget.py as a module (bench/ is no package)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("bench_budget")
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.parametrize(
    ("after_xla", "after_nlp", "mean", "met"),
    [
        ([0.44, 0.46, 0.45], [0.74, 0.76, 0.75], "+0.0400", True),
        ([0.425, 0.445, 0.435], [0.74, 0.76, 0.75], "+0.0325", True),
        ([0.41, 0.43, 0.42], [0.73, 0.75, 0.74], "+0.0200", False),
        ([0.35, 0.37, 0.36], [0.83, 0.85, 0.84], "+0.0400", False),  # xla -0.05, beyond the spread 0.0082
    ],
)
def test_bench_budget_verdict_is_the_issue_target(
    after_xla: list, after_nlp: list, mean: str, met: bool
) -> None:
    """+0.03 mean tau over both collections and no collection worse beyond its seed spread."""
    bench_budget = _bench_budget()
    results = _runs("b", [0.40, 0.42, 0.41], [0.70, 0.72, 0.71]) + _runs("a", after_xla, after_nlp)
    v = bench_budget.verdict(results, "a", base="b")
    assert f"; mean {mean} (" in v and v.endswith(": met" if met else ": NOT met"), v
    assert "not every collection measured yet" in bench_budget.verdict(_runs("b", [0.4], []), "a", base="b")
    one_seed = _runs("b", [0.40], [0.70]) + _runs("a", [0.45], [0.75])
    assert bench_budget.verdict(one_seed, "a", base="b").endswith(": met on only 1 of the 3 seeds asked")
    repeated = one_seed + one_seed + _runs("a", [0.45, 0.45], [0.75, 0.75])  # duplicates, lone seeds
    assert bench_budget.verdict(repeated, "a", base="b").endswith(": met on only 1 of the 3 seeds asked")


def test_bench_budget_reports_the_peak_rss_of_each_command_alone(tmp_path: Path) -> None:
    """The command's own peak, not the bench's largest child so far: 300 MB more reads ~0.29 GB more.
    Measured from a small process, as the bench is one (a child's peak counts its parent's resident
    set at the fork, and pytest's is large)."""
    package = tmp_path / "src" / "tpurank"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(
        "import sys\nblock = b'x' * (int(sys.argv[1]) * 2**20)\nprint('ran')\n"
    )
    log = tmp_path / "bench.log"
    driver = (
        f"import sys; sys.path.insert(0, {str(BENCH)!r}); from pathlib import Path; import bench_budget as b; "
        f"t, log = Path({str(tmp_path)!r}), Path({str(log)!r}); "
        "print(b.tpurank(t, ['300'], log), b.tpurank(t, ['0'], log)); b.tpurank(t, ['fail'], log)"
    )
    r = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=120)
    big, small = map(float, r.stdout.split())
    assert 0.25 < big - small < 0.35 and 0.001 < small < 0.2, (big, small)
    assert log.read_text().splitlines().count("ran") == 2 and "$ tpurank 300" in log.read_text()
    assert r.returncode == 1 and "tpurank fail failed (exit 1)" in r.stderr, r.stderr  # int('fail') raised


def test_bench_budget_judges_a_preset_measured_in_a_row_per_collection() -> None:
    """xla from one (row, base) pair and nlp from another: each row's other collection never counts."""
    bench_budget = _bench_budget()
    results = (
        _runs("xla-base", [0.40, 0.42, 0.41], [0.10])
        + _runs("xla-row", [0.45, 0.47, 0.46], [0.99])
        + _runs("nlp-base", [0.99], [0.70, 0.72, 0.71])
        + _runs("nlp-row", [0.10], [0.72, 0.74, 0.73])
    )
    rows = {"layout:xla:random": ("xla-row", "xla-base"), "layout:nlp:default": ("nlp-row", "nlp-base")}
    picked = bench_budget.per_collection(results, rows)
    assert len(picked) == 12
    v = bench_budget.verdict(picked, "current", base="current-base")
    assert "layout:xla:random +0.0500, layout:nlp:default +0.0200; mean +0.0350" in v and v.endswith(
        ": met"
    ), v
