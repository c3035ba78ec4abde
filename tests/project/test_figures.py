"""Every measured figure of README.md, docs/ (its evidence pages included) and bench/README.md comes
from a results file that says how it was measured: a marked region (`<!-- figures: NAME -->`) holds
exactly what its renderer in bench/figures_*.py gives from bench/results/, every results file it
reads names its command, commit and date, every commit it names (each record's, for a file of one
record per run) exists in the repository, and a source measured with uncommitted changes says so
beside the figure. No page quotes a figure without a results file. Only JSON, markdown and `git
cat-file` are read: the whole file takes about a second."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, bench_on_path

bench_on_path()
import figure_kit  # noqa: E402
import figures  # noqa: E402
import provenance  # noqa: E402
from figure_kit import RENDERERS, Figure, Source  # noqa: E402

PAGES = figures.pages()
USED = sorted({m["name"] for page in PAGES for m in figures.regions(page.read_text())})
# a commit named on a page: `commit abc1234` (a source line's)
MARKED_COMMIT = re.compile(r"\bcommit\s+([0-9a-f]{7,40})\b")
# the mark a figure without a results file used to carry: `*(measured 2026-11-27 at commit abc1234:
# bench/LOG.md; no results file)*`, `*(no results file: first quoted ...)*`
UNSOURCED = re.compile(r"\*\((?:measured \d|first quoted|no results file)[^)]*\)\*")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_region_holds_what_its_sources_give(page: Path) -> None:
    broken, differ = figures.check(page)
    assert not broken, broken
    assert not differ, f"run `.venv/bin/python bench/figures/figures.py` and commit the pages: {differ}"


def test_the_docs_have_figure_regions() -> None:
    """The check above finds what it looks for, on the evidence pages and bench/README.md too."""
    assert len(USED) >= 30
    names = {p.relative_to(ROOT).as_posix() for p in PAGES}
    assert {"bench/README.md", "docs/evidence/rank.md", "docs/rank.md"} <= names
    for page in ("bench/README.md", "docs/evidence/rank.md"):
        assert list(figures.regions((ROOT / page).read_text())), f"{page}: no region found"


def test_markers_shown_as_code_are_examples_not_regions() -> None:
    """bench/README.md shows the markers in a fenced block and in backticks: neither is a region."""
    text = (
        "```\n<!-- figures: nope -->\nx\n<!-- /figures -->\n```\n"
        "took `<!-- figures: nope --><!-- /figures -->`, and <!-- figures: gpu_projection -->x<!-- /figures -->\n"
    )
    assert [m["name"] for m in figures.regions(text)] == ["gpu_projection"]
    rendered = figures.render(text)
    assert (
        rendered.startswith("```\n<!-- figures: nope -->\nx\n")
        and "`<!-- figures: nope --><!-- /figures -->`" in rendered
    )


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_no_figure_is_quoted_without_a_results_file(page: Path) -> None:
    """A measured figure is rendered from bench/results/ or not quoted: no page carries the mark of
    one typed from bench/LOG.md."""
    hits = UNSOURCED.findall(page.read_text())
    assert not hits, f"{page.name}: figures without a results file: {hits[:3]}"


@pytest.mark.parametrize("name", USED)
def test_every_source_names_its_command_commit_and_date(name: str) -> None:
    fig = RENDERERS[name]()
    assert fig.sources, f"{name}: a figure without a source"
    for source in fig.sources:
        provs = source.provenances()
        assert provs, f"{name}: {source.name} has no record it reads"
        for prov in provs:
            assert not provenance.missing(prov), f"{name}: {source.name} lacks {provenance.missing(prov)}"


def test_every_renderer_is_used() -> None:
    """A renderer no page uses is a figure nobody reads (or a region someone deleted by hand)."""
    assert sorted(RENDERERS) == USED


def test_a_hand_edited_region_is_found(tmp_path: Path) -> None:
    page = ROOT / "README.md"
    text = page.read_text()
    m = next(figures.regions(text))
    edited = tmp_path / "README.md"
    edited.write_text(
        text[: m.start("body")] + m["body"].replace("min", "minutes", 1) + text[m.end("body") :]
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "ROOT", tmp_path)
        broken, differ = figures.check(edited)
    assert not broken and differ == [f"README.md:{text.count(chr(10), 0, m.start()) + 1} {m['name']}"]


def test_a_region_starting_a_line_or_with_no_renderer_is_refused(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- figures: gpu_projection -->x<!-- /figures -->\n\nSee <!-- figures: nope -->x<!-- /figures -->\n"
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(figures, "ROOT", tmp_path)
        broken, _ = figures.check(page)
    assert "raw HTML" in broken[0] and "nope" in broken[1]


def test_a_source_without_its_commit_is_refused() -> None:
    prov = {"command": "bench/runs/bench_x.py", "commit": None, "date": "2026-11-27"}
    assert provenance.missing(prov) == ["commit"]
    assert provenance.missing(None) == ["command", "commit", "date"]


def test_a_figure_lists_its_sources_with_their_commit_and_date() -> None:
    fig = Figure("x", (Source("recipe1_full_2h.json"), Source("recipe1_full_90m_declared.json")))
    line = figures.source_line(fig, inline=False)
    assert line.startswith("*Sources: bench/results/recipe1_full_2h.json, commit ")
    assert re.search(r"commit [0-9a-f]{7}, \d{4}-\d\d-\d\d, 2 cores, (quiet|loaded)", line)


def test_the_stamp_of_a_bench_run_has_what_a_figure_needs() -> None:
    stamp = provenance.stamp(["bench/runs/bench_x.py", "--out", "x.json"])
    assert stamp["command"] == "bench/runs/bench_x.py --out x.json" and not provenance.missing(stamp)
    assert stamp["cores"] and len(stamp["load"]["start"]) == 3 and isinstance(stamp["quiet"], bool)


def _git(*args: str, stdin: str | None = None) -> str:
    r = subprocess.run(
        ["git", *args], input=stdin, capture_output=True, text=True, cwd=ROOT, timeout=60, check=True
    )
    return r.stdout


def missing_commits(hashes: set[str]) -> list[str]:
    """The commits of `hashes` the repository does not hold (`git cat-file --batch-check`)."""
    out = _git("cat-file", "--batch-check", stdin="".join(f"{h}^{{commit}}\n" for h in sorted(hashes)))
    return [
        line.split()[0].removesuffix("^{commit}") for line in out.splitlines() if line.endswith("missing")
    ]


def history_or_skip() -> None:
    """Skip, saying why, where the commits cannot be looked up: no git checkout, or a shallow clone
    (its history stops at the clone's depth, so an older commit is absent without being wrong)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    if _git("rev-parse", "--is-shallow-repository").strip() == "true":
        pytest.skip("a shallow clone lacks the history the sources name: `git fetch --unshallow`")


def test_every_marked_commit_exists() -> None:
    """`commit abc1234` on a page names a commit of this repository (no hash typed from memory)."""
    history_or_skip()
    hashes = {h for page in PAGES for h in MARKED_COMMIT.findall(page.read_text())}
    assert hashes
    assert not missing_commits(hashes), f"no such commit: {missing_commits(hashes)}"


def test_every_commit_of_every_source_exists() -> None:
    """Each source a page reads names commits that exist: every record of a file of one record per
    run (budget.json: 76 runs at several commits), where the source line shows only a count."""
    history_or_skip()
    named = {
        commit: f"{name}: {source.name}"
        for name in USED
        for source in RENDERERS[name]().sources
        for commit in source.commits()
    }
    assert len(named) > len(USED) // 4
    missing = missing_commits(set(named))
    assert not missing, f"no such commit: {[f'{named[c]} names {c}' for c in missing]}"


def test_a_missing_commit_is_found() -> None:
    history_or_skip()
    head = _git("rev-parse", "HEAD").strip()
    assert missing_commits({head, "0" * 40, head[:7]}) == ["0" * 40]


@pytest.mark.parametrize("name", USED)
def test_a_source_measured_on_a_dirty_tree_says_so(name: str) -> None:
    """A source whose code had uncommitted changes when it was measured is not exactly its commit:
    the figure's source line says so beside it (every region is rendered from its sources, so the
    page says it too)."""
    fig = RENDERERS[name]()
    dirty = [s.name for s in fig.sources if s.dirty()]
    line = figures.source_line(fig, inline=True)
    assert line.count(figure_kit.DIRTY) >= (1 if dirty else 0), f"{name}: {dirty} dirty, not said: {line}"
    if not dirty:
        assert figure_kit.DIRTY not in line


def test_the_dirty_mark_is_rendered(monkeypatch: pytest.MonkeyPatch) -> None:
    clean = {"command": "bench/x.py", "commit": "a" * 40, "dirty": False, "date": "2026-11-27", "cores": 2}
    runs = [clean, {**clean, "dirty": True}]
    monkeypatch.setattr(
        figure_kit,
        "results",
        lambda name: {"x.json": {"provenance": runs[1]}, "r.json": [{"provenance": p} for p in runs]}[name],
    )
    one, many = Source("x.json"), Source("r.json", records=lambda r: True)
    assert one.described()[1].startswith(f"commit aaaaaaa{figure_kit.DIRTY}, 2026-11-27")
    assert many.described()[1].startswith(f"at 1 commit, 1 of the runs{figure_kit.DIRTY}, 2026-11-27")
    assert one.dirty() and many.dirty() and many.commits() == {"a" * 40}
