"""Render the measured figures of README.md, docs/ and bench/README.md from bench/results/, never by hand.

A figure the docs quote lives in a marked region, which names a renderer of this folder's
figures_*.py modules (a small function reading one or more results files):

    <!-- figures: recipe1_90m_steps -->
    | step | wall | ... |
    <!-- /figures -->

or inline, inside a sentence or a table cell: `... <!-- figures: name -->82.3 min<!-- /figures --> ...`.
Each region ends with its source: the results file, its commit and date, the machine's cores and
load (from the file's provenance, bench/lib/provenance.py).

    .venv/bin/python bench/figures/figures.py           # rewrite every region in place
    .venv/bin/python bench/figures/figures.py --check   # exit 1 listing the regions that differ
    .venv/bin/python bench/figures/figures.py --list    # every renderer and the pages that use it

tests/project/test_figures.py runs the check, and refuses a source without its command, commit or
date, or naming a commit the repository does not hold. A source measured with uncommitted changes
says so in its source line.
"""

from __future__ import annotations

import argparse
import re
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import figures_bench  # noqa: E402, F401  (each figures_* module registers its renderers)
import figures_budget  # noqa: E402, F401
import figures_calibration  # noqa: E402, F401
import figures_data  # noqa: E402, F401
import figures_demo  # noqa: E402, F401
import figures_evidence  # noqa: E402, F401
import figures_gpu  # noqa: E402, F401
import figures_headline  # noqa: E402, F401
import figures_models  # noqa: E402, F401
import figures_real  # noqa: E402, F401
import figures_recipe1  # noqa: E402, F401
import figures_scale  # noqa: E402, F401
import figures_tune  # noqa: E402, F401
from figure_kit import RENDERERS, Figure  # noqa: E402

REGION = re.compile(r"<!-- figures: (?P<name>[\w.-]+) -->(?P<body>.*?)<!-- /figures -->", re.S)


def pages() -> list[Path]:
    """The pages whose figures are rendered: the README, every page of docs/ and its evidence pages,
    and bench/README.md."""
    docs = sorted((ROOT / "docs").glob("*.md")) + sorted((ROOT / "docs" / "evidence").glob("*.md"))
    return [ROOT / "README.md", *docs, ROOT / "bench" / "README.md"]


def source_line(fig: Figure, inline: bool) -> str:
    """Where a figure's numbers come from, in one line: each results file with its commit, date and
    machine (files that share them listed together)."""
    groups: dict[str, list[str]] = {}
    for source in fig.sources:
        where, what = source.described()
        groups.setdefault(what, []).append(where)
    parts = [
        f"{', '.join(wheres)}{' ' if what.startswith('at ') else ', '}{what}"
        for what, wheres in groups.items()
    ]
    if inline:
        return f"(source: {'; '.join(parts)})"
    return f"*Source{'s' if len(fig.sources) > 1 else ''}: {'; '.join(parts)}.*"


WIDTH = 100  # the docs' line length


def wrapped(text: str) -> str:
    """A block's prose and bullets re-wrapped at WIDTH (tables and blank lines kept as they are), so a
    rendered paragraph reads like the hand-written ones around it."""
    items: list[str] = []  # paragraphs, bullets, table rows and blank lines, each on one line
    for line in text.strip().splitlines():
        new = not line or line.startswith(("|", "- "))
        if items and items[-1] and not items[-1].startswith("|") and not new:
            items[-1] += " " + line.strip()
        else:
            items.append(line)
    out = []
    for item in items:
        if not item or item.startswith("|"):
            out.append(item)
            continue
        indent = "  " if item.startswith("- ") else ""
        out.append(
            textwrap.fill(
                item, WIDTH, subsequent_indent=indent, break_on_hyphens=False, break_long_words=False
            )
        )
    return "\n".join(out)


