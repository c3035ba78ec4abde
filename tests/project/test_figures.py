"""Every measured figure of README.md and docs/ comes from a results file that says how it was
measured: a marked region (`<!-- figures: NAME -->`) holds exactly what its renderer in
bench/figures_*.py gives from bench/results/, every results file it reads names its command, commit
and date, and a figure quoted without a results file names a commit that exists. Only JSON and
markdown are read: the whole file takes about a second."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT

sys.path.insert(0, str(ROOT / "bench"))
import figures  # noqa: E402
import provenance  # noqa: E402
from figure_kit import RENDERERS, Figure, Source  # noqa: E402

PAGES = figures.pages()
USED = sorted({m["name"] for page in PAGES for m in figures.regions(page.read_text())})
# a figure quoted without a results file is marked `*(measured 2026-11-27 at commit abc1234: ...)*`
MARKED_COMMIT = re.compile(r"\bcommit\s+([0-9a-f]{7,40})\b")


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_every_region_holds_what_its_sources_give(page: Path) -> None:
    broken, differ = figures.check(page)
    assert not broken, broken
    assert not differ, f"run `.venv/bin/python bench/figures.py` and commit the pages: {differ}"


def test_the_docs_have_figure_regions() -> None:
    """The check above finds what it looks for."""
    assert len(USED) >= 30


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
    prov = {"command": "bench/bench_x.py", "commit": None, "date": "2026-11-27"}
    assert provenance.missing(prov) == ["commit"]
    assert provenance.missing(None) == ["command", "commit", "date"]


def test_a_figure_lists_its_sources_with_their_commit_and_date() -> None:
    fig = Figure("x", (Source("recipe1_full_2h.json"), Source("recipe1_full_90m_declared.json")))
    line = figures.source_line(fig, inline=False)
    assert line.startswith("*Sources: bench/results/recipe1_full_2h.json, commit ")
    assert re.search(r"commit [0-9a-f]{7}, \d{4}-\d\d-\d\d, 2 cores, (quiet|loaded)", line)


def test_the_stamp_of_a_bench_run_has_what_a_figure_needs() -> None:
    stamp = provenance.stamp(["bench/bench_x.py", "--out", "x.json"])
    assert stamp["command"] == "bench/bench_x.py --out x.json" and not provenance.missing(stamp)
    assert stamp["cores"] and len(stamp["load"]["start"]) == 3 and isinstance(stamp["quiet"], bool)


def test_every_marked_commit_exists() -> None:
    """`measured ... at commit abc1234` names a commit of this repository (no hash typed from memory)."""
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    hashes = sorted({h for page in PAGES for h in MARKED_COMMIT.findall(page.read_text())})
    assert hashes
    r = subprocess.run(
        ["git", "cat-file", "--batch-check"],
        input="".join(f"{h}^{{commit}}\n" for h in hashes),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    missing = [line.split()[0] for line in r.stdout.splitlines() if line.endswith("missing")]
    assert not missing, f"no such commit: {missing}"
