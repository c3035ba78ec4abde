"""Every benchmark script still imports and parses its options: a broken import fails CI, not the
next person who runs the benchmark (the benchmarks themselves are too long for the suite)."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import BENCH, BENCH_ROOMS, ROOT, SAMPLE_ROOT, bench_on_path
from script_help_cache import bench_helps

from tpurank.prepare.cache import INDEX_FILE

RUNS = BENCH / "runs"
SCRIPTS = sorted(p for room in BENCH_ROOMS for p in (BENCH / room).glob("*.py"))


def test_every_script_is_listed_in_the_bench_readme() -> None:
    readme = (BENCH / "README.md").read_text()
    missing = [s.name for s in SCRIPTS if s.name not in readme]
    assert not missing, f"bench/README.md does not list {missing}"
    assert len(SCRIPTS) >= 12


@pytest.mark.parametrize("script", SCRIPTS, ids=[s.stem for s in SCRIPTS])
def test_script_imports_and_prints_its_help(script: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    """Every script's --help (or a helper module's import) runs once per session, all in one
    interpreter, each as a fresh `python SCRIPT` finds its modules (script_help_cache.bench_helps;
    test_docs reads the helps too). Every file of runs/ is a script a user runs: it answers --help."""
    code, usage = bench_helps(tmp_path_factory)[str(script.relative_to(ROOT))]
    assert code == 0, f"{script.name}: {code}"
    if script.parent == RUNS:
        assert "__main__" in script.read_text(), f"{script.name} in bench/runs/ is no script"
    if "__main__" in script.read_text():
        assert "usage:" in usage
    # a helper module of the benchmarks: importing is its test


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


def _bench(name: str = "bench_budget"):
    """A module of bench/'s rooms (bench/ is no package)."""
    bench_on_path()
    return importlib.import_module(name)


def _synthetic(verdict: str) -> str:
    """A verdict without what the real rows say (its last clause)."""
    head, sep, _ = verdict.partition("; real: ")
    assert sep, f"the verdict does not say what the real rows say: {verdict}"
    return head


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
    bench_budget = _bench()
    results = _runs("b", [0.40, 0.42, 0.41], [0.70, 0.72, 0.71]) + _runs("a", after_xla, after_nlp)
    v = bench_budget.verdict(results, "a", base="b")
    assert f"; mean {mean} (" in v and _synthetic(v).endswith(": met" if met else ": NOT met"), v
    assert v.endswith("; real: - (not measured on real data)"), v  # rows a and b have no real rows
    assert "not every collection measured yet" in bench_budget.verdict(_runs("b", [0.4], []), "a", base="b")
    one_seed = _runs("b", [0.40], [0.70]) + _runs("a", [0.45], [0.75])
    v = bench_budget.verdict(one_seed, "a", base="b")
    assert _synthetic(v).endswith(": met on only 1 of the 3 seeds asked"), v
    repeated = one_seed + one_seed + _runs("a", [0.45, 0.45], [0.75, 0.75])  # duplicates, lone seeds
    v = bench_budget.verdict(repeated, "a", base="b")
    assert _synthetic(v).endswith(": met on only 1 of the 3 seeds asked"), v


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
        f"import sys; sys.path.insert(0, {str(RUNS)!r}); from pathlib import Path; import bench_budget as b; "
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
    bench_budget = _bench()
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
    assert "layout:xla:random +0.0500, layout:nlp:default +0.0200; mean +0.0350" in v
    assert _synthetic(v).endswith(": met"), v


# ------------------------------------------------------------------ real-sample rows of the recipe tables


def _real_file(folder: Path, name: str, values: list[float], seeds: list[int] | None = None) -> str:
    """A bench_real.py results file holding only the GNN's per-seed layout tau."""
    seeds = seeds if seeds is not None else list(range(len(values)))
    data = {"seeds": seeds, "layout": {"per_seed": {"all": {"gnn": values}}}}
    (folder / name).write_text(json.dumps(data))
    return name


