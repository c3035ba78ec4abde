"""The Kaggle notebooks as Kaggle runs them: a fresh environment, offline, tpurank from the code dataset.

Each notebook runs in its own new virtualenv that has the heavy packages Kaggle's image has
(torch, numpy, lightgbm, ... linked from this environment) but NOT tpurank or torch_geometric: the
first cell must install both from the code dataset, which is copied into the fake /kaggle/input
the way `kaggle datasets create` uploads it (top-level files only: subfolders are skipped without
--dir-mode). The kernel and nbclient run under `unshare -n` (no network; IPC sockets); skipped
with the reason where that is not possible. Then: the training notebook writes a checked
submission and the report to "working" and keeps its intermediate files in "temp"; its models
are packed with build-models-dataset, and the inference notebook, attached to that dataset,
writes the same submission without training.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from helpers import FAST, ROOT
from runners import in_process

# the end-to-end budget of test_pipeline (helpers.FAST): same code paths, about half a minute on tiny data
NOTEBOOK_ARGS = " ".join(FAST)
# what a Kaggle image lacks; the rest of this environment stands in for its preinstalled packages
ABSENT = ("tpurank", "_tpurank", "__editable__", "torch_geometric")

DRIVER = """
import sys, nbformat
from jupyter_client.manager import KernelManager
from nbclient import NotebookClient
src, dst, cwd = sys.argv[1:4]
nb = nbformat.read(src, as_version=4)
nb.cells.insert(0, nbformat.v4.new_code_cell(
    "import importlib.util\\n"
    "assert importlib.util.find_spec('tpurank') is None, 'tpurank is preinstalled'\\n"
    "assert importlib.util.find_spec('torch_geometric') is None, 'torch_geometric is preinstalled'\\n"
    "import torch, lightgbm, pandas  # what Kaggle's image has"))
km = KernelManager(kernel_name="kaggle-like", transport="ipc")
try:
    NotebookClient(nb, km=km, timeout=500, resources={"metadata": {"path": cwd}}).execute()
finally:
    nbformat.write(nb, dst)
"""


def _run(cmd: list, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kw)


def _no_network_prefix() -> list[str]:
    if not shutil.which("unshare"):
        pytest.skip("unshare is not installed: cannot run the notebook without network")
    if _run(["unshare", "-n", "true"]).returncode != 0:
        pytest.skip("unshare -n failed (needs root or unprivileged user namespaces): cannot drop the network")
    return ["unshare", "-n"]


def kaggle_like_venv(where: Path) -> Path:
    """A new venv whose site-packages links this environment's packages except ABSENT (via a .pth)."""
    _run([sys.executable, "-m", "venv", "--without-pip", where]).check_returncode()
    farm = where / "kaggle-image-packages"
    farm.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.startswith(ABSENT) or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (farm / entry.name).symlink_to(entry)
    python = where / "bin" / "python"
    site = _run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).stdout.strip()
    (Path(site) / "kaggle-image.pth").write_text(f"{farm}\n")
    return python


def as_uploaded(built: Path, dest: Path) -> None:
    """Copy a dataset folder the way `kaggle datasets create -p` uploads it: top-level files only."""
    dest.mkdir(parents=True)
    for f in built.iterdir():
        if f.is_file():
            shutil.copy(f, dest / f.name)


def run_notebook(notebook: Path, python: Path, work: Path, env: dict[str, str]) -> dict:
    """Execute `notebook` with a kernel of `python`, offline; returns the executed notebook (JSON)."""
    prefix = _no_network_prefix()
    spec = work / "jupyter" / "kernels" / "kaggle-like"
    spec.mkdir(parents=True, exist_ok=True)
    argv = [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (spec / "kernel.json").write_text(
        json.dumps({"argv": argv, "display_name": "kaggle-like", "language": "python"})
    )
    (work / "driver.py").write_text(DRIVER)
    out = work / f"executed-{notebook.name}"
    full_env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(work / "home"),
        "JUPYTER_PATH": str(work / "jupyter"),
        "JUPYTER_RUNTIME_DIR": str(work / "runtime"),
        "PIP_CONFIG_FILE": os.devnull,  # no local indexes or constraints: only the dataset's wheels
        "PYTHONNOUSERSITE": "1",
        "OMP_NUM_THREADS": "1",
        **env,
    }
    r = _run(
        [*prefix, sys.executable, work / "driver.py", notebook, out, work],
        cwd=work,
        env=full_env,
        timeout=580,
    )
    executed = json.loads(out.read_text()) if out.exists() else {}
    if r.returncode != 0:
        errors = [
            o
            for c in executed.get("cells", [])
            for o in c.get("outputs", [])
            if o.get("output_type") == "error"
        ]
        detail = "\n".join(errors[0].get("traceback", [])[-5:]) if errors else r.stderr[-3000:]
        pytest.fail(f"{notebook.name} failed:\n{detail}")
    return executed


