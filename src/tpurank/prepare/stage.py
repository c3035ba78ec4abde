"""The `prepare` stage: every graph file -> one compact cache file, plus index.parquet.

Resumable: an output is reused when its stored build key (the input's content identity, hops,
collapse, feature rule, format version) matches. A bad file gets one line naming it; the others are still
written, and the stage exits non-zero at the end. Files run in a process pool, largest first.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pandas as pd

from tpurank.core.atomic import atomic_path
from tpurank.core.collections import COLLECTIONS, SPLITS, collection_dir
from tpurank.core.config import Config
from tpurank.core.declared import prepare_io
from tpurank.core.errors import DiskFullError, TpurankError
from tpurank.core.paths import DATA_FIX, Paths
from tpurank.core.provenance import write_sidecar
from tpurank.core.staleness import StageIO, current
from tpurank.data.dataset import GraphFile, discover, require_npz_root
from tpurank.data.npz import read_node_feat
from tpurank.data.subsets import load_subsets
from tpurank.prepare.build import BuildParams, build_file, build_key
from tpurank.prepare.built_with import PROVENANCE_FILE
from tpurank.prepare.cache import CACHE_SUFFIX, INDEX_FILE, prepared_path, read_build
from tpurank.prepare.inputs import broken_links, without_configs, without_excluded
from tpurank.prepare.node_features import RULE_FILE, FeatureRule, column_range, fit_rule
from tpurank.prepare.pool import failure, resolve_jobs, run_tasks

INDEX_COLUMNS = (
    "collection",
    "split",
    "id",
    "stem",
    "path",  # relative to the prepared folder
    "nodes",
    "edges",
    "nodes_kept",
    "edges_kept",
    "summary_nodes",
    "configurable_nodes",
    "varying_nodes",
    "configs",
    "configs_unique",
    "is_test",
    "bytes",  # size of the cache file
    "input_bytes",  # size of the npz it was built from
    "input",  # content identity of that npz (tpurank.core.identity): predict checks the data against it
    "key",  # the build key stored in the cache file: a file rebuilt with other settings does not match
)


@dataclass
class PrepareResult:
    """What a prepare run produced.

    Args:
        index: the full index table (also written to index.parquet).
        failed: one line per file that could not be prepared, naming it.
        built: outputs written by this run.
        reused: outputs found up to date and kept.
        rule: the node-feature rule used.
    """

    index: pd.DataFrame
    failed: list[str] = field(default_factory=list)
    built: int = 0
    reused: int = 0
    rule: FeatureRule | None = None
    skipped: list[str] = field(default_factory=list)


class BuildTask(NamedTuple):
    """One cache file to build: a tuple (the pool calls `_build_task(*task)`), named field by field.

    Args:
        gf: the input graph file.
        params: pruning and feature parameters.
        target: the cache file to write.
        key: its build key (stored in the file: the next run reuses it while the key matches).
        eval_rows: the graph's official validation subset, if any.
    """

    gf: GraphFile
    params: BuildParams
    target: Path
    key: str
    eval_rows: np.ndarray | None


# ----------------------------------------------------------------------------- workers (top level: picklable)


def _range_task(gf: GraphFile) -> tuple[tuple[np.ndarray, np.ndarray] | None, str | None]:
    try:  # the other arrays are validated when the file is built
        return column_range(read_node_feat(gf.path)), None
    except Exception as e:  # one line per bad file; the others go on
        return None, failure(gf, e)


def _build_task(
    gf: GraphFile, params: BuildParams, out: Path, key: str, eval_rows: np.ndarray | None
) -> tuple[dict | None, str | None]:
    try:
        return build_file(gf, params, out, key=key, eval_rows=eval_rows), None
    except DiskFullError:
        raise  # not this file's fault: every later one would fail too, so the stage stops
    except Exception as e:  # one line per bad file; the others go on
        out.unlink(missing_ok=True)  # never leave a stale output that no longer matches its input
        return None, failure(gf, e)


# ----------------------------------------------------------------------------- steps


def _files_key(io: StageIO, files: list[GraphFile]) -> str:
    """The key of the train files a rule is fitted on (`StageIO.piece_key` on the stage's
    declaration `io`): each file's name and content, so the rule is refit only when they change."""
    named = [f"{gf.collection}/{gf.split}/{gf.stem}" for gf in files]
    return f"{io.piece_key({'train_files': named}, [gf.path for gf in files])}:{len(files)}"


