"""The README and docs/ say what the code does: the README stays short, every command line it shows
names a real command and real options, and every relative link points at a file that exists. The docs are
for users: no issue numbers (the development history lives in bench/LOG.md), and no docstring in
src/ sends a reader to ../shared, which a clone does not have."""

from __future__ import annotations

import ast
import io
import re
import shlex
import tokenize
from pathlib import Path

import pytest
from helpers import ROOT
from script_help_cache import script_help

from tpurank.cli import COMMANDS, command_module, command_parser
from tpurank.core.options import Refused

README = ROOT / "README.md"
DOCS = sorted((ROOT / "docs").glob("*.md"))
EVIDENCE = sorted((ROOT / "docs" / "evidence").glob("*.md"))
PAGES = [README, *DOCS, *EVIDENCE, ROOT / "bench" / "README.md"]
RUN_SH_COMMANDS = {"all", "test", "setup", "help"}


def _commands(text: str) -> list[list[str]]:
    """The tpurank commands of the ```bash blocks: `./run.sh X ...` and `python -m tpurank X ...`."""
    out = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.split(" #")[0].strip()
            m = re.search(r"(?:\./run\.sh|python -m tpurank|tpurank)\s+(.*)", line)
            if m and not line.startswith("#"):
                out.append(shlex.split(m.group(1)))
    return out


def test_readme_is_short() -> None:
    assert len(README.read_text().splitlines()) <= 200


def test_readme_shows_the_two_commands() -> None:
    firsts = [c[0] for c in _commands(README.read_text()) if c]
    assert "all" in firsts and "test" in firsts


DOCUMENTED = [(p.name, c) for p in PAGES for c in _commands(p.read_text())]


@pytest.mark.parametrize(
    ("page", "argv"), DOCUMENTED, ids=[f"{p}: {' '.join(c)[:50]}" for p, c in DOCUMENTED]
)
def test_documented_command_parses(page: str, argv: list[str]) -> None:
    """Each command line of the README and docs names a command whose parser takes its options."""
    if not argv:
        return
    command = argv[0]
    assert command in COMMANDS or command in RUN_SH_COMMANDS, f"{command}: no such command"
    if command not in COMMANDS:
        return
    parser = command_parser(command, command_module(command))
    known = {s for a in parser._actions if not isinstance(a, Refused) for s in a.option_strings}
    for word in argv[1:]:
        if word.startswith("-") and not word[1:2].isdigit():
            assert word.split("=")[0] in known, f"`{' '.join(argv)}`: {command} has no option {word}"


def _bench_commands() -> list[list[str]]:
    """The `bench/<room>/<script>.py ...` commands of the README and docs."""
    out = []
    for page in PAGES:
        for block in re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.S):
            for line in block.replace("\\\n", " ").splitlines():
                m = re.search(r"\b(bench/(?:\w+/)?\w+\.py)(.*)", line.split(" #")[0])
                if m and not line.lstrip().startswith("#"):
                    out.append([m.group(1), *shlex.split(m.group(2))])
    return out


BENCH_COMMANDS = _bench_commands()


