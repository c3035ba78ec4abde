"""`Ranker`: trained models as a cost model for an autotuner, candidates in, order out.

    from tpurank.rank import Ranker

    with Ranker.load("out") as ranker:           # a trained out folder, or a models dataset
        ranking = ranker.rank("candidates.pb")[0]  # one Ranking per graph of the file
        best = ranking.order[:10]                  # the file's config indices, fastest first

The user's graphs become test files of a dataset tree in a work folder, and the same stages that
rank the competition's test files run on them (`prepare --keep-rule`, `features`, `predict` for
each model): a graph is ranked exactly as `predict` ranks it placed as a test file. Nothing is
written outside the work folder (a temporary one unless named, removed on `close`).
"""

from __future__ import annotations

import contextlib
import shutil
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType

from tpurank.core.atomic import write_text
from tpurank.core.collections import COLLECTIONS, collection_dir, kind_of
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.lock import output_lock
from tpurank.features import cli as features
from tpurank.predict import cli as predict
from tpurank.prepare import cli as prepare
from tpurank.rank.calibrate import Calibration
from tpurank.rank.candidates import Candidates, read_candidates
from tpurank.rank.measured import Measurements, assign
from tpurank.rank.models import ENSEMBLE, TrainedModels, load_models
from tpurank.rank.program import Program
from tpurank.rank.ranking import Ranking
from tpurank.rank.staged import Staged
from tpurank.run.stages import command_line, run_step
from tpurank.submission.csvio import HEADER, csv_text

DEFAULT_LAYOUT = "layout:xla:random"  # a user's layout candidates come from a search of their own
MARKER = ".tpurank-rank"  # in a work folder `rank` made: only such a folder is ever emptied