def _cell(values: list[float]) -> str:
    """How a real row shows its values: mean ± population std, as the synthetic rows."""
    return f"{statistics.fmean(values):.4f} ± {statistics.pstdev(values):.4f} ({len(values)} seeds"


def test_real_rows_pool_seeds_and_name_what_is_missing(tmp_path: Path) -> None:
    rr = _bench("real_rows")
    a = _real_file(tmp_path, "a.json", [0.10, 0.20, 0.30])
    b = _real_file(tmp_path, "b.json", [0.50, 0.70], seeds=[3, 4])
    real = rr.RealRows(
        {"r": [rr.layout((a, b), "gnn", "pooled")], "m": [rr.layout(("gone.json",), "gnn", "x")]},
        [tmp_path / "absent", tmp_path],
    )
    assert real.values(real.mapping["r"][0]) == {0: 0.10, 1: 0.20, 2: 0.30, 3: 0.50, 4: 0.70}
    assert real.cells("r", [rr.LAYOUT]) == [[_cell([0.10, 0.20, 0.30, 0.50, 0.70]) + "; pooled)"]]
    assert real.cells("m", [rr.LAYOUT, rr.TILE]) == [["- (gone.json not found; x)", ""]]
    assert real.cells("never", [rr.LAYOUT, rr.TILE]) == [["-", "-"]]
    twice = rr.RealRows({"r": [rr.layout((a, a), "gnn", "twice")]}, [tmp_path])
    with pytest.raises(SystemExit, match="a.json: seed 0 of layout/per_seed/all/gnn is also in a.json"):
        twice.values(twice.mapping["r"][0])
    wrong = rr.RealRows({"r": [rr.layout((a,), "lgbm", "no lgbm")]}, [tmp_path])
    with pytest.raises(
        SystemExit, match=r"a.json: no per-seed values at layout/per_seed/all/lgbm \(KeyError"
    ):
        wrong.values(wrong.mapping["r"][0])


def _budget_real(tmp_path: Path, before: list[float], features: list[float]):
    """bench_budget's real rows over fabricated files: `before` and `features` measured, nothing else."""
    bench_budget, rr = _bench(), _bench("real_rows")
    mapping = {
        "before": [rr.layout((_real_file(tmp_path, "base.json", before),), "gnn", "fake")],
        "features": [rr.layout((_real_file(tmp_path, "feat.json", features),), "gnn", "fake")],
    }
    return bench_budget, rr.RealRows(mapping, [tmp_path])


def test_bench_budget_table_shows_synthetic_and_real_rows(tmp_path: Path) -> None:
    bench_budget, real = _budget_real(tmp_path, [0.20, 0.21, 0.22], [0.25, 0.26, 0.30])
    results = _runs("before", [0.40, 0.42], [0.70, 0.72]) + _runs("features", [0.45], [0.75])
    results += _runs("schedule", [0.43], [0.73])
    lines = bench_budget.table(results, real).splitlines()
    assert lines[0].startswith("| row | data | layout:xla:random | layout:nlp:default | mean | real: ")
    rows = {
        tuple(c.strip() for c in line.split("|")[1:3]): line for line in lines[2:] if line.startswith("| ")
    }
    assert set(rows) == {(r, d) for r in ("before", "features", "schedule") for d in ("synthetic", "real")}
    assert f"| {_cell([0.40, 0.42])[:-1]}" in rows["before", "synthetic"]
    assert rows["before", "real"].endswith(f" {_cell([0.20, 0.21, 0.22])}; fake) |")
    assert rows["features", "real"].endswith(f" {_cell([0.25, 0.26, 0.30])}; fake) |")
    assert rows["schedule", "real"].endswith("| - |")  # never measured on real data
    assert lines.index(rows["before", "real"]) == lines.index(rows["before", "synthetic"]) + 1  # beside it