@pytest.mark.parametrize("argv", BENCH_COMMANDS, ids=[" ".join(c)[:60] for c in BENCH_COMMANDS])
def test_documented_bench_command_has_its_options(
    argv: list[str], tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A benchmark command in the docs names a script that exists and options its --help lists
    (each script's --help runs once per session: helpers.script_help)."""
    assert (ROOT / argv[0]).exists(), f"{argv[0]}: no such benchmark"
    sub = argv[1:2] if len(argv) > 1 and not argv[1].startswith("-") else []  # a subcommand (bench_gst)
    usage = script_help(tmp_path_factory, argv[0], *sub)
    for word in argv[1:]:
        if word.startswith("--"):
            assert word.split("=")[0] in usage, f"`{' '.join(argv)}`: no option {word}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_point_at_files(page: Path) -> None:
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", page.read_text()):
        assert (page.parent / target).exists(), f"{page.name}: broken link {target}"


def github_anchor(heading: str) -> str:
    """The anchor GitHub gives a heading: lowercase, punctuation dropped (backticks, quotes, commas,
    ...), each space a hyphen."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every heading anchor of a markdown page (headings inside code blocks are none; a repeated
    heading gets `-1`, `-2`, ... as on GitHub)."""
    out: set[str] = set()
    seen: dict[str, int] = {}
    fenced = False
    for line in page.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6}\s+(.*)", line)):
            anchor = github_anchor(m.group(1))
            n = seen.get(anchor, 0)
            seen[anchor] = n + 1
            out.add(anchor if n == 0 else f"{anchor}-{n}")
    return out


def test_github_anchor_rules() -> None:
    assert github_anchor("Recipe 1: the real data on a CPU") == "recipe-1-the-real-data-on-a-cpu"
    assert github_anchor("The `cpu` profile's GNN recipe, change by change") == (
        "the-cpu-profiles-gnn-recipe-change-by-change"
    )
    assert github_anchor("Graph Segment Training (GST)") == "graph-segment-training-gst"


# a page of the checkout named in a string the code prints: `README.md#anchor`, `docs/x.md#anchor`,
# or by its heading, `README.md ("Heading")` / `docs/x.md, "Heading"`
DOC_POINTER = re.compile(r"((?:README|docs/[\w-]+)\.md)(?:#([\w-]+)|,? \(?\"([^\"]+)\"\)?)")


def _printed_strings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every string constant of a Python file but its docstrings (f-strings' literal
    parts included): what the code can print."""
    tree = ast.parse(source)
    docs = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and ast.get_docstring(node, clean=False) is not None
    }
    return [
        (node.lineno, node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
    ]


def _code_pointers() -> list[tuple[str, str, str]]:
    """(where, page, anchor) of every pointer to a README or docs/ heading the code prints."""
    out = []
    for path in sorted((ROOT / "src").rglob("*.py")):
        source = path.read_text()
        if ".md" not in source:  # no pointer can be in it: most files are not parsed at collection
            continue
        for line, text in _printed_strings(source):
            for page, anchor, heading in DOC_POINTER.findall(text):
                out.append((f"{path.relative_to(ROOT)}:{line}", page, anchor or github_anchor(heading)))
    return out


CODE_POINTERS = _code_pointers()


def test_the_code_points_at_the_docs() -> None:
    """The pointer search finds what it looks for (the banner of `all` on synthetic data holds one)."""
    assert CODE_POINTERS


@pytest.mark.parametrize(("where", "page", "anchor"), CODE_POINTERS, ids=[w for w, _, _ in CODE_POINTERS])
def test_every_heading_the_code_points_at_exists(where: str, page: str, anchor: str) -> None:
    """A message that sends the user to a README or docs/ heading names one that exists (GitHub's
    anchor rules), so renaming a heading fails here, not in front of a user."""
    assert (ROOT / page).is_file(), f"{where}: {page} does not exist"
    assert anchor in anchors(ROOT / page), f"{where}: {page} has no heading #{anchor}"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_link_anchors_point_at_headings(page: Path) -> None:
    """`[text](file.md#anchor)` and `[text](#anchor)` land on a heading of that page."""
    for target, anchor in re.findall(r"\]\(([^)#:]*)#([^)]+)\)", page.read_text()):
        linked = page.parent / target if target else page
        if linked.suffix == ".md" and linked.is_file():
            assert anchor in anchors(linked), f"{page.name}: {target}#{anchor}: no such heading"


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_no_commit_hashes_outside_the_bench_log(page: Path) -> None:
    """The development history lives in bench/LOG.md. A figure's provenance names its commit, always
    as `commit abc1234` (tests/project/test_figures.py checks that each exists)."""
    found = re.findall(r"(\bcommit\s+)?(?<![\w/.-])([0-9a-f]{7,40})(?![\w-])", page.read_text())
    hashes = [h for provenance, h in found if not provenance]
    assert not [h for h in hashes if re.search(r"[a-f]", h) and re.search(r"\d", h)], page.name


USER_PAGES = [README, *DOCS, *EVIDENCE]
# a page of docs/ says what a user does and what to expect; tables of variants tried and per-program
# results live on docs/evidence/ pages. No page is exempt: the generated key table has a page of its
# own (docs/configuration.md, tests/report/test_config_show.py)
MAX_PAGE_LINES = 350


@pytest.mark.parametrize("page", DOCS, ids=[p.name for p in DOCS])
def test_docs_pages_are_guidance_not_evidence(page: Path) -> None:
    """A docs page opens with what to do, in about 300 lines; its evidence is a link away."""
    lines = len(page.read_text().splitlines())
    assert lines <= MAX_PAGE_LINES, f"{page.name}: {lines} lines; move evidence to docs/evidence/"


def test_evidence_pages_are_linked_from_the_docs() -> None:
    """Every evidence page is reached from a docs page (the sentence it supports links it)."""
    assert EVIDENCE
    linked = "".join(p.read_text() for p in DOCS)
    for page in EVIDENCE:
        assert f"evidence/{page.name}" in linked, f"no docs page links {page.relative_to(ROOT)}"


@pytest.mark.parametrize("page", USER_PAGES, ids=[str(p.relative_to(ROOT)) for p in USER_PAGES])
def test_no_issue_numbers_in_user_docs(page: Path) -> None:
    """A user does not know the project's issues: `grep -ciE 'issue [0-9]+'` gives 0 on every page."""
    hits = [line for line in page.read_text().splitlines() if re.search(r"issue [0-9]+", line, re.I)]
    assert not hits, f"{page.name}: issue numbers belong in bench/LOG.md: {hits[:3]}"


def _docs_and_comments(path: Path) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment of a Python file."""
    source = path.read_text()
    out = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                out.append((node.body[0].lineno, doc))
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            out.append((tok.start[0], tok.string))
    return out


def test_src_docstrings_do_not_point_at_shared() -> None:
    """../shared sits beside the development checkout only; src/ docstrings and comments must not cite it."""
    bad = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "src").rglob("*.py"))
        for line, text in _docs_and_comments(path)
        if "../shared" in text or "shared/docs" in text
    ]
    assert not bad, f"docstrings or comments pointing at ../shared: {bad}"
