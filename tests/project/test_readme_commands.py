"""The README's commands as a newcomer types them: every fenced shell line parses against the CLI it
calls (a tpurank stage's parser, torchrun's `-m tpurank`, the kaggle client's own parser), and the
"Your own program" lines run as written in a project holding a demo `all`'s output."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from helpers import BUDGET, ROOT, clean_all_tree
from kaggle_stand_in import KEY, USER, KaggleStandIn, client_env, serving
from runners import forked, in_process

from tpurank.cli import COMMANDS, command_module, command_parser

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
    if name in ("all", "test", "setup", "help") and name not in COMMANDS:
        assert name in ("test", "setup"), name  # run.sh's own
        return
    assert name in COMMANDS, f"{name}: no such command"
    parser = command_parser(name, command_module(name))
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


# the `kaggle` command line, as .venv/bin/kaggle runs it, in a child of its own (importing kaggle fixes
# its config folder for the process); its client reaches the local stand-in as tpurank's own does
# (`tpurank.data.download.api_class`: kaggle 2.2.4 ignores KAGGLE_API_ENVIRONMENT=TEST). Each line of
# argv's JSON runs in order; the first that fails ends the run
KAGGLE_RUN = """
import contextlib, io, json, sys
with contextlib.redirect_stdout(io.StringIO()):  # importing kaggle prints its auth help when it finds none
    import kaggle
    from kaggle import cli
from tpurank.data.download import api_class
kaggle.api.__class__ = api_class()
results = []
for words in json.loads(sys.argv[1]):
    sys.argv = ["kaggle", *words]
    out, err, code = io.StringIO(), io.StringIO(), 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            cli.main()
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    results.append([code, out.getvalue(), err.getvalue()])
    if code:
        break
print(json.dumps(results))
"""
# the folders of the README's commands a test owns: README placeholder -> the test's folder name
OWNED = {
    "/path/to/predict-ai-model-runtime": "second-data",
    "/big/disk/tpurank-work": "work",
    "/tmp/infer-run": "infer-run",
}
NOTEBOOK_DATA = "/kaggle/input/predict-ai-model-runtime"  # where the notebook's submission ranked


def owned(line: str, tmp: Path) -> str:
    for placeholder, name in OWNED.items():
        line = line.replace(placeholder, str(tmp / name))
    return line


def budget_profile(folder: Path) -> Path:
    """The CPU profile with the suite's training budget (helpers.BUDGET, one seed): a profile file
    `all` reads as a user's run reads configs/profile-cpu.toml."""
    from tpurank.core.config_files import apply_overrides, read_toml
    from tpurank.core.paths import preset_file
    from tpurank.core.toml_write import to_toml

    data = read_toml(preset_file("profile-cpu.toml"))
    for section, keys in apply_overrides({}, [*BUDGET, "gnn.seeds=1"]).items():
        data.setdefault(section, {}).update(keys)
        for tables in data.get("collections", {}).values():  # as a top-level --set: every collection
            for key in keys:
                tables.get(section, {}).pop(key, None)
    path = folder / "profile-budget.toml"
    path.write_text(to_toml(data))
    return path


def tiny_real_looking(folder: Path) -> Path:
    """A second tiny tree (another seed) without the synthetic marker: the data Recipe 1 names."""
    from tpurank.core.paths import SYNTH_MARKER
    from tpurank.synth import generate

    generate(folder, scale="tiny", seed=1)
    (folder / SYNTH_MARKER).unlink()
    return folder


