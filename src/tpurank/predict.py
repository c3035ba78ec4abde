"""`tpurank predict --model M --split valid|test`: predictions and the submission CSV of a model.

Per collection the model returns graph ID -> cost per config index; they are kept in
`predictions/<M>/<split>.npz` (saved after each collection, so an interrupted run resumes where
it stopped; a collection is recomputed when its config, model files, prepared cache or data
change, or with --force). Then `submissions/<split>_<M>.csv` is written, fastest first, after
the full submission check, with a JSON sidecar holding the validation scores when the split has
runtimes. A test CSV is only written when every collection is predicted.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

from tpurank.config import Config, to_dict
from tpurank.dataset import COLLECTIONS, check_collection
from tpurank.errors import TpurankError
from tpurank.metrics import summarize
from tpurank.models import MODEL_NAMES, get_model
from tpurank.paths import Paths
from tpurank.predictions import load_predictions, save_predictions
from tpurank.progress import tqdm
from tpurank.provenance import data_fingerprint, write_sidecar
from tpurank.score import score_parsed, scores_json
from tpurank.submission import ExpectedGraph, expected_for_split, missing_files, top_configs, write_submission


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--model", required=True, choices=MODEL_NAMES, help="which model predicts")
    p.add_argument("--split", required=True, choices=["valid", "test"], help="split to rank")
    p.add_argument(
        "--collections", nargs="+", default=list(COLLECTIONS), metavar="C", help="default: all five"
    )
    p.add_argument(
        "--partial",
        action="store_true",
        help="test: write rows only for the sample IDs whose test file exists (not accepted by Kaggle)",
    )
    p.add_argument("--force", action="store_true", help="recompute predictions that are up to date")


def _files_stamp(folder: Path) -> list[tuple[str, int, int]]:
    if not folder.is_dir():
        return []
    return sorted(
        (str(f.relative_to(folder)), f.stat().st_size, f.stat().st_mtime_ns)
        for f in folder.rglob("*")
        if f.is_file()
    )


def collection_stamp(paths: Paths, cfg: Config, model: str, collection: str, fingerprint: str) -> str:
    """What a collection's predictions depend on: config, model files, prepared index, data (and,
    for the ensemble, its members' prediction files)."""
    index = paths.prepared / "index.parquet"
    parts = {
        "model": model,
        "config": to_dict(cfg.for_collection(collection)),
        "model_files": _files_stamp(paths.model_dir(model, collection)),
        "prepared": [index.stat().st_size, index.stat().st_mtime_ns] if index.exists() else None,
        "data": fingerprint,
    }
    if model == "ensemble":  # it combines the other models' predictions: they are inputs too
        parts["member_predictions"] = [
            f for f in _files_stamp(paths.predictions) if not f[0].startswith(f"{model}/")
        ]
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:16]


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


def run(args: argparse.Namespace) -> int:
    paths, cfg, name, split = args.paths, args.cfg, args.model, args.split
    for c in args.collections:
        check_collection(c)
    model = get_model(name)
    expected = _expected(paths, split, args.partial)
    wanted = [c for c in COLLECTIONS if c in args.collections and any(e.collection == c for e in expected)]
    pred_file = paths.prediction_file(name, split)
    meta_file = pred_file.with_suffix(".json")
    preds = load_predictions(pred_file) if pred_file.exists() and not args.force else {}
    stamps = json.loads(meta_file.read_text()).get("stamps", {}) if meta_file.exists() and preds else {}
    fingerprint = data_fingerprint(paths.data)
    for c in tqdm(wanted, desc=f"predict {name} {split}", unit="collection", file=sys.stderr):
        ids = [e.id for e in expected if e.collection == c]
        stamp = collection_stamp(paths, cfg, name, c, fingerprint)
        if stamps.get(c) == stamp and all(i in preds for i in ids):
            tqdm.write(f"predict {name} {split} {c}: up to date, kept", file=sys.stderr)
            continue
        t = time.perf_counter()
        got = model.predict(paths, cfg.for_collection(c), c, split)
        if not got:
            raise TpurankError(
                f"model {name} returned no {split} predictions for {c} ({len(ids)} files); "
                "is the prepared cache built (`python -m tpurank prepare`) and the model trained?"
            )
        preds = {k: v for k, v in preds.items() if not k.startswith(c + ":")} | dict(got)
        stamps[c] = stamp
        save_predictions(pred_file, preds)
        write_sidecar(meta_file, cfg, paths.data, model=name, split=split, stamps=stamps)
        print(
            f"predict {name} {split} {c}: {len(got)} graphs, {time.perf_counter() - t:.1f} s", file=sys.stderr
        )
    return write_csv(paths, cfg, name, split, expected, preds, args.partial)


def write_csv(
    paths: Paths,
    cfg: Config,
    name: str,
    split: str,
    expected: list[ExpectedGraph],
    preds: dict,
    partial: bool,
) -> int:
    """Write `submissions/<split>_<name>.csv` for the collections fully predicted (test: all)."""
    present = [c for c in COLLECTIONS if any(e.collection == c for e in expected)]
    covered = [c for c in present if all(e.id in preds for e in expected if e.collection == c)]
    target = paths.submissions / f"{split}_{name}.csv"
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
    write_submission(target, costs, rows, cfg, paths.data, **extra)
    scored = extra.get("scores", {}).get("overall")
    note = (
        f" (overall {split} score {scored:.4f} over {len(covered)} collections)" if scored is not None else ""
    )
    print(f"wrote {target}: {len(rows)} rows{note}", file=sys.stderr)
    return 0