@pytest.mark.parametrize(
    ("features", "said"),
    [
        ([0.10, 0.11, 0.12], "real: lower (fake: -0.1000, beyond the spread 0.0082"),  # beyond 0.0082
        ([0.19, 0.21, 0.23], "real: within the seed spread (fake: +0.0000, within the spread 0.0163"),
        ([0.205, 0.205, 0.205], "real: within the seed spread (fake: -0.0050, within the spread 0.0082"),
        ([0.30, 0.31, 0.32], "real: higher (fake: +0.1000, beyond the spread 0.0082"),
    ],
)
def test_bench_budget_verdict_says_real_lower_beyond_the_spread(
    tmp_path: Path, features: list, said: str
) -> None:
    """The synthetic outcome stays; the real clause flags a row whose real rows are below its base's."""
    bench_budget, real = _budget_real(tmp_path, [0.20, 0.21, 0.22], features)
    results = _runs("before", [0.40, 0.42, 0.41], [0.70, 0.72, 0.71])
    results += _runs("features", [0.45, 0.47, 0.46], [0.75, 0.77, 0.76])  # synthetic: +0.05, met
    v = bench_budget.verdict(results, "features", "before", real)
    assert _synthetic(v).endswith(": met") and f"; {said}" in v, v
    assert bench_budget.verdict(results, "schedule", "before", real).endswith(
        "real: - (not measured on real data)"
    )
    assert bench_budget.verdict(results, "features", "schedule", real).endswith(
        "real: - (no real row of schedule in the same setting)"
    )
    report = bench_budget.report(results, real)
    assert [line for line in report.splitlines() if line.startswith("features vs before:")] == [v]


def test_recipe_tables_show_real_rows_and_dash(tmp_path: Path) -> None:
    """bench_recipe (demo), bench_gnn (comparison, ablation) and bench_gst (tau): a `data` column, each
    recipe's real rows below its synthetic row, "-" for one never measured on real data."""
    rr = _bench("real_rows")
    name = _real_file(tmp_path, "r.json", [0.01, 0.03])
    real = rr.RealRows(
        {"base": [rr.layout((name,), "gnn", "fake")], "real-only": [rr.layout((name,), "gnn", "fake")]},
        [tmp_path],
    )
    value = f"{_cell([0.01, 0.03])}; fake) |"
    scores = {"tile:xla": {"scores": [0.9, 0.92], "mean": 0.91, "std": 0.01, "seed_average": 0.915}}
    recipe = {"seeds": 2, "rows": {"base": scores, "gnn.dropout=0.1": scores}}
    text = _bench("bench_recipe").markdown(recipe, ["tile:xla"], real).splitlines()
    assert "| variant | data |" in text[0]
    assert text[2].startswith("| `base` | synthetic | 0.9100 +- 0.0100 | 0.9150 |") and text[3].endswith(
        value
    )
    assert (
        text[4].startswith("| `gnn.dropout=0.1` | synthetic |")
        and text[5] == "| `gnn.dropout=0.1` | real | | | - |"
    )
    assert text[6] == "| `real-only` | synthetic | - | - |  |" and text[7].endswith(value)  # real data only
    gnn = _bench("bench_gnn").table({"base": {"tile:xla": 0.9}, "other": {"tile:xla": 0.8}}, "change", real)
    assert f"| base | real | | {value[:-2]} |  |" in gnn and "| other | real | | - | - |" in gnn
    gst = {
        "base": {
            "collections": {"layout:xla:default": {"valid_tau": 0.4}},
            "mean_tau": 0.4,
            "train_seconds": 9,
        }
    }
    text = _bench("bench_gst").tau_table(gst, real)
    assert (
        "| base | synthetic | 0.4000 | 0.4000 | 9 |  |" in text and f"| base | real | | | | {value}" in text
    )


