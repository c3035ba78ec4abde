"""The programs of a work tree once the stages ran: each graph's costs as `predict` wrote them, the
ensemble's weights and, for calibration, LightGBM's inputs (its model, training rows and the
graph's feature rows) and the GNN's (its seed members' files and the graph's place in the cache)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from tpurank.core.collections import kind_of
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.workers import lgbm_threads
from tpurank.features import io as tab_io
from tpurank.gnn.families.gnn import SPEC as GNN_SPEC
from tpurank.gnn.seeds import member_files, trained_seeds
from tpurank.lgbm import saved as lgbm_saved
from tpurank.lgbm.model import lgb_params
from tpurank.lgbm.training_rows import TRAIN_ROWS_FILE
from tpurank.lgbm.training_rows import load as load_training_rows
from tpurank.models.predictions import load_predictions
from tpurank.models.weights import WEIGHTS_FILE, read_weights
from tpurank.rank.calibrate import LgbmInputs
from tpurank.rank.candidates import Candidates
from tpurank.rank.finetune import GnnInputs
from tpurank.rank.models import ENSEMBLE, TrainedModels
from tpurank.rank.program import GNN, LGBM, Program, not_calibrated_note


class Staged:
    """Reads what the stages wrote in the work tree, each file once.

    Args:
        models: the staged models and the work tree.
        needed: collection -> the models that predicted it.
    """

    def __init__(self, models: TrainedModels, needed: dict[str, list[str]]) -> None:
        self.models, self.needed = models, needed
        self._predictions: dict[str, dict[str, np.ndarray]] = {}
        self._tables: dict[str, tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]]] = {}

    def predictions(self, model: str) -> dict[str, np.ndarray]:
        """A model's test predictions (graph ID -> cost per config)."""
        if model not in self._predictions:
            self._predictions[model] = load_predictions(self.models.paths.prediction_file(model, "test"))
        return self._predictions[model]

    def table(self, collection: str) -> tuple[pd.DataFrame, dict[str, np.ndarray], dict[str, np.ndarray]]:
        """A collection's test feature table, graph ID -> its rows, and stem -> inverse map."""
        if collection not in self._tables:
            paths = self.models.paths
            df = tab_io.read_table(paths, collection, "test")
            graph = df["graph"].to_numpy()
            _, first, codes, counts = np.unique(
                graph, return_index=True, return_inverse=True, return_counts=True
            )
            groups = np.split(np.argsort(codes, kind="stable"), np.cumsum(counts)[:-1]) if len(graph) else []
            rows = {str(graph[first[i]]): g for i, g in enumerate(groups)}
            self._tables[collection] = (df, rows, tab_io.read_per_graph(paths, collection, "test", "inverse"))
        return self._tables[collection]

    def program(self, c: Candidates, collection: str, model: str, calibrate: bool) -> Program:
        """One graph's program.

        Args:
            c: the graph.
            collection: the collection whose models ranked it.
            model: "ensemble" or one member.
            calibrate: load what calibrating LightGBM and the GNN needs (those of them that rank it).
        """
        gid = f"{collection}:{c.name}"
        models = self.needed[collection]
        costs = {m: self.predictions(m)[gid] for m in models}
        weights = None
        if model == ENSEMBLE:
            weights = read_weights(self.models.paths.model_dir(ENSEMBLE, collection) / WEIGHTS_FILE)
        program = Program(c, collection, model, costs, weights)
        if not calibrate:
            return program
        if LGBM not in models and GNN not in models:
            program.notes.append(not_calibrated_note(program))
            return program
        if LGBM in models:
            program.lgbm = self._lgbm(c, collection, program.notes)
        if GNN in models:
            program.gnn = self._gnn(collection, gid)
        return program

    def _gnn(self, collection: str, gid: str) -> GnnInputs:
        """The GNN's seed members (their `model.pt`, only read) and where the graph is in the cache."""
        paths = self.models.paths
        summary = trained_seeds(GNN_SPEC, paths, collection)
        n, how = (len(summary["seeds"]), summary["normalize"]) if summary else (1, None)
        ccfg = self.models.cfg.for_collection(collection)
        chunk = GNN_SPEC.recipe(ccfg, kind_of(collection)).predict_chunk
        files = member_files(GNN_SPEC, paths, collection, n)
        return GnnInputs(GNN_SPEC, files, how, paths, collection, gid, chunk)

    def _lgbm(self, c: Candidates, collection: str, notes: list[str]) -> LgbmInputs:
        """LightGBM's model, parameters, training rows and the graph's feature rows."""
        paths = self.models.paths
        booster, features = lgbm_saved.load(paths, collection)
        df, rows, inverses = self.table(collection)
        gid = f"{collection}:{c.name}"
        if gid not in rows or c.name not in inverses:
            raise TpurankError(f"{tab_io.table_path(paths, collection, 'test')}: no feature rows of {gid}")
        inverse = inverses[c.name].astype(np.int64)
        part = df.iloc[rows[gid]]
        x = np.full((int(inverse.max()) + 1, len(features)), np.nan, dtype=np.float32)
        x[part["row"].to_numpy(np.int64)] = part[features].to_numpy(np.float32)
        if np.isnan(x).all(axis=1).any():
            raise TpurankError(f"{gid}: some of its configs have no feature row")
        rows_file = paths.model_dir(LGBM, collection) / TRAIN_ROWS_FILE
        training = load_training_rows(rows_file)
        if training is None:
            notes.append(
                f"{rows_file}: absent (models trained before training rows were kept): "
                "LightGBM is calibrated on the measured configs alone"
            )
        elif training.features != list(features):
            raise DataError(rows_file, "training rows of other features than the model's; retrain lgbm")
        ccfg = self.models.cfg.for_collection(collection)
        params = lgb_params(ccfg, collection)
        params["num_threads"] = lgbm_threads(ccfg.lgbm.threads)  # beside a busy core, fewer threads
        return LgbmInputs(booster, params, ccfg.lgbm.relevance_levels, x, inverse, training)
