"""The hostile harness: one case per family of bad input or fault, run through the real CLI on tiny
data, each classified as "one-line error", "correct result" or "defect" (docs/stages.md#bad-input
lists every kind tried and the test that covers it).

A case is a defect when the command hangs (a timeout), prints a traceback or more than one error
line, exits 0 without the promised output, or leaves something it must not touch changed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from helpers import ROOT, SAMPLE_ROOT, TRAINED_COLLECTION
from runners import forked

from tpurank.cli import RUN_WIDE_USED
from tpurank.core.paths import Paths

SAMPLE_PB = SAMPLE_ROOT / "pb" / "module_tuning_data_layout.pb"
TIMEOUT = 180  # seconds: a hang is a defect, not a stuck suite
ONE = ["--collections", TRAINED_COLLECTION]


@dataclass
class Case:
    """A setup that breaks something in a private copy, the command that meets it, and (for a
    command that succeeds) the check that its result is right."""

    family: str
    setup: Callable[[Paths], list[str]]  # returns the command's arguments
    check: Callable[[Paths], bool] | None = None  # a correct result (exit 0) passes it
    trained: bool = False  # starts from a copy of the trained tree (gnn, lgbm, ensemble of ONE)
    says: Callable[[Paths], str] | None = None  # what its one error line must say (then exit 1)


def _cli(paths: Paths, *args: str) -> list[str]:
    """The command with the copy's data root and out folder, each where the stage takes it (a stage
    refuses a run-wide option it does not use; `check PATH` names its own files)."""
    uses = RUN_WIDE_USED[args[0]]
    data = "data_dir" in uses and not (args[0] == "check" and len(args) > 1)
    out = "out_dir" in uses
    return [*args, *(["--data-dir", str(paths.data)] * data), *(["--out-dir", str(paths.out)] * out)]


def _run(args: list[str]) -> subprocess.CompletedProcess:
    """The command in a process of its own (a hang or a native crash is its own), forked from this
    one: started in milliseconds, where a fresh interpreter pays its imports again."""
    return forked(*args, cwd=ROOT, timeout=TIMEOUT)


def fifo_in_data(p: Paths) -> list[str]:
    os.mkfifo(p.npz / "tile/xla/train/x.npz")
    return _cli(p, "prepare", "--jobs", "1")


def fifo_checked(p: Paths) -> list[str]:
    os.mkfifo(p.npz / "tile/xla/valid/y.npz")
    return _cli(p, "check", str(p.npz))


def fifo_submission(p: Paths) -> list[str]:
    fifo = p.out / "sub.csv"
    os.mkfifo(fifo)
    return _cli(p, "check-submission", str(fifo))


def symlink_loop(p: Paths) -> list[str]:
    (p.npz / "layout/xla/default/train/loop").symlink_to(p.npz / "layout/xla/default")
    return _cli(p, "prepare", "--jobs", "1")


def empty_npz(p: Paths) -> list[str]:
    (p.npz / "tile/xla/train/empty.npz").write_bytes(b"")
    return _cli(p, "prepare", "--jobs", "1")


def unreadable_npz(p: Paths) -> list[str]:
    f = next((p.npz / "tile/xla/train").glob("*.npz"))
    f.chmod(0)
    return _cli(p, "prepare", "--jobs", "1")


def config(*sets: str) -> Callable[[Paths], list[str]]:
    def setup(p: Paths) -> list[str]:
        return _cli(p, "train", "--model", "gnn", *ONE, *[x for s in sets for x in ("--set", s)])

    return setup


def eval_indices_number(p: Paths) -> list[str]:
    folder = p.data / "eval_indices"
    folder.mkdir(exist_ok=True)
    stem = next((p.npz / "layout/xla/random/valid").glob("*.npz")).stem
    (folder / "xla_random.json").write_text(f'{{"{stem}": 5}}')
    return _cli(p, "prepare", "--jobs", "1")


def inverse_truncated(p: Paths) -> list[str]:
    f = next(p.tabular.rglob("valid.inverse.npz"))
    f.write_bytes(f.read_bytes()[:40])
    return _cli(p, "predict", "--model", "lgbm", "--split", "valid", "--force", *ONE)


def model_txt_truncated(p: Paths) -> list[str]:
    f = p.model_dir("lgbm", TRAINED_COLLECTION) / "model.txt"
    f.write_bytes(f.read_bytes()[:200])
    return _cli(p, "predict", "--model", "lgbm", "--split", "valid", "--force", *ONE)


def foreign_gnn(p: Paths) -> list[str]:
    shutil.copytree(p.model_dir("gnn", TRAINED_COLLECTION), p.model_dir("gnn", "layout:nlp:random"))
    return _cli(p, "predict", "--model", "gnn", "--split", "valid", "--collections", "layout:nlp:random")


def weights_empty(p: Paths) -> list[str]:
    (p.model_dir("ensemble", TRAINED_COLLECTION) / "weights.json").write_text("{}")
    return _cli(p, "predict", "--model", "ensemble", "--split", "valid", *ONE)


def sidecar_beside_pb_output(p: Paths) -> list[str]:
    if not SAMPLE_PB.is_file():
        pytest.skip(f"real sample not found at {SAMPLE_PB}")
    (p.out / "m.json").write_text("my own notes")
    return [*_cli(p, "featurize-pb", str(SAMPLE_PB), str(p.out / "m.npz"))]


def data_changed_after_prepare(p: Paths) -> list[str]:
    import numpy as np

    f = next((p.npz / "layout/xla/random/test").glob("*.npz"))
    with np.load(f) as z:
        arrays = {k: z[k] for k in z.files}
    for k in ("node_config_feat", "config_runtime"):
        arrays[k] = arrays[k][::-1]
    np.savez(f, **arrays)
    return _cli(p, "predict", "--model", "random", "--split", "test", "--force")


def comma_in_a_file_name(p: Paths) -> list[str]:
    src = next((p.npz / "tile/xla/test").glob("*.npz"))
    shutil.copy(src, src.with_name('a,b"c.npz'))
    sample = p.sample_submission
    lines = sample.read_text().splitlines()
    sample.write_text("\n".join([lines[0], '"tile:xla:a,b""c",0;1;2;3;4', *lines[1:]]) + "\n")
    return _cli(p, "prepare", "--jobs", "1")


def _m_json_kept(p: Paths) -> bool:
    return (p.out / "m.json").read_text() == "my own notes" and (p.out / "m.npz").is_file()


CASES = [
    Case("non-regular file in the data (FIFO)", fifo_in_data),
    Case("non-regular file given to check", fifo_checked),
    Case("non-regular file given to check-submission", fifo_submission),
    Case("folder symlink loop in the data", symlink_loop, lambda p: True),
    Case("zero-byte npz", empty_npz),
    Case(
        "unreadable npz (permission denied; root reads it anyway)",
        unreadable_npz,
        lambda p: os.geteuid() == 0,
    ),
    Case("config: lr = inf", config("gnn.lr=inf")),
    Case("config: lr = nan", config("gnn.lr=nan")),
    Case("config: heads not dividing hidden", config("gnn.hidden=30", "gnn.heads=4")),
    Case("config: ensemble.models names ensemble", config("ensemble.models=['ensemble']")),
    Case("eval_indices maps a graph to a number", eval_indices_number),
    Case("our file broken: truncated valid.inverse.npz", inverse_truncated, lambda p: True, trained=True),
    Case(
        "our file broken: truncated lgbm model.txt",
        model_txt_truncated,
        trained=True,
        says=lambda p: (
            f"{p.model_dir('lgbm', TRAINED_COLLECTION) / 'model.txt'}: not the file training wrote"
        ),
    ),
    Case(
        "foreign artifact: gnn model of another collection",
        foreign_gnn,
        trained=True,
        says=lambda p: f"a model of '{TRAINED_COLLECTION}', not 'layout:nlp:random'",
    ),
    Case(
        "our file broken: ensemble weights.json {}",
        weights_empty,
        trained=True,
        says=lambda p: str(p.model_dir("ensemble", TRAINED_COLLECTION) / "weights.json"),
    ),
    Case("user file beside an output (featurize-pb m.json)", sidecar_beside_pb_output, _m_json_kept),
    Case("data changed under the same name after prepare", data_changed_after_prepare),
    Case("comma and quote in a graph file name", comma_in_a_file_name, lambda p: True),
]


def classify(case: Case, paths: Paths) -> tuple[str, str]:
    """(outcome, what was seen) of one case on a private copy."""
    args = case.setup(paths)
    try:
        r = _run(args)
    except subprocess.TimeoutExpired:
        return "defect", f"hung for {TIMEOUT} s"
    errors = [ln for ln in r.stderr.splitlines() if ": error: " in ln]
    if "Traceback" in r.stderr or r.returncode < 0:
        return "defect", r.stderr[-1500:] or f"killed by signal {-r.returncode}"
    if r.returncode == 0:
        ok = case.check is not None and case.check(paths)
        return ("correct result", "exit 0") if ok else ("defect", "exit 0 " + r.stderr[-800:])
    # `check` and `check-submission` list each problem on stdout, one line per file
    errors += [ln for ln in r.stdout.splitlines() if ln.startswith((str(paths.data), str(paths.out)))]
    if errors and any(str(paths.data) in e or str(paths.out) in e or "config:" in e for e in errors):
        if case.says is not None and (r.returncode != 1 or case.says(paths) not in errors[0]):
            return "defect", f"exit {r.returncode}, not one line saying {case.says(paths)!r}: {errors}"
        return "one-line error", errors[0]
    return "defect", r.stderr[-1500:]


@pytest.mark.parametrize("case", CASES, ids=[c.family for c in CASES])
def test_hostile_case(case: Case, request: pytest.FixtureRequest) -> None:
    paths = request.getfixturevalue("trained" if case.trained else "run_copy")
    outcome, seen = classify(case, paths)
    print(f"{case.family}: {outcome}: {seen.splitlines()[0] if seen else ''}")
    assert outcome != "defect", seen