def ensure_rule(
    io: StageIO, out: Path, npz_root: Path, jobs: int, progress: bool, cfg: Config, keep: bool = False
) -> tuple[FeatureRule, list[str]]:
    """The node-feature rule fitted on every train file of the dataset (reused while they are unchanged).

    Args:
        io: the stage's declaration (what the rule's key is made on).
        out: the prepared folder (the rule is saved there as node_feature_rule.json).
        npz_root: the dataset's npz folder.
        jobs: worker processes.
        progress: show a progress bar.
        cfg: the config (`prepare.exclude`: train graphs left out of the rule as of training).
        keep: use the saved rule as it is, whatever the train files (infer: the rule the models
            were trained with, shipped beside them); never refit it.

    Returns:
        (the rule, one line per train file that could not be read).
    """
    saved = FeatureRule.load(out / RULE_FILE)
    if keep:
        if saved is None:
            raise TpurankError(f"{out / RULE_FILE}: no saved feature rule to keep (--keep-rule)")
        return saved, []
    train, _ = without_excluded(discover(npz_root, splits=["train"]), cfg)
    key = _files_key(io, train)
    if saved is not None and current(saved.train_key, key):
        return saved, []
    results = run_tasks(
        _range_task, [(gf,) for gf in train], jobs, progress=progress, desc="fit feature rule"
    )
    ranges = [r for r, _ in results if r is not None]
    errors = [e for _, e in results if e is not None]
    rule = fit_rule(ranges, key)
    rule.save(out / RULE_FILE)
    return rule, errors


def _clean_scope(out: Path, scope: set[tuple[str, str]], wanted: set[Path]) -> None:
    """Remove leftover temporary files and outputs whose input is gone, inside this run's folders."""
    for collection, split in scope:
        folder = out / collection_dir(collection) / split
        if not folder.is_dir():
            continue
        for f in folder.iterdir():
            if f.name.startswith(".") and ".tmp" in f.name:
                f.unlink(missing_ok=True)  # a temporary file left by a killed run (tpurank.core.atomic)
            elif f.suffix in (CACHE_SUFFIX, ".npz") and f not in wanted:  # .npz: format 2 and older
                f.unlink(missing_ok=True)


def _order(df: pd.DataFrame) -> pd.DataFrame:
    rank_c = df["collection"].map({c: i for i, c in enumerate(COLLECTIONS)})
    rank_s = df["split"].map({s: i for i, s in enumerate(SPLITS)})
    return (
        df.assign(_c=rank_c, _s=rank_s)
        .sort_values(["_c", "_s", "stem"])
        .drop(columns=["_c", "_s"])
        .reset_index(drop=True)
    )


def _write_index(out: Path, rows: list[dict], scope: set[tuple[str, str]]) -> pd.DataFrame:
    """index.parquet = this run's rows plus the previous index's rows outside this run's scope."""
    df = pd.DataFrame(rows, columns=list(INDEX_COLUMNS))
    old_path = out / INDEX_FILE
    if old_path.exists():
        try:
            old = pd.read_parquet(old_path)
            outside = [(c, s) not in scope for c, s in zip(old["collection"], old["split"], strict=True)]
            old = old[outside]
            old = old[[(out / p).exists() for p in old["path"]]]
            if len(old):
                df = pd.concat([old[list(INDEX_COLUMNS)], df], ignore_index=True)
        except Exception:  # an unreadable or older-format index is rebuilt from this run alone
            pass
    df = _order(df.astype({"is_test": bool}))
    with atomic_path(old_path, suffix=".parquet") as tmp:
        df.to_parquet(tmp, index=False)
    return df


@dataclass
class BuildPlan:
    """Which cache files are up to date and which to build.

    Args:
        rows: the index rows of the up-to-date files.
        tasks: the files to build.
        targets: every cache file of the run and the input it is built from.
    """

    rows: list[dict]
    tasks: list[BuildTask]
    targets: dict[Path, GraphFile]


def plan_builds(
    io: StageIO, files: list[GraphFile], cfg: Config, rule: FeatureRule, subsets: dict, out: Path
) -> BuildPlan:
    """Which cache files are up to date (their index rows) and which to build (tasks)."""
    plan = BuildPlan(rows=[], tasks=[], targets={})
    params_of: dict[str, BuildParams] = {}
    for c in {gf.collection for gf in files}:
        pc = cfg.for_collection(c).prepare
        params_of[c] = BuildParams(hops=pc.hops, collapse=pc.collapse_removed, rule=rule)
    for gf in files:
        params = params_of[gf.collection]
        target = prepared_path(out, gf.collection, gf.split, gf.stem)
        plan.targets[target] = gf
        eval_rows = subsets.get(gf.collection, {}).get(gf.stem) if gf.split == "valid" else None
        key = build_key(io, gf, params, eval_rows)
        found = read_build(target)
        if found is not None and current(found.key, key):
            plan.rows.append(found.info)
        else:
            plan.tasks.append(BuildTask(gf, params, target, key, eval_rows))
    return plan


@dataclass
class _Inputs:
    """The files a prepare run builds from, and the lines about those it cannot or will not use."""

    files: list[GraphFile]
    failed: list[str]
    skipped: list[str]