class Ranker:
    """Rank candidate configs of a user's programs with trained models.

    Args:
        models: the trained models, staged in the work folder.
        work: the work folder.
        temporary: remove the work folder on `close`.
    """

    def __init__(self, models: TrainedModels, work: Path, temporary: bool) -> None:
        self.models, self.work, self.temporary = models, work, temporary

    @classmethod
    def load(
        cls, models: str | Path, work: str | Path | None = None, prepared: str | Path | None = None
    ) -> Ranker:
        """The models of a trained out folder or a models dataset, staged in `work` (default: a new
        temporary folder).

        Args:
            models: a trained out folder, or a folder holding a models dataset.
            work: a work folder to keep (rank's own: a folder holding anything else is refused).
            prepared: the prepared cache training used, when it is not under `models` (`--work-dir`).

        Raises:
            TpurankError: `models` holds no usable models, or `work` holds other files.
        """
        temporary = work is None
        folder = Path(tempfile.mkdtemp(prefix="tpurank-rank-")) if work is None else Path(work)
        try:
            claim(folder)
            cached = Path(prepared) if prepared is not None else None
            return cls(load_models(Path(models), folder, cached), folder, temporary)
        except BaseException:
            if temporary:
                shutil.rmtree(folder, ignore_errors=True)
            raise

    def rank(
        self,
        path: str | Path,
        kind: str | None = None,
        collection: str | None = None,
        model: str | None = None,
        measured: Measurements | None = None,
        how: Calibration | None = None,
    ) -> list[Ranking]:
        """Every graph of one file (a tile protobuf holds one per kernel), fastest predicted first;
        with `measured`, calibrated on those configs first (`rank_files`)."""
        return self.rank_files([Path(path)], kind, collection, model, measured, how)

    def rank_files(
        self,
        files: Iterable[Path],
        kind: str | None = None,
        collection: str | None = None,
        model: str | None = None,
        measured: Measurements | None = None,
        how: Calibration | None = None,
    ) -> list[Ranking]:
        """Every graph of several files, ranked in one pass of the stages.

        Args:
            files: `.npz` files in the dataset's format or raw `.pb` tuning files.
            kind: "layout" or "tile" to insist on one (default: told apart by content).
            collection: the collection whose models rank a layout graph (default `DEFAULT_LAYOUT`).
            model: "ensemble" or a member by name; None: the ensemble where fitted, else the trained
                member with the best valid score (said in the ranking's notes).
            measured: runtimes measured on configs of the one file (`read_measured`): the model
                learns from them before it ranks, and the scores leave them out. None: the
                ranking `predict` gives.
            how: the calibration's method and settings (default `Calibration()`).

        Raises:
            TpurankError: a file that cannot be ranked, a graph the models were not trained for, or
                measured runtimes that do not fit the file (checked before anything runs).
        """
        graphs = self._graphs(files, kind, collection)
        per_graph: dict[str, dict[int, float]] = {}
        if measured is not None:
            sources = {c.source for c, _ in graphs}
            if len(sources) > 1:
                raise DataError(measured.source, "measured runtimes belong to one file: rank that file alone")
            per_graph = assign(measured, [c for c, _ in graphs])
        programs = self._programs(graphs, model, calibrate=measured is not None)
        if measured is None:
            return [p.ranking() for p in programs]
        return [p.ranking(per_graph.get(p.name, {}), how) for p in programs]

    def programs(
        self,
        path: str | Path,
        kind: str | None = None,
        collection: str | None = None,
        model: str | None = None,
    ) -> list[Program]:
        """Every graph of one file ranked by the models and ready to be calibrated on measurements
        (`Program.ranking(measured)`): what an autotuning loop asks again and again.

        Args:
            path: a `.npz` or `.pb` file.
            kind: "layout" or "tile" to insist on one.
            collection: the collection whose models rank a layout graph.
            model: "ensemble" or a member; None: as `rank_files` chooses.
        """
        return self._programs(self._graphs([Path(path)], kind, collection), model, calibrate=True)

    def _graphs(
        self, files: Iterable[Path], kind: str | None, collection: str | None
    ) -> list[tuple[Candidates, str]]:
        """The graphs of the files and the collection ranking each (no two of one name)."""
        graphs = [(c, _collection(c, collection)) for f in files for c in read_candidates(Path(f), kind)]
        names = [f"{col}:{c.name}" for c, col in graphs]
        if len(set(names)) < len(names):
            dup = next(n for n in names if names.count(n) > 1)
            raise TpurankError(f"two inputs give the graph {dup}: rank them in separate runs")
        return graphs

    def _programs(
        self, graphs: list[tuple[Candidates, str]], model: str | None, calibrate: bool
    ) -> list[Program]:
        """The stages run on the graphs; each graph's costs (and, with `calibrate`, LightGBM's inputs),
        ranked by the model `TrainedModels.choose` picks for its collection."""
        chosen = {col: self.models.choose(col, model) for _, col in graphs}
        needed = {col: self.models.models_for(col, m) for col, (m, _) in chosen.items()}
        with output_lock(self.work, "rank"), contextlib.redirect_stdout(sys.stderr):
            self._write_tree(graphs)  # the stages' own lines go to stderr: stdout is the ranking
            self._run_stages(needed)
            staged = Staged(self.models, needed)
            programs = [staged.program(c, col, chosen[col][0], calibrate) for c, col in graphs]
        for p in programs:
            if why := chosen[p.collection][1]:
                p.notes.insert(0, why)
        return programs

    def _write_tree(self, graphs: list[tuple[Candidates, str]]) -> None:
        """The graphs as test files of a fresh dataset tree (the cache keeps what it can reuse)."""
        paths = self.models.paths
        shutil.rmtree(paths.data, ignore_errors=True)
        for c, col in graphs:
            c.write(paths.npz / collection_dir(col) / "test" / f"{c.name}.npz")
        write_text(
            paths.sample_submission, csv_text([HEADER, *((f"{col}:{c.name}", "0") for c, col in graphs)])
        )

    def _run_stages(self, needed: dict[str, list[str]]) -> None:
        """prepare (the models' rule), features when LightGBM ranks, then predict for each model."""
        cols = [c for c in COLLECTIONS if c in needed]
        models = list(dict.fromkeys(m for c in cols for m in needed[c]))
        steps: list[object] = [prepare.Options(splits=["test"], keep_rule=True, collections=cols)]
        if "lgbm" in models:
            steps.append(features.Options(collections=cols, splits=["test"]))
        members = [m for m in models if m != ENSEMBLE] + [m for m in models if m == ENSEMBLE]
        steps += [predict.Options(model=m, split="test", collections=cols, partial=True) for m in members]
        for options in steps:
            print(f"[rank] tpurank {command_line(options)}", file=sys.stderr)
            if run_step(options, self.models.paths, self.models.cfg) != 0:
                kept = "" if self.temporary else f"; the work folder is {self.work}"
                raise TpurankError(f"step '{command_line(options)}' failed (above){kept}")

    def close(self) -> None:
        """Remove the work folder when it is a temporary one."""
        if self.temporary:
            shutil.rmtree(self.work, ignore_errors=True)

    def __enter__(self) -> Ranker:
        return self

    def __exit__(self, kind: type | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def claim(work: Path) -> None:
    """Make `work` rank's own folder (a marker file); refuse a folder holding anything else, since
    each run replaces the dataset tree inside it.

    Raises:
        TpurankError: `work` exists, is not empty, and has no marker.
    """
    marker = work / MARKER
    if work.exists() and not marker.exists() and (not work.is_dir() or any(work.iterdir())):
        raise TpurankError(f"{work}: not a work folder of `rank` and not empty; name a new or empty folder")
    work.mkdir(parents=True, exist_ok=True)
    marker.touch()


def _collection(c: Candidates, named: str | None) -> str:
    """The collection whose models rank `c`: tile:xla for a tile graph; for a layout graph the named
    layout collection, else `DEFAULT_LAYOUT`.

    Raises:
        TpurankError: a layout graph where `named` is the tile collection.
    """
    if c.kind == "tile":
        return "tile:xla"
    if named is not None and kind_of(named) != "layout":
        raise TpurankError(f"{c.source}: a layout graph, but {named} is not a layout collection")
    return named or DEFAULT_LAYOUT