def rendered(name: str, inline: bool) -> str:
    """A region's body as its renderer gives it now, its source line included.

    Raises:
        KeyError: no renderer of that name.
        ValueError: an inline region whose renderer gives more than one line.
    """
    fig = RENDERERS[name]()
    if not inline:
        return f"\n{wrapped(fig.text)}\n\n{wrapped(source_line(fig, inline=False))}\n"
    if "\n" in fig.text.strip():
        raise ValueError(f"{name}: an inline region's figure must be one line")
    return f"{fig.text.strip()} {source_line(fig, inline=True)}"


CODE = re.compile(r"^```.*?^```|`[^`\n]+`", re.S | re.M)  # a fenced block or an inline code span


def regions(text: str) -> Iterator[re.Match]:
    """Every marked region of a page, but those shown as code (bench/README.md shows the markers
    in a fenced block and in backticks: examples, not figures)."""
    code = [m.span() for m in CODE.finditer(text)]
    for m in REGION.finditer(text):
        if not any(start <= m.start() < end for start, end in code):
            yield m


def misplaced(text: str, m: re.Match) -> str | None:
    """Why a region's markers sit where markdown would misread them, None when they do not: an inline
    region that starts a line would make that line raw HTML (its markdown unrendered), and a block
    region's markers each take a line of their own."""
    starts_line = m.start() == 0 or text[m.start() - 1] == "\n"
    if not m["body"].startswith("\n"):
        return (
            "an inline region must not start a line (markdown would read the line as raw HTML)"
            if starts_line
            else None
        )
    ends_line = text[m.end() : m.end() + 1] in ("", "\n")
    if not (starts_line and ends_line and m["body"].endswith("\n")):
        return "a block region's markers each take a line of their own"
    return None


def render(text: str) -> str:
    """A page with every region rendered afresh (a region on lines of its own stays a block)."""

    def body(m: re.Match) -> str:
        block = m["body"].startswith("\n")
        return f"<!-- figures: {m['name']} -->{rendered(m['name'], inline=not block)}<!-- /figures -->"

    out, last = [], 0
    for m in regions(text):
        out += [text[last : m.start()], body(m)]
        last = m.end()
    return "".join(out) + text[last:]


def check(page: Path) -> tuple[list[str], list[str]]:
    """The regions of a page that cannot be rendered (`page:line NAME: why`: misplaced markers, no
    such renderer, a source that fails) and those whose text differs from what their sources give
    now (`page:line NAME`)."""
    text = page.read_text()
    broken, differ = [], []
    for m in regions(text):
        where = f"{page.relative_to(ROOT)}:{text.count(chr(10), 0, m.start()) + 1} {m['name']}"
        try:
            if why := misplaced(text, m):
                raise ValueError(why)
            fresh = rendered(m["name"], inline=not m["body"].startswith("\n"))
        except Exception as e:  # a renderer that fails is reported with its region, not as a traceback
            broken.append(f"{where}: {e!r}")
            continue
        if fresh != m["body"]:
            differ.append(where)
    return broken, differ


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--check", action="store_true", help="exit 1 listing the regions that differ; write nothing"
    )
    p.add_argument("--list", action="store_true", help="every renderer and the pages that use it")
    a = p.parse_args()
    if a.list:
        used = {m["name"]: str(page.relative_to(ROOT)) for page in pages() for m in regions(page.read_text())}
        for name in sorted(RENDERERS):
            print(f"{name:32s} {used.get(name, '(not used)')}")
        return 0
    results = [check(page) for page in pages()]
    broken = [line for b, _ in results for line in b]
    differ = [line for _, d in results for line in d]
    for line in broken:
        print(f"cannot render: {line}", file=sys.stderr)
    if a.check or broken:
        for line in differ:
            print(f"differs from its sources: {line}")
        return 1 if broken or differ else 0
    for page in pages():
        text = page.read_text()
        if (new := render(text)) != text:
            page.write_text(new)
            print(f"rendered {page.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