class Walk:
    """The README's lines run in order in one project: tpurank's forked (each a process of its own,
    as `./run.sh` is), `kaggle`'s through KAGGLE_RUN, the shell's by the shell."""

    def __init__(self, home: Path, tmp: Path, env: dict[str, str]) -> None:
        self.home, self.tmp, self.env = home, tmp, env

    def tpurank(self, line: str) -> subprocess.CompletedProcess:
        words = shlex.split(owned(line, self.tmp))
        assert words[0] == "./run.sh", line
        r = forked(*words[1:], env=self.env, cwd=self.home, timeout=600)
        if r.returncode != 0 and "pip download failed" in r.stderr:  # build-code-dataset, offline
            pytest.skip(f"cannot fetch the torch_geometric wheel for the code dataset: {r.stderr.strip()}")
        assert r.returncode == 0, f"{line}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
        assert "Traceback" not in r.stderr, r.stderr
        return r

    def kaggle(self, lines: list[str]) -> list[tuple[int, str, str]]:
        words = [shlex.split(owned(x, self.tmp))[1:] for x in lines]
        r = subprocess.run(
            [sys.executable, "-c", KAGGLE_RUN, json.dumps(words)],
            capture_output=True,
            text=True,
            env=self.env,
            cwd=self.home,
            timeout=300,
        )
        assert r.returncode == 0, r.stderr[-3000:]
        results = [tuple(x) for x in json.loads(r.stdout.strip().splitlines()[-1])]
        for line, (code, out, err) in zip(lines, results, strict=False):
            assert code == 0 and "error" not in (out + err).lower(), f"{line}\n{out}\n{err}"
        assert len(results) == len(lines)
        return results


def as_the_notebook_wrote(infer_run: Path) -> dict[str, bytes]:
    """The inference notebook's output files: the submission `infer` writes from the same models
    (tests/kaggle/test_kaggle_notebooks.py: the notebook writes the same bytes) and its sidecar,
    recording the data where the notebook ranked it."""
    csv = infer_run / "submissions" / "submission.csv"
    sidecar = json.loads(csv.with_suffix(".json").read_text())
    sidecar["data_root"] = NOTEBOOK_DATA
    return {"submission.csv": csv.read_bytes(), "submission.json": json.dumps(sidecar).encode()}


def uploaded_files(folder: Path) -> dict[str, bytes]:
    """What `kaggle datasets create -p FOLDER` uploads: its top-level files but the metadata."""
    return {
        f.name: f.read_bytes() for f in folder.iterdir() if f.is_file() and f.name != "dataset-metadata.json"
    }


def user_env(tmp_path: Path, home: Path) -> dict[str, str]:
    """A user's shell for the walk: Kaggle credentials only in a kaggle.json (no $KAGGLE_USERNAME),
    the project folder `home`, pip's own settings and proxies passed on (build-code-dataset fetches a
    wheel), localhost reached directly."""
    config = tmp_path / "kaggle-config"
    config.mkdir()
    (config / "kaggle.json").write_text(json.dumps({"username": USER, "key": KEY}))
    os.chmod(config / "kaggle.json", 0o600)
    passed = {k: v for k, v in os.environ.items() if k.startswith("PIP_") or k.lower().endswith("_proxy")}
    no_proxy = ",".join(x for x in ("localhost,127.0.0.1", os.environ.get("NO_PROXY", "")) if x)
    extra = {"NO_PROXY": no_proxy, "no_proxy": no_proxy, "KAGGLE_CONFIG_DIR": str(config)}
    return client_env(tmp_path / "user-home", **passed, **extra, TPURANK_HOME=str(home), OMP_NUM_THREADS="1")


