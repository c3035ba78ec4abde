"""Progress: redrawn bars on a terminal; plain whole lines, a few at most, in a notebook or a log file."""

from __future__ import annotations

import io
import re
import time
from pathlib import Path

from tpurank.core.progress import tqdm

SRC = Path(__file__).resolve().parents[2] / "src" / "tpurank"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_log_file_gets_a_few_whole_lines() -> None:
    out = io.StringIO()
    for _ in tqdm(range(2000), desc="work", file=out):
        pass
    text = out.getvalue()
    assert "\r" not in text
    lines = text.splitlines()
    assert 1 <= len(lines) <= 3, lines  # start and end (no time for a periodic line)
    assert "2000/2000" in lines[-1] and text.endswith("\n")


def test_log_file_gets_a_line_every_interval(monkeypatch) -> None:
    monkeypatch.setenv("TPURANK_PROGRESS_SECONDS", "0.05")
    out = io.StringIO()
    with tqdm(total=30, desc="slow", file=out, leave=False) as bar:
        for _ in range(30):
            time.sleep(0.01)
            bar.update()
    lines = out.getvalue().splitlines()
    assert 3 <= len(lines) <= 12, lines  # about one line per 0.05 s over 0.3 s, never one per update
    assert "30/30" in lines[-1]


def test_postfix_updates_do_not_print_a_line_each() -> None:
    """LightGBM's callback sets a postfix every round; tqdm refreshes on each set_postfix."""
    out = io.StringIO()
    with tqdm(total=300, desc="rounds", file=out) as bar:
        for i in range(300):
            bar.update()
            bar.set_postfix(score=f"{i / 300:.4f}")
    lines = out.getvalue().splitlines()
    assert 1 <= len(lines) <= 3, lines
    assert "300/300" in lines[-1] and "score=0.9967" in lines[-1]


def test_a_disabled_bar_accepts_every_call() -> None:
    out = io.StringIO()
    with tqdm(total=3, file=out, disable=True) as bar:
        bar.update()
        bar.set_postfix(loss="0.1")
        bar.set_description("x")
    assert out.getvalue() == ""


def test_terminal_keeps_the_redrawn_bar() -> None:
    out = Terminal()
    for _ in tqdm(range(50), file=out, mininterval=0):
        pass
    assert out.getvalue().count("\r") > 10


def test_every_module_uses_the_line_aware_tqdm() -> None:
    direct = [
        str(f.relative_to(SRC))
        for f in SRC.rglob("*.py")
        if f.name != "progress.py" and re.search(r"^\s*from tqdm import|^\s*import tqdm", f.read_text(), re.M)
    ]
    assert direct == []


def test_a_message_written_while_a_bar_is_open_leaves_no_carriage_return() -> None:
    """tqdm.write() clears open bars with "\\r"; in line mode there is nothing to clear (the GNN
    trainer writes a line per validation while its step bar is open)."""
    import io

    from tpurank.core.progress import tqdm

    out = io.StringIO()
    bar = tqdm(total=10, desc="steps", file=out)
    bar.update(3)
    tqdm.write("validation line", file=out)
    bar.update(7)
    bar.close()
    assert "\r" not in out.getvalue() and "validation line\n" in out.getvalue()
