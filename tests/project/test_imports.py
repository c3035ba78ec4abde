"""Imports, in one fresh interpreter (one start-up for four checks):

- every tpurank module and the kaggle client the stages load lazily import from the installed
  environment (kaggle 2.2.4 imports `six` without declaring it: this fails when six is missing);
- no module reads a `TPURANK_*` variable as it is imported: every variable is set to a value its
  check refuses (a read at import runs before the CLI's check: a traceback, not its one line);
- the CLI and a training stage that waits on its collections' processes (big data) load no data
  library: the stage's process stays light beside the training (docs/scale.md, "Memory on the CPU");
- `all`'s own process stays light: the modules it imports (each stage's face: its `Options`) hold
  none of the heavy libraries nor a data library, which only the steps it runs (in processes of
  their own on big data) load.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tpurank.core import env
from tpurank.core.errors import TpurankError

KAGGLE = ["kaggle", "kaggle.api.kaggle_api_extended", "kagglesdk"]
# loaded by the steps, never by `all`'s own process: each holds tens of MB (docs/scale.md)
HEAVY = ["torch", "torch_geometric", "lightgbm", "matplotlib", "scipy.stats"]
# nor by the CLI or a waiting training stage
DATA_LIBRARIES = ["pandas", "pyarrow", "scipy"]

SCRIPT = """
import importlib, json, pkgutil, sys
import tpurank.cli, tpurank.run.stages, tpurank.train.cli, tpurank.train.stage, tpurank.train.collection_processes
stage = sorted(m for m in sys.modules if m in HEAVY + DATA_LIBRARIES)
import tpurank.run.pipeline
supervisor = sorted(m for m in sys.modules if m in HEAVY + DATA_LIBRARIES)
import tpurank
names = [m.name for m in pkgutil.walk_packages(tpurank.__path__, "tpurank.") if not m.name.endswith("__main__")]
failed = []
for name in names + KAGGLE:
    try:
        importlib.import_module(name)
    except BaseException as e:
        failed.append(f"{name}: {type(e).__name__}: {e}")
print(json.dumps({"modules": len(names), "failed": failed, "stage": stage, "supervisor": supervisor}))
"""


def garbage(tmp_path: Path) -> dict[str, str]:
    """A value each variable's check refuses: a word for numbers and choices, a file for folders."""
    (tmp_path / "a-file").write_text("")
    return {v.name: str(tmp_path / "a-file") if isinstance(v, env.Folder) else "1.5x" for v in env.VARIABLES}


def imported(tmp: Path) -> dict:
    """The script's findings, run with every variable set to a value its check refuses."""
    code = f"HEAVY = {HEAVY!r}\nDATA_LIBRARIES = {DATA_LIBRARIES!r}\nKAGGLE = {KAGGLE!r}\n{SCRIPT}"
    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp), **garbage(tmp)},
        timeout=300,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_one_fresh_interpreter_imports_everything_light_and_reads_no_variable(tmp_path: Path) -> None:
    """One test, not three: under xdist a shared fixture would start the interpreter once per worker."""
    for name, value in garbage(tmp_path).items():  # each value is refused when read ...
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv(name, value)
            with pytest.raises(TpurankError, match=rf"^\${name} must be "):
                next(v for v in env.VARIABLES if v.name == name).read()
    found = imported(tmp_path)
    assert found["modules"] > 100
    assert found["failed"] == []  # ... no module read one as it was imported, and every module imports
    assert found["stage"] == []  # the CLI and a waiting training stage load no library of data
    assert found["supervisor"] == []  # `all`'s own modules load none of the heavy or data libraries


def test_the_heavy_list_names_real_modules() -> None:
    """A renamed library would make the check above pass vacuously."""
    assert [m for m in HEAVY + DATA_LIBRARIES if importlib.util.find_spec(m) is None] == []