def walk_recipe_3(walk: Walk, server: KaggleStandIn, recipe: list[str], second: Path) -> None:
    """Recipe 3's lines in order after the quick start, each outcome checked where it is made."""
    home, tmp = walk.home, walk.tmp
    r = walk.tpurank(recipe[0])  # the quick start's submission, checked against its recorded data
    assert "Successfully submitted" in r.stdout
    assert server.uploaded == (home / "submissions" / "submission.csv").read_bytes()
    walk.tpurank(recipe[1])  # all --data-dir: the second tree
    assert json.loads((home / "submissions" / "submission.json").read_text())["data_root"] == str(second)
    walk.tpurank(recipe[2])  # build-models-dataset: owned by the kaggle.json's user
    models, code = home / "dist" / "kaggle-models", home / "dist" / "kaggle-code"
    assert json.loads((models / "dataset-metadata.json").read_text())["id"] == f"{USER}/tpurank-models"
    r = walk.tpurank(recipe[3])  # build-code-dataset
    kernel = code / "kernels" / "tpurank-inference" / "kernel-metadata.json"
    assert json.loads(kernel.read_text())["id"] == f"{USER}/tpurank-inference"
    r = walk.tpurank(recipe[4])  # infer, into the test's folder
    assert "[infer] models from" in r.stderr
    server.state.outputs[f"{USER}/tpurank-inference"] = as_the_notebook_wrote(tmp / "infer-run")
    kaggle_lines = [x for x in recipe if x.startswith(".venv/bin/kaggle ")]
    assert recipe[5 : 5 + len(kaggle_lines)] == kaggle_lines and len(kaggle_lines) == 5
    results = walk.kaggle(kaggle_lines)
    assert server.state.datasets == {
        f"{USER}/tpurank-models": uploaded_files(models),
        f"{USER}/tpurank-code": uploaded_files(code),
    }
    assert "Kernel version 1 successfully pushed" in results[2][1]
    pushed = server.state.kernels[f"{USER}/tpurank-inference"].request
    assert set(pushed["datasetDataSources"]) == set(server.state.datasets)  # both attached, both there
    assert 'has status "KernelWorkerStatus.COMPLETE"' in results[3][1]
    fetched = home / "kaggle-output" / "submission.csv"
    assert fetched.read_bytes() == (tmp / "infer-run" / "submissions" / "submission.csv").read_bytes()
    assert recipe[5 + len(kaggle_lines) :] == [recipe[-1]]
    r = walk.tpurank(recipe[-1])  # submit the notebook's CSV, checked against the data named
    assert "Successfully submitted" in r.stdout and server.uploaded == fetched.read_bytes()
    assert "checked without its data" not in r.stderr


def test_recipe_3_runs_as_written_after_the_quick_start_and_after_recipe_1(
    tiny_root: Path, tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recipe 3's lines in order against the local Kaggle stand-in (tests/kaggle_stand_in.py) in a
    project holding a demo `all`'s output; then Recipe 1's lines and Recipe 3's first submit again.
    Each line runs as written, with the test's own folders for the README's placeholders. The one
    difference from a user's run: the CPU profile trains with the suite's budget (budget_profile),
    so the `all --data-dir` line takes seconds."""
    import tpurank.core.profiles

    clean = clean_all_tree(tmp_path_factory, tiny_root)
    home = tmp_path / "project"
    shutil.copytree(clean / "run", home, symlinks=True)
    shutil.copytree(clean / "data", home / "data" / "synthetic-demo")
    second = tiny_real_looking(tmp_path / OWNED["/path/to/predict-ai-model-runtime"])
    profile = budget_profile(tmp_path)
    monkeypatch.setattr(tpurank.core.profiles, "preset_file", lambda name: profile)  # forked: inherited
    # a forked line imports kaggle afresh: an import inherited from this worker (another test's
    # in-process build-code-dataset) keeps the config folder of that test's HOME, not kaggle-config
    for name in [m for m in sys.modules if m.split(".")[0] in ("kaggle", "kagglesdk")]:
        monkeypatch.delitem(sys.modules, name)
    text = README.read_text()
    recipe = fenced_lines(section(text, "Recipe 3: Kaggle"))
    walk = Walk(home, tmp_path, user_env(tmp_path, home))
    with serving(tiny_root) as server:
        walk_recipe_3(walk, server, recipe, second)
    # after Recipe 1 (the same data, named again): Recipe 3's first line checks the CSV `all` wrote
    # against the data recorded with it, the second tree, never the synthetic demo at hand
    with serving(tiny_root) as server:
        for line in fenced_lines(section(text, "Recipe 1: the real data on a CPU")):
            walk.tpurank(line)
        r = walk.tpurank(recipe[0])
        assert f"data: {second}" in r.stderr and "synthetic-demo" not in r.stderr
        assert "Successfully submitted" in r.stdout
        assert server.uploaded == (home / "submissions" / "submission.csv").read_bytes()
