"""The README's commands as a newcomer types them: every fenced shell line parses against the CLI it
calls (a tpurank stage's parser, torchrun's `-m tpurank`, the kaggle client's own parser), and the
"Your own program" lines run as written in a project holding a demo `all`'s output."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import ROOT, clean_all_tree
from runners import in_process

from tpurank.cli import STAGES, stage_module, stage_parser

README = ROOT / "README.md"
# lines that call no tpurank or kaggle command: the shell, pip, a Python one-liner, the benchmarks
# (tests/project/test_bench_scripts.py runs their --help)
NOT_OURS = ("printf ", ".venv/bin/pip ", ".venv/bin/python -c ", ".venv/bin/python bench/")


def fenced_lines(text: str) -> list[str]:
    """Every command line of the ```bash blocks, comments and blank lines left out."""
    lines = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            if shlex.split(line, comments=True):
                lines.append(re.sub(r"\s+#\s.*$", "", line.strip()))  # as typed, its comment left out
    return lines


def section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else None]


# run in a child: importing kaggle fixes its config folder from $HOME for the life of the process,
# which would leak into the worker's later tests of the client (tests/kaggle/test_kaggle_server.py)
KAGGLE_PARSE = """
import argparse, contextlib, io, json, sys
with contextlib.redirect_stdout(io.StringIO()):  # importing kaggle prints its auth help
    from kaggle import cli
class Parsed(Exception):
    pass
original = argparse.ArgumentParser.parse_args
def parse_args(self, args=None, namespace=None):
    original(self, args, namespace)
    raise Parsed
argparse.ArgumentParser.parse_args = parse_args
results = []
for words in json.loads(sys.argv[1]):
    sys.argv = ["kaggle", *words]
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            cli.main()
        results.append("never parsed")
    except Parsed:
        results.append("")
    except SystemExit as e:
        results.append(f"exit {e.code}: {err.getvalue()[-300:]}")
print(json.dumps(results))
"""


def kaggle_problems(commands: list[list[str]]) -> list[str]:
    """For each kaggle command line (its words after `kaggle`), "" when the client's own parser accepts it."""
    r = subprocess.run(
        [sys.executable, "-c", KAGGLE_PARSE, json.dumps(commands)],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": tempfile.mkdtemp(prefix="kaggle-parse-")},
        timeout=120,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def tpurank_parses(words: list[str]) -> None:
    name, args = words[0], words[1:]
    if name in ("all", "test", "setup", "help") and name not in STAGES:
        assert name in ("test", "setup"), name  # run.sh's own
        return
    assert name in STAGES, f"{name}: no such stage"
    parser = stage_parser(name, stage_module(name))
    with contextlib.redirect_stderr(io.StringIO()) as err:
        try:
            parser.parse_args(args)
        except SystemExit:
            raise AssertionError(f"tpurank {shlex.join(words)}: {err.getvalue()[-500:]}") from None


def test_every_readme_command_parses() -> None:
    lines = fenced_lines(README.read_text())
    assert len(lines) > 25
    checked = 0
    kaggle: list[list[str]] = []
    for line in lines:
        words = shlex.split(line)
        if line.startswith(NOT_OURS):
            continue
        if words[0] == "./run.sh":
            tpurank_parses(words[1:])
        elif words[0] == ".venv/bin/torchrun":
            tpurank_parses(words[words.index("tpurank") + 1 :])
        elif words[0] == ".venv/bin/kaggle":
            kaggle.append(words[1:])
        else:
            raise AssertionError(f"README: a command no test parses: {line}")
        checked += 1
    problems = kaggle_problems(kaggle)
    assert [(shlex.join(k), p) for k, p in zip(kaggle, problems, strict=True) if p] == []
    assert len(kaggle) >= 5 and checked > 20


def test_readme_kaggle_lines_name_no_placeholder_owner() -> None:
    """The Kaggle owner comes from the credentials the client reads, never an exported variable."""
    recipe = section(README.read_text(), "Recipe 3: Kaggle")
    assert "$KAGGLE_USERNAME" not in recipe and "YOUR_KAGGLE_USERNAME" not in recipe
    for line in fenced_lines(recipe):
        if " kernels status " in line or " kernels output " in line:
            assert "/" not in shlex.split(line)[3], line  # `kaggle kernels status SLUG`: the owner is yours


def run_line(line: str, home: Path) -> subprocess.CompletedProcess:
    """One README line in the project `home`: `./run.sh STAGE ...` in this process, `printf` by the shell."""
    words = shlex.split(line)
    if words[0] == "./run.sh":
        return in_process(*words[1:], cwd=home)
    return subprocess.run(line, shell=True, cwd=home, capture_output=True, text=True)


def test_your_own_program_lines_run_as_written(
    tiny_root: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the quick start (the demo's outputs in the project root, its data in data/synthetic-demo),
    each line of "Your own program" runs as written."""
    clean = clean_all_tree(tmp_path_factory, tiny_root)
    home = tmp_path / "project"
    shutil.copytree(clean / "run", home, symlinks=True)
    shutil.copytree(clean / "data", home / "data" / "synthetic-demo")
    monkeypatch.setenv("TPURANK_HOME", str(home))
    lines = fenced_lines(section(README.read_text(), "Your own program"))
    assert [shlex.split(x)[:2] for x in lines if x.startswith("./run.sh")] == [
        ["./run.sh", "rank"],
        ["./run.sh", "rank"],
        ["./run.sh", "tune"],
    ]
    outputs = []
    for line in lines:
        r = run_line(line, home)
        assert r.returncode == 0, f"{line}\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}"
        assert "Traceback" not in r.stderr
        outputs.append(r)
    graph = "dlrm_batch_128_train"
    assert graph in outputs[0].stdout and "calibrated on 6 measured configs" in outputs[2].stdout
    assert "measurements to come within" in outputs[3].stdout  # the replay's summary