def _select_inputs(
    npz_root: Path, collections: list[str] | None, splits: list[str] | None, cfg: Config
) -> _Inputs:
    """The graph files in scope, less the broken, config-less and excluded ones (each named)."""
    files = discover(npz_root, collections, splits)
    if not files:
        raise TpurankError(
            f"{npz_root}: no npz files for collections {collections or 'all'} and splits {splits or 'all'}; "
            f"{DATA_FIX}"
        )
    failed = broken_links(npz_root, collections, splits)
    files, skipped, empty_tests = without_configs(files)
    files, left_out = without_excluded(files, cfg)
    return _Inputs(files=files, failed=failed + empty_tests, skipped=skipped + left_out)


def _run_builds(plan: BuildPlan, out: Path, jobs: int, progress: bool) -> list[str]:
    """Build every planned file (largest first: the pool ends together) and complete every index
    row with where its cache file is and its size beside its input's; return the failures."""
    failed: list[str] = []
    plan.tasks.sort(key=lambda t: -t.gf.path.stat().st_size)
    for row, error in run_tasks(_build_task, plan.tasks, jobs, progress=progress, desc="prepare"):
        if error is not None:
            failed.append(error)
        else:
            plan.rows.append(row)
    for row in plan.rows:
        target = prepared_path(out, row["collection"], row["split"], row["stem"])
        row.update(
            path=str(target.relative_to(out)),
            bytes=target.stat().st_size,
            input_bytes=plan.targets[target].path.stat().st_size,
        )
    return failed


def _official_subsets(paths: Paths, folder: Path | None) -> tuple[Path | None, dict]:
    """(the folder of the official validation subsets, its subsets): `folder`, else the data's own
    where it exists, else none (every valid config is kept)."""
    folder = folder or (paths.eval_indices if paths.eval_indices.is_dir() else None)
    return folder, load_subsets(folder) if folder is not None else {}


def prepare_dataset(
    paths: Paths,
    cfg: Config,
    collections: list[str] | None = None,
    splits: list[str] | None = None,
    jobs: int = 1,
    progress: bool = True,
    out: Path | None = None,
    eval_indices: Path | None = None,
    keep_rule: bool = False,
) -> PrepareResult:
    """Prepare every graph of the chosen collections and splits into the cache.

    Args:
        paths: the run's paths (reads `paths.npz`).
        cfg: the config (`prepare` section, per-collection overrides applied).
        collections: restrict to these (default: all five).
        splits: restrict to these (default: train, valid, test).
        jobs: worker processes (0: one per core, this process alone for a small tree; 1: in this process).
        progress: show progress bars.
        out: the cache folder (default: `paths.prepared`).
        eval_indices: folder of the official validation subsets (default: `paths.eval_indices`
            where it exists); each valid layout graph's subset is stored in its cache file.
        keep_rule: use the saved node-feature rule as it is (never refit: `infer`).

    Returns:
        The index and the failures; the caller decides the exit code.
    """
    out = Path(out) if out is not None else paths.prepared
    npz_root = require_npz_root(paths.npz)
    inputs = _select_inputs(npz_root, collections, splits, cfg)
    jobs = resolve_jobs(jobs, sum(gf.path.stat().st_size for gf in inputs.files))
    out.mkdir(parents=True, exist_ok=True)
    io = prepare_io(paths, out, eval_indices)  # what its cache files are keyed on
    rule, failed = ensure_rule(io, out, npz_root, jobs, progress, cfg, keep=keep_rule)
    folder, subsets = _official_subsets(paths, eval_indices)
    failed += inputs.failed
    plan = plan_builds(io, inputs.files, cfg, rule, subsets=subsets, out=out)
    scope = {(gf.collection, gf.split) for gf in inputs.files}
    _clean_scope(out, scope, set(plan.targets))
    reused = len(plan.rows)
    failed = sorted(set(failed + _run_builds(plan, out, jobs, progress)))
    index = _write_index(out, plan.rows, scope)
    built = len(plan.rows) - reused
    result = PrepareResult(
        index=index, failed=failed, built=built, reused=reused, rule=rule, skipped=inputs.skipped
    )
    _write_provenance(out, cfg, paths, scope, folder, result)
    return result


def _write_provenance(
    out: Path,
    cfg: Config,
    paths: Paths,
    scope: set[tuple[str, str]],
    subsets: Path | None,
    result: PrepareResult,
) -> None:
    """The cache's provenance sidecar: what this run covered, its rule, and what it built and kept."""
    write_sidecar(
        out / PROVENANCE_FILE,
        cfg,
        paths.data,
        stage="prepare",
        collections=sorted({c for c, _ in scope}),
        splits=sorted({s for _, s in scope}),
        feature_rule=result.rule.digest,
        feature_columns=len(result.rule.keep),
        eval_indices=str(subsets) if subsets is not None else None,
        built=result.built,
        reused=result.reused,
        failed=result.failed,
    )
