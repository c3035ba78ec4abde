"""Helpers shared by the test files (fixtures live in conftest.py): the real sample's location, the
command line driven in-process or as a child, the one-line error checks, hand-made GNN inputs, the
benchmarks' --help, and trees built once per test session and shared by the xdist workers.

Test files import from here, never from each other: a test file is free to move or be renamed. The
test files sit in folders named for the package rooms they test (tests/gnn/, tests/run/, ...);
`from helpers import ...` works from each because pytest puts the folder of the rootdir's
conftest.py (tests/) on sys.path.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import subprocess
import sys
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.npz import LayoutGraph

if TYPE_CHECKING:
    from tpurank.core.config import Config
    from tpurank.gnn.nets.gnn_ranker import GnnRanker
    from tpurank.prepare.cache import PreparedGraph

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_ROOT = ROOT.parent / "shared" / "data" / "tpugraphs-sample"
SAMPLE_NPZ = SAMPLE_ROOT / NPZ_SUBDIR
NPZ = NPZ_SUBDIR
BENCH = ROOT / "bench"
# bench/'s rooms (bench/README.md): the scripts a user runs, the figures' renderer, the shared helpers
BENCH_ROOMS = ("runs", "figures", "lib")

# Small budgets so a whole `all` runs in well under a minute on tiny data; same code paths as the defaults.
# One LightGBM thread: its default, a thread per core, spins beside a busy worker (13 s, not 0.3 s).
BUDGET = (
    "gnn.max_steps=16",
    "gnn.eval_every=8",
    "gnn.hidden=16",
    "baseline.max_steps=8",
    "lgbm.num_boost_round=40",
    "lgbm.threads=1",
)
FAST = [arg for item in BUDGET for arg in ("--set", item)]

# the trained tree (conftest.trained_tree): one collection's gnn (a few steps, one seed) and lgbm,
# their valid predictions and the ensemble of the two; the stderr of training kept in TRAIN_LOG
TRAINED_COLLECTION = "layout:xla:random"
TRAINED_SMALL = ("gnn.max_steps=6", "gnn.eval_every=3", "gnn.hidden=16", "gnn.seeds=1", "lgbm.threads=1")
TRAINED_ENSEMBLE = "ensemble.models=['lgbm','gnn']"
TRAIN_LOG = "train.log"


def import_statements(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of a parsed module, at any depth (in functions, classes, if/try/with/
    match blocks). Only statement lists are visited, as an import is never part of an expression:
    a few times faster than `ast.walk`, which the collection of every worker would pay."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(node, field, ()))


def bench_on_path() -> None:
    """bench/'s rooms on sys.path, so a test imports a bench module by its name as the scripts do
    (bench/ is no package: a script finds its own room's modules there, and puts bench/lib there)."""
    for room in BENCH_ROOMS:
        if str(BENCH / room) not in sys.path:
            sys.path.insert(0, str(BENCH / room))


def sample_files() -> list[Path]:
    """Every npz of the real sample (empty where ../shared is absent: the parametrized tests vanish)."""
    return sorted(SAMPLE_NPZ.rglob("*.npz")) if SAMPLE_NPZ.is_dir() else []


# ----------------------------------------------------------------------------- the command line


def common(paths: Paths) -> list[str]:
    """The options that point a stage at a data root and an output folder."""
    return ["--data-dir", str(paths.data), "--out-dir", str(paths.out)]


def tpurank(*args: str, env: dict | None = None, cwd: Path = ROOT, timeout: float | None = None):
    """`python -m tpurank ARGS` in a child process (a native crash or a kill must not take pytest)."""
    return subprocess.run(
        [sys.executable, "-m", "tpurank", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=timeout,
    )


def error_lines(capsys: pytest.CaptureFixture) -> list[str]:
    """stderr lines that are not progress bars; asserts there is no traceback."""
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    return [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip() and "%|" not in ln]


def one_error(capsys: pytest.CaptureFixture, stage: str) -> str:
    """The single `tpurank STAGE: error: ...` line of the captured stderr (asserted single)."""
    lines = [ln for ln in error_lines(capsys) if ": error: " in ln]
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"tpurank {stage}: error: ") and "[Errno" not in lines[0], lines[0]
    return lines[0]


def first_file(paths: Paths, folder: str) -> Path:
    """The first npz (by name) of a folder below the data root's npz tree, e.g. "tile/xla/test"."""
    return sorted((paths.data / NPZ / folder).glob("*.npz"))[0]


def valid_rows(paths: Paths) -> list[tuple[str, str]]:
    """The rows of a fresh valid_random.csv (predicted here), as (ID, TopConfigs)."""
    from tpurank.cli import main

    assert main(["predict", "--model", "random", "--split", "valid", *common(paths)]) == 0
    text = (paths.submissions / "valid_random.csv").read_text().splitlines()[1:]
    return [tuple(line.split(",", 1)) for line in text]  # type: ignore[misc]


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file below a folder and its bytes: equal snapshots mean nothing was touched."""
    return {str(f.relative_to(folder)): f.read_bytes() for f in sorted(folder.rglob("*")) if f.is_file()}


def validation_table(out: Path) -> str:
    """The validation report of an output folder without the lines naming that folder: equal
    between two runs that validated alike."""
    return "\n".join(
        x for x in (out / "reports" / "validation.md").read_text().splitlines() if str(out) not in x
    )


def ran_steps(stderr: str) -> set[str]:
    """The steps an `all` ran (not skipped), from its `[all] STEP: tpurank ...` lines."""
    return {line.split(":")[0].removeprefix("[all] ") for line in stderr.splitlines() if ": tpurank " in line}


# ----------------------------------------------------------------------------- trees shared by the workers


def shared_root(factory: pytest.TempPathFactory) -> Path:
    """A folder of this test session that every xdist worker sees (each worker's temp folder is a
    child of the session's), so the first worker to need a tree builds it and the others reuse it."""
    base = factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    root = base / "shared-trees"
    root.mkdir(exist_ok=True)
    return root


def built_once(
    factory: pytest.TempPathFactory, name: str, key: object, build: Callable[[Path], None]
) -> Path:
    """The folder `build(folder)` fills, built once per session under a file lock and named by `key`
    (the settings it is built with), so a tree built another way is never reused for it. It is built
    where it stays (stages record the paths they read), and is finished once its marker file exists:
    a build that failed is started afresh by the next worker that asks (and fails the same way)."""
    from filelock import FileLock

    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()[:12]
    root = shared_root(factory)
    folder = root / f"{name}-{digest}"
    finished = root / f"{name}-{digest}.done"
    with FileLock(str(folder) + ".lock"):
        if not finished.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            finished.touch()
    return folder


# one tile and one layout collection: the code paths of all five at less than half the cost
TWO_COLLECTIONS = ["tile:xla", "layout:nlp:random"]


def two_collection_all(factory: pytest.TempPathFactory) -> Paths:
    """A tiny data root of TWO_COLLECTIONS only (its sample submission lists just those) and the
    output of `all --collections TWO_COLLECTIONS` with FAST on it, built once per session; read-only."""

    def build(folder: Path) -> None:
        from tpurank.cli import main
        from tpurank.synth import generate

        generate(folder / "data", scale="tiny", seed=0, collections=TWO_COLLECTIONS)
        argv = ["all", "--data-dir", str(folder / "data"), "--out-dir", str(folder / "out"), *FAST]
        assert main([*argv, "--collections", *TWO_COLLECTIONS]) == 0

    root = built_once(factory, "two-collections", {"fast": FAST, "subset": TWO_COLLECTIONS}, build)
    return Paths(data=root / "data", out=root / "out")


def copy_tree(src: Paths, dst: Path) -> Paths:
    """A private copy of a data root and its output folder (tiny: a few hundred KB), to damage freely."""
    shutil.copytree(src.data, dst / "data", symlinks=True)
    shutil.copytree(src.out, dst / "out", symlinks=True)
    return Paths(data=dst / "data", out=dst / "out")


def copy_without_times(src: Path, dst: Path) -> None:
    """A copy as Kaggle's /kaggle/input gives one: same bytes, new timestamps."""
    for f in src.rglob("*"):
        if f.is_file():
            (dst / f.relative_to(src)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(f, dst / f.relative_to(src))


# ----------------------------------------------------------------------------- hand-made GNN inputs

FEAT = 7  # node feature width of the hand-made graphs


def prepared_graph(
    kind: str, seed: int, n: int = 30, k: int = 5, u: int = 20, split: str = "train"
) -> PreparedGraph:
    """A small random graph in the prepared-cache format; runtimes depend on the configs (learnable)."""
    from tpurank.prepare.cache import PreparedGraph

    r = np.random.default_rng(seed)
    edges = r.integers(0, n, size=(2 * n, 2)).astype(np.int32)
    coll = "layout:xla:random" if kind == "layout" else "tile:xla"
    if kind == "layout":
        config_nodes = np.sort(r.choice(n, k, replace=False)).astype(np.int32)
        configs = r.integers(-1, 5, size=(u, k, 18)).astype(np.int8)
        runtime = (
            1.0 + (configs[:, :, 0] == 0).sum(1) + 0.5 * (configs[:, :, 6] == 1).sum(1) + r.random(u) * 0.1
        )
    else:
        config_nodes = np.zeros(0, np.int32)
        configs = r.integers(1, 200, size=(u, 24)).astype(np.float32)
        runtime = 1.0 + np.log(configs[:, 0]) + r.random(u) * 0.1
    return PreparedGraph(
        id=f"{coll}:g{seed}",
        collection=coll,
        split=split,
        stem=f"g{seed}",
        node_feat=r.normal(size=(n, FEAT)).astype(np.float32),
        node_feat_raw=np.zeros((n, 140), np.float32),
        node_opcode=r.integers(0, 121, n).astype(np.uint8),
        edge_index=edges,
        node_map=np.arange(n),
        config_nodes=config_nodes,
        configs=configs,
        runtime_min=runtime,
        runtime_mean=runtime,
        count=np.ones(u, np.int32),
        inverse=np.arange(u, dtype=np.int32),
        config_runtime=runtime,
        is_test=False,
    )


def chain_layout_graph(runtime: np.ndarray, rng: np.random.Generator) -> LayoutGraph:
    """A 4-node chain layout graph with 2 configurable nodes and one config per runtime (random
    features): what a scoring test needs of a layout npz."""
    return LayoutGraph(
        node_feat=rng.random((4, 140), dtype=np.float32),
        node_opcode=np.array([1, 2, 3, 4], np.uint8),
        edge_index=np.array([[1, 0], [2, 1], [3, 2]], np.int64),
        node_config_feat=rng.integers(-1, 3, (len(runtime), 2, 18)).astype(np.float32),
        node_config_ids=np.array([1, 2], np.int64),
        config_runtime=np.asarray(runtime, np.int64),
        node_splits=np.array([[0, 4]], np.int64),
    )


def small_cfg(**gnn: object) -> Config:
    """A small config built as a user's file is (from_dict), so each key set here beats the collections' own."""
    from tpurank.core.config_build import from_dict

    return from_dict(
        {
            "gnn": {"hidden": 16, "layers": 2, "opcode_dim": 4, "config_dim": 4, **gnn},
            "baseline": {"hidden": 16, "layers": 2, "opcode_dim": 8},
        }
    )


# the arguments of a small GnnRanker built in code, every switch off: a network's arguments have no
# defaults of their own (the config section's are the only ones)
SMALL_GNN: dict[str, object] = {
    "hidden": 16,
    "layers": 2,
    "aggr": "sum",
    "opcode_dim": 16,
    "config_dim": 8,
    "dropout": 0.0,
    "cross_config_attention": False,
    "heads": 4,
    "checkpoint_layers": False,
    "checkpoint_min_states": 0,
    "standardize": False,
    "layer_attention": False,
    "tile_features": False,
}


def small_gnn(kind: str, node_feat_dim: int, **args: object) -> GnnRanker:
    """A small `GnnRanker` of `kind` (SMALL_GNN, `args` override)."""
    from tpurank.gnn.nets.gnn_ranker import GnnRanker, GnnRankerArgs

    return GnnRanker(GnnRankerArgs(kind=kind, node_feat_dim=node_feat_dim, **{**SMALL_GNN, **args}))


# ----------------------------------------------------------------------------- raw protobufs


def layout_pb(path: Path) -> Path:
    """A raw layout tuning file (ModuleTuningData) of two instructions and one default run, the
    least featurize-pb turns into an npz."""
    from tpurank.pb.schema import ModuleTuningData

    m = ModuleTuningData(fingerprint=7)
    entry = m.module.computations.add(name="entry", id=1, root_id=2)
    for iid, opcode, operands in ((1, "parameter", []), (2, "negate", [1])):
        inst = entry.instructions.add(id=iid, name=f"{opcode}.{iid}", opcode=opcode)
        inst.shape.element_type = 11  # F32
        inst.shape.dimensions.extend([4, 3])
        inst.shape.layout.minor_to_major.extend([1, 0])
        inst.operand_ids.extend(operands)
    entry.instructions[0].parameter_number = 0
    m.config_index_to_node.extend([1])
    run = m.runs.add(error=False, is_default=True)
    run.profile.compute_time_ns = 100
    run.module_config.layout_config.nodes.add().tensors.add().dims.extend([0, 1])
    path.write_bytes(m.SerializeToString())
    return path


def fake_clock(
    monkeypatch: pytest.MonkeyPatch, step_s: float, validation_s: float, score: float = 0.5, first_step_s=None
):
    """The loop's clock advances `step_s` per optimizer step (`first_step_s` for the first, when
    given) and `validation_s` per validation (which scores `score`): a time budget's behaviour
    without a real machine's speed in it."""
    from tpurank.gnn.training import loop

    clock = types.SimpleNamespace(now=0.0)
    monkeypatch.setattr(loop, "time", types.SimpleNamespace(perf_counter=lambda: clock.now))
    real_step = loop.step_once

    def timed_step(*args, **kwargs):
        first = first_step_s is not None and not getattr(clock, "stepped", False)
        clock.now += first_step_s if first else step_s
        clock.stepped = True
        return real_step(*args, **kwargs)

    def timed_score(run, valid, losses) -> float:
        clock.now += validation_s
        return score

    monkeypatch.setattr(loop, "step_once", timed_step)
    monkeypatch.setattr(loop, "score_valid", timed_score)


def clean_all_tree(factory: pytest.TempPathFactory, tiny_root: Path) -> Path:
    """One clean `all` with FAST on a copy of the tiny data (`data/`), its outputs in `run/` and its
    stdout and stderr in stdout.txt and stderr.txt, built once per session; read-only."""

    def build(folder: Path) -> None:
        from runners import in_process

        shutil.copytree(tiny_root, folder / "data")
        r = in_process("all", "--data-dir", str(folder / "data"), "--out-dir", str(folder / "run"), *FAST)
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
        (folder / "stdout.txt").write_text(r.stdout)
        (folder / "stderr.txt").write_text(r.stderr)

    return built_once(factory, "clean-all", FAST, build)