def _text(executed: dict, stream: str | None = None) -> str:
    parts = []
    for cell in executed["cells"]:
        for o in cell.get("outputs", []):
            if o.get("output_type") == "stream" and stream in (None, o.get("name")):
                parts.append(o["text"] if isinstance(o["text"], str) else "".join(o["text"]))
    return "".join(parts)


def test_notebooks_in_a_fresh_offline_environment(tiny_root: Path, tmp_path: Path) -> None:
    built = tmp_path / "built-code"
    b = in_process("build-code-dataset", "--dest", str(built), cwd=ROOT)
    if b.returncode != 0 and "pip download failed" in b.stderr:
        pytest.skip(f"cannot fetch the torch_geometric wheel for the code dataset: {b.stderr.strip()}")
    assert b.returncode == 0, b.stderr
    kaggle_input = tmp_path / "input"
    as_uploaded(built, kaggle_input / "tpurank-code")
    shutil.copytree(tiny_root, kaggle_input / "predict-ai-model-runtime")
    env = {
        "TPURANK_KAGGLE_INPUT": str(kaggle_input),
        "TPURANK_DATA": str(kaggle_input / "predict-ai-model-runtime"),
        "TPURANK_NOTEBOOK_ARGS": NOTEBOOK_ARGS,
    }

    # 1. train and submit on "Kaggle"
    working, temp = tmp_path / "working", tmp_path / "temp"
    working.mkdir()
    env1 = {**env, "TPURANK_KAGGLE_WORKING": str(working), "TPURANK_KAGGLE_TEMP": str(temp)}
    python = kaggle_like_venv(tmp_path / "venv-train")
    executed = run_notebook(ROOT / "notebooks" / "kaggle_submission.ipynb", python, tmp_path, env1)
    text = _text(executed)
    assert "installing torch_geometric-" in text and "tpurank-" in text  # the install cell ran
    assert "\r" not in text  # progress as whole lines in a notebook, no redrawn bars
    assert text.count("\n") < 400, f"{text.count(chr(10))} output lines"
    sub = working / "submission.csv"
    check = in_process("check-submission", str(sub), "--data-dir", env["TPURANK_DATA"], cwd=ROOT)
    assert check.returncode == 0, check.stdout + check.stderr
    assert (working / "submission.json").exists() and (working / "reports" / "validation.md").exists()
    assert not (working / "models").exists() and (temp / "tpurank" / "models" / "ensemble").is_dir()

    # 2. pack the models as build-models-dataset does on the user's machine, upload, infer
    packed = tmp_path / "built-models"
    m = in_process(
        "build-models-dataset",
        "--dest",
        str(packed),
        "--out-dir",
        str(temp / "tpurank"),
        "--allow-synthetic",  # the tiny data is synthetic
        cwd=ROOT,
    )
    assert m.returncode == 0, m.stderr
    as_uploaded(packed, kaggle_input / "tpurank-models")
    working2 = tmp_path / "working2"
    working2.mkdir()
    env2 = {**env, "TPURANK_KAGGLE_WORKING": str(working2), "TPURANK_KAGGLE_TEMP": str(tmp_path / "temp2")}
    python2 = kaggle_like_venv(tmp_path / "venv-infer")
    executed2 = run_notebook(
        ROOT / "notebooks" / "inference" / "kaggle_inference.ipynb", python2, tmp_path, env2
    )
    text2 = _text(executed2)
    assert "installing torch_geometric-" in text2 and "[infer] tpurank prepare --splits test" in text2
    assert (
        "tpurank train" not in text2
        and not (tmp_path / "temp2" / "tpurank" / "predictions" / "gnn" / "valid.npz").exists()
    )
    # the same models on the same test graphs: the same submission
    assert (working2 / "submission.csv").read_text() == sub.read_text()
