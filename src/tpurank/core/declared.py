"""What each keyed stage reads, writes and keys (whether a result is up to date is decided in
tpurank.core.staleness, by `current`, over these declarations).

A stage's step record (tpurank.run.records) keys a run over its declaration here, and every finer
cache inside the stage (one prepared graph, one feature table, one model, one seed's member, one
collection's predictions) keys its piece through the same declaration (`StageIO.piece_key`), which
refuses a file or a config section the declaration lacks. The declarations live together, below
every stage, so that a stage, a model inside it and `all` read the same one without importing
each other (nothing here imports more than `core`). A model's own `train_io` and `predict_io`
(tpurank.models.registry.Model) return these, for its name.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from tpurank.core.config import Config
from tpurank.core.names import LEARNED_MODELS, NEURAL_MODELS, UNTRAINED, Model
from tpurank.core.paths import SYNTH_MARKER, Paths
from tpurank.core.staleness import Files, StageIO

ENSEMBLE = Model.ENSEMBLE.value
# the config sections of the stages that read every model (predict, the ensemble, validate)
EVERY_SECTION = ("prepare", "features", *LEARNED_MODELS, ENSEMBLE)


def model_sections(model: str) -> tuple[str, ...]:
    """The config sections a model's training and predictions read: a change to another section (the
    budget's plan for the GNN, say) leaves its results, and so its steps, as they are."""
    if model == "lgbm":  # the feature tables
        return ("prepare", "features", "lgbm")
    if model in UNTRAINED:
        return ("prepare",)
    if model in NEURAL_MODELS:  # a GNN reads the graphs; `ensemble.normalize` averages its seeds
        return ("prepare", model, ENSEMBLE)
    return EVERY_SECTION  # the ensemble: its members' and its own


def dataset_files(paths: Paths, subsets: Path | None = None) -> list[Files]:
    """The data root's files a stage reads: the npz files, the sample submission (test IDs and
    order), the official validation subsets (`subsets`, else the data root's) and the synthetic marker."""
    subsets = subsets or paths.eval_indices
    found = [Files(paths.npz, "**/*.npz"), Files(paths.sample_submission), Files(subsets)]
    return [*found, Files(paths.data / SYNTH_MARKER)]


def member_predictions(paths: Paths, split: str) -> Files:
    """The ensemble members' predictions of a split (what the ensemble reads)."""
    return Files(paths.predictions, f"*/{split}.npz", exclude=ENSEMBLE)


def run_io(paths: Paths) -> StageIO:
    """`all` keeps no record of its own (each step keeps its own); it writes its reports and keys
    the budget plan it keeps for reruns on the data and the sections the plan splits time by."""
    sections = ("profile", "budget", *NEURAL_MODELS)
    return StageIO(dataset_files(paths), [Files(paths.reports)], sections, record=False)


def prepare_io(paths: Paths, out: Path | None = None, subsets: Path | None = None) -> StageIO:
    """`prepare` reads the data root and writes the prepared cache (`out`, else the run's)."""
    return StageIO(dataset_files(paths, subsets), [Files(out or paths.prepared)], ("prepare",))


def features_io(paths: Paths) -> StageIO:
    """`features` reads the prepared cache and writes the tabular folder."""
    return StageIO([Files(paths.prepared)], [Files(paths.tabular)], ("prepare", "features"))


def train_io(paths: Paths, model: str, starts: Iterable[Path] = ()) -> StageIO:
    """`train` reads the prepared cache (LightGBM also the feature tables), and any checkpoint a
    network starts from (`gnn.init_from`: `starting_points`); it writes the model's own folder. The
    ensemble reads the members' valid predictions and the data they are scored against."""
    writes = [Files(paths.models / model)]
    if model == ENSEMBLE:
        reads = [*dataset_files(paths), Files(paths.prepared), member_predictions(paths, "valid")]
        return StageIO(reads, writes, EVERY_SECTION)
    tables = [Files(paths.tabular)] if model == "lgbm" else []  # LightGBM's feature tables
    begun = [Files(p.parent, p.name) for p in starts]
    return StageIO([Files(paths.prepared), *tables, *begun], writes, model_sections(model))


def starting_points(cfg: Config, model: str, collections: Iterable[str]) -> list[Path]:
    """The checkpoints `model` starts from on `collections` (its section's `init_from`, each
    collection's overrides applied), each once: a training reads them as it reads its data."""
    resolved = (cfg.for_collection(c) if cfg.collections else cfg for c in collections)  # {}: applied
    found = (getattr(getattr(one, model, None), "init_from", "") for one in resolved)
    return [Path(name).expanduser() for name in dict.fromkeys(found) if name]


def predict_io(paths: Paths, model: str, split: str) -> StageIO:
    """`predict` reads the data, the prepared cache, the model's folder and its inputs (the feature
    tables; for the ensemble, the members' predictions); it writes its predictions and the split's CSV."""
    reads = [*dataset_files(paths), Files(paths.prepared), Files(paths.models / model)]
    reads.append(member_predictions(paths, split) if model == ENSEMBLE else Files(paths.tabular))
    writes = [
        Files(paths.prediction_file(model, split)),
        Files(paths.prediction_file(model, split).with_suffix(".json")),  # each collection's key
        Files(paths.submission_file(model, split), lock=False),
        Files(paths.submission_file(model, split, ".json"), lock=False),
    ]
    return StageIO(reads, writes, model_sections(model))


def validate_io(paths: Paths, subsets: Path | None = None) -> StageIO:
    """`validate` reads the data, the prepared cache (runtimes), the models (their curves) and every
    valid prediction and CSV; it writes the report and its plots."""
    reads = [*dataset_files(paths), Files(paths.prepared), Files(paths.models)]
    reads += [Files(paths.predictions, "*/valid.npz"), Files(paths.submissions, "valid_*")]
    if subsets:
        reads.append(Files(subsets))
    writes = [Files(paths.reports, "validation*"), Files(paths.reports / "plots")]
    return StageIO(reads, writes, EVERY_SECTION)


def synth_io(out: Path) -> StageIO:
    """`synth` reads nothing and writes a data root (no step record: the generator keys the tree it
    wrote by its scale, seed and generator version, `tree_key`)."""
    return StageIO([], [Files(out)], record=False)


def featurize_pb_io(source: Path, folder: Path | None) -> StageIO:
    """`featurize-pb` reads a protobuf (or a folder of them) and writes npz files into a folder (a
    missing one is left to the error); no step record: each output's sidecar keys it."""
    return StageIO([Files(source)], [Files(folder)] if folder is not None else [], record=False)