def test_ensemble_table_puts_bench_real_under_its_normalization(tmp_path: Path) -> None:
    ensemble, rr = _bench("bench_ensemble_normalize"), _bench("real_rows")
    per_seed = {"lgbm": [0.1, 0.3], "gnn": [0.2, 0.2], "ensemble": [0.4, 0.5]}
    data = {
        "seeds": [0, 1],
        "ensemble": {"normalize": {"tile:xla": "zscore"}},
        "tile": {"per_seed": per_seed, "circular_ensemble": [[0.6, [0.5, 0.5]], [0.6, [1, 0]]]},
    }
    (tmp_path / ensemble.REAL["tile:xla"][0]).write_text(json.dumps(data))
    text = ensemble.table(
        {"tile:xla": ["a", "b", "c", "d"], "layout:nlp:random": ["e", "f", "g", "h"]},
        rr.RealRows({}, [tmp_path]),
    ).splitlines()
    assert text[2] == "| tile:xla | synthetic | a | b | c | d |"
    # fitted (circular) / cross-fitted (not in the file) / equal, under zscore: the normalization it ran
    assert (
        text[3]
        == "| tile:xla | real | 0.2000 ± 0.1000 | 0.2000 ± 0.0000 | - | 0.6000 ± 0.0000 / - / 0.4500 ± 0.0500 |"
    )
    assert text[5] == "| layout:nlp:random | real | - | - | - | - |"


@pytest.mark.parametrize(
    ("argv", "expect"),
    [
        (["bench_budget.py", "--table"], "| before | real |"),
        (["bench_recipe.py", "--table"], "| `base` | real |"),
        (["bench_gnn.py", "--table"], "| gnn | real |"),
        (["bench_gst.py", "table"], "| pruned (default) | real |"),
    ],
)
def test_table_modes_read_the_saved_results(argv: list[str], expect: str) -> None:
    """The results files saved before the `data` column load, and their tables show real rows."""
    r = subprocess.run(
        [sys.executable, str(RUNS / argv[0]), *argv[1:]],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert expect in r.stdout and "| synthetic |" in r.stdout and _legend() in r.stdout


def _legend() -> str:
    return _bench("real_rows").LEGEND


def test_gpu_projection_without_the_sample_says_so_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    projection = _bench("bench_gpu_projection")
    assert projection.SAMPLE == SAMPLE_ROOT  # where the tests find the real sample
    monkeypatch.setattr(sys, "argv", ["bench_gpu_projection.py", "--sample", str(tmp_path / "absent")])
    assert projection.main() == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"bench_gpu_projection: the real sample is not at {tmp_path / 'absent'}")
    assert line.endswith("pass --sample DIR")


def test_gpu_projection_prepares_the_sample_where_it_reads_it(
    sample_root: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """$TPURANK_WORK (a big disk for a user's runs) must not move the sample's cache out of the
    bench's own folder: the bench failed with `max() arg is an empty sequence` there."""
    projection = _bench("bench_gpu_projection")
    elsewhere = tmp_path / "user-work"
    monkeypatch.setenv("TPURANK_WORK", str(elsewhere))
    paths = projection.prepare_sample(sample_root, tmp_path / "bench")
    assert paths.prepared == tmp_path / "bench" / "features" / "prepared"
    assert (paths.prepared / INDEX_FILE).is_file() and not elsewhere.exists()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM is Linux /proc")
def test_peak_rss_is_measured_from_its_reset() -> None:
    """bench/lib/peak_rss.py: the memory benches' own peak of one step, call or graph."""
    import numpy as np

    from tpurank.core.memory import release_free_memory

    peak_rss = _bench("peak_rss")
    peak_rss.reset_peak_rss()
    base = peak_rss.peak_rss_gb()
    block = np.ones(200_000_000 // 8)  # 200 MB, touched
    assert peak_rss.peak_rss_gb() >= base + 0.15
    del block
    release_free_memory()
    peak_rss.reset_peak_rss()
    assert peak_rss.peak_rss_gb() < base + 0.15  # the reset forgot the block's peak
