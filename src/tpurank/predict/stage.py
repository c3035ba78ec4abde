"""A model's predictions of one split, collection by collection, and the split's submission CSV:
the work of `tpurank predict` (tpurank.predict.cli).

Each collection's predictions are kept while their key holds (`collection_stamp`, on the stage's
declaration); a collection's new predictions replace the old only when they are whole.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import numpy as np

from tpurank.core.collections import COLLECTIONS, check_collection
from tpurank.core.config import Config
from tpurank.core.declared import ENSEMBLE, member_predictions, model_sections
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.metrics import summarize
from tpurank.core.paths import Paths
from tpurank.core.progress import tqdm
from tpurank.core.provenance import data_fingerprint, write_sidecar
from tpurank.core.staleness import SEED, Files, StageIO, current
from tpurank.models.predictions import load_predictions, save_predictions
from tpurank.models.registry import Model, get_model
from tpurank.prepare.belongs import check_cache
from tpurank.prepare.cache import INDEX_FILE
from tpurank.submission.format import (
    ExpectedGraph,
    expected_for_split,
    missing_files,
    top_configs,
    write_submission,
)
from tpurank.submission.score import score_parsed, scores_json


def collection_stamp(
    io: StageIO, paths: Paths, cfg: Config, model: str, split: str, collection: str, fingerprint: str
) -> str:
    """The key of one collection's predictions (`StageIO.piece_key` on the stage's declaration
    `io`): the model's files for the collection, the prepared index, the data's fingerprint (for the
    ensemble, its members' predictions of the split) and the model's config sections."""
    files = [Files(paths.model_dir(model, collection)), paths.prepared / INDEX_FILE]
    if model == ENSEMBLE:  # it combines the other models' predictions: they are inputs too
        files.append(member_predictions(paths, split))
    parts = {"model": model, "data": fingerprint}
    return io.piece_key(parts, files, cfg.for_collection(collection), (SEED, *model_sections(model)))


def _expected(paths: Paths, split: str, partial: bool) -> list[ExpectedGraph]:
    expected = expected_for_split(paths, split, partial=partial)
    absent = missing_files(expected)
    if absent:
        raise TpurankError(
            f"{paths.sample_submission} lists {len(expected)} test IDs but {len(absent)} have no file under "
            f"{paths.npz} (e.g. {absent[0]}); pass --partial to rank only the files present "
            "(such a CSV is not a valid Kaggle submission)"
        )
    return expected


def check_complete(got: dict, ids: list[str], name: str, collection: str, split: str) -> None:
    """A collection's predictions count only when every expected graph has one.

    Raises:
        TpurankError: naming the graphs without a prediction (usually files added to the data
            after `prepare`, or files that failed it).
    """
    missing = [i for i in ids if i not in got]
    if not got:
        raise TpurankError(
            f"model {name} returned no {split} predictions ({len(ids)} files); "
            f"is the prepared cache built ({command('prepare')}) and the model trained?"
        )
    if missing:
        raise TpurankError(
            f"model {name} predicted {len(ids) - len(missing)} of {len(ids)} {split} graphs; no prediction for "
            f"{missing[0]}{f' and {len(missing) - 1} more' if len(missing) > 1 else ''}: not in the prepared "
            f"cache? (added after `prepare`, or failed it): rerun {command('prepare')} and {command('features')}"
        )


def finished_predictions(pred_file: Path, meta_file: Path) -> tuple[dict, dict]:
    """(graph ID -> costs, collection -> stamp) of an earlier run; empty when there is none.

    A damaged file holds nothing to keep: it is reported in one line and everything is
    recomputed (rather than blocking even `--force`).
    """
    if not pred_file.exists():
        return {}, {}
    try:
        preds = load_predictions(pred_file)
    except DataError as e:
        print(f"tpurank predict: warning: {e}; recomputing every collection", file=sys.stderr)
        return {}, {}
    try:
        stamps = json.loads(meta_file.read_text()).get("stamps", {})
    except (OSError, ValueError, AttributeError):  # missing or damaged: every collection is stale
        stamps = {}
    return preds, stamps if isinstance(stamps, dict) else {}


def replace_collection(preds: dict, collection: str, got: dict) -> dict:
    """`preds` with one collection's entries replaced by `got` (the others untouched)."""
    return {k: v for k, v in preds.items() if not k.startswith(collection + ":")} | got


def predict_collection(
    paths: Paths, cfg: Config, model: Model, name: str, collection: str, split: str, ids: list[str]
) -> dict[str, np.ndarray]:
    """Model `name`'s costs (`model`'s) for every expected graph `ids` of one collection.

    Raises:
        TpurankError: the cache does not match the data, or a graph got no prediction.
    """
    check_cache(paths.prepared, paths.npz, collection, split)
    got = dict(model.predict(paths, cfg.for_collection(collection), collection, split))
    check_complete(got, ids, name, collection=collection, split=split)
    return got


def predict_split(
    paths: Paths,
    cfg: Config,
    name: str,
    split: str,
    collections: list[str],
    partial: bool = False,
    force: bool = False,
) -> int:
    """Predict `split` with model `name`, keeping up-to-date collections, and write its CSV.

    Args:
        paths: the resolved folders.
        cfg: the run's config (each collection's overrides are applied here).
        name: a registered model.
        split: valid or test.
        collections: the collections to predict.
        partial: test: rank only the sample IDs whose file exists.
        force: recompute predictions that are up to date.
    """
    for c in collections:
        check_collection(c)
    model = get_model(name)  # an unknown or missing model fails before any work
    expected = _expected(paths, split, partial)
    wanted = [c for c in COLLECTIONS if c in collections and any(e.collection == c for e in expected)]
    preds, failed = predict_collections(paths, cfg, model, name, split, wanted, expected, force)
    if failed:
        pred_file, target = paths.prediction_file(name, split), paths.submission_file(name, split)
        raise TpurankError(
            f"{len(failed)} of {len(wanted)} collections failed (above); {pred_file} keeps their previous "
            f"predictions, if any, and {target} was not rewritten"
        )
    return write_csv(paths, cfg, name, split, expected, preds, partial, collections)


def predict_collections(
    paths: Paths,
    cfg: Config,
    model: Model,
    name: str,
    split: str,
    wanted: list[str],
    expected: list[ExpectedGraph],
    force: bool,
) -> tuple[dict, list[str]]:
    """Each of the `wanted` collections' predictions, kept while up to date, else made and saved as
    soon as they are whole: (graph ID -> costs, of every collection predicted now or before; one line
    per collection that failed, which keeps its previous predictions).

    Args:
        paths, cfg, name, split: as `predict_split`'s.
        model: the model `name` loads: it predicts, and its declaration (`predict_io`) keys each
            collection's predictions.
        wanted: the collections to predict, in order.
        expected: the split's expected graphs.
        force: recompute predictions that are up to date.
    """
    pred_file = paths.prediction_file(name, split)
    meta_file = pred_file.with_suffix(".json")
    preds, stamps = finished_predictions(pred_file, meta_file)  # kept until a collection's rerun succeeds
    io, fingerprint = model.predict_io(paths, split), data_fingerprint(paths.data)
    failed: list[str] = []
    for c in tqdm(wanted, desc=f"predict {name} {split}", unit="collection", file=sys.stderr):
        ids = [e.id for e in expected if e.collection == c]
        stamp = collection_stamp(io, paths, cfg, name, split, c, fingerprint)
        if not force and current(stamps.get(c), stamp, whole=all(i in preds for i in ids)):
            tqdm.write(f"predict {name} {split} {c}: up to date, kept", file=sys.stderr)
            continue
        t = time.perf_counter()
        try:
            got = predict_collection(paths, cfg, model, name, c, split, ids)
        except TpurankError as e:
            failed.append(f"{c}: {e}")
            tqdm.write(f"tpurank predict: error: {c}: {e}", file=sys.stderr)
            continue
        preds = replace_collection(preds, c, got)
        stamps[c] = stamp
        save_predictions(pred_file, preds)
        write_sidecar(
            meta_file, cfg, paths.data, fingerprint=fingerprint, model=name, split=split, stamps=stamps
        )
        seconds = time.perf_counter() - t
        print(f"predict {name} {split} {c}: {len(got)} graphs, {seconds:.1f} s", file=sys.stderr)
    return preds, failed


def write_csv(
    paths: Paths,
    cfg: Config,
    name: str,
    split: str,
    expected: list[ExpectedGraph],
    preds: dict,
    partial: bool,
    collections: list[str] | None = None,
) -> int:
    """Write `submissions/<split>_<name>.csv` for the collections fully predicted (test: all of
    `collections` that have test files; a subset of the five only with `partial`)."""
    chosen = collections or list(COLLECTIONS)
    if partial:
        expected = [e for e in expected if e.collection in chosen]
    present = [c for c in COLLECTIONS if any(e.collection == c for e in expected)]
    covered = [c for c in present if all(e.id in preds for e in expected if e.collection == c)]
    target = paths.submission_file(name, split)
    if split == "test" and covered != present:
        todo = [c for c in present if c not in covered]
        print(f"{target}: not written yet; predict {', '.join(todo)} first", file=sys.stderr)
        return 0
    rows = [e for e in expected if e.collection in covered]
    costs = {e.id: preds[e.id] for e in rows}
    extra: dict = {"models": [name], "split": split, "collections": covered, "partial": partial}
    if split != "test":
        parsed = {e.id: top_configs(e.collection, costs[e.id]).tolist() for e in rows}
        summary = summarize(score_parsed(parsed, paths, split))
        extra["scores"] = scores_json(summary)
        extra["graphs"] = {c: int(s["graphs"]) for c, s in summary.items()}
    write_submission(target, costs, rows, cfg=cfg, data_root=paths.data, unscored=split != "test", **extra)
    scored = extra.get("scores", {}).get("overall")
    note = (
        f" (overall {split} score {scored:.4f} over {len(covered)} collections)" if scored is not None else ""
    )
    print(f"wrote {target}: {len(rows)} rows{note}", file=sys.stderr)
    return 0
