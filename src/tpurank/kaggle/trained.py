"""What trained models were trained on and with, read from their own sidecars.

`build-models-dataset` packs models for Kaggle; what it records must be what the models are, not
what the current command line says. A model's sidecar (`provenance.json`, or `model.json` for the
GNN) records its data root, the data fingerprint, whether that data was synthetic (`data_synthetic`;
older sidecars: the synth.json its data root still holds) and the config it was trained with (its
collection's, overrides applied). From these come the manifest's data fields and `config.toml`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config, to_dict
from tpurank.core.config_build import from_dict, with_new_names
from tpurank.core.errors import DataError, TpurankError, command
from tpurank.core.paths import Paths, synthetic_scale

SIDECARS = ("provenance.json", "model.json")  # the first a model folder holds is its record
INFERENCE_SECTIONS = ("prepare", "features")  # what infer rebuilds on the test graphs


def read_json(path: Path, fix: str) -> Any:
    """A JSON file of ours, or a one-line DataError that says how to get a good one (`fix`)."""
    try:
        return json.loads(path.read_bytes())
    except OSError as e:
        raise DataError(path, f"unreadable ({e.strerror or e}); {fix}") from None
    except ValueError as e:  # JSONDecodeError and UnicodeDecodeError are both ValueErrors
        raise DataError(path, f"not JSON ({e}); {fix}") from None


@dataclass(frozen=True)
class Sidecar:
    """One model folder's record: `model` for `collection`, read from `path`."""

    model: str
    collection: str
    path: Path
    record: dict[str, Any]

    @property
    def config(self) -> dict[str, Any] | None:
        return self.record.get("config")

    @property
    def name(self) -> str:
        return f"{self.model}/{self.collection}"


def _read_sidecar(model: str, collection: str, side: Path) -> Sidecar:
    """The sidecar at `side`, its `config` and that config's sections checked to be objects."""
    fix = f"retrain {side.parent.parent.name} for {side.parent.name} (or restore the file)"
    record = read_json(side, fix)
    if not isinstance(record, dict):
        raise DataError(side, f"expected a JSON object, found {type(record).__name__}; {fix}")
    trained = record.get("config")
    if trained is not None and not isinstance(trained, dict):
        raise DataError(side, f"'config' is not a JSON object; {fix}")
    for section in INFERENCE_SECTIONS:
        if trained and trained.get(section) is not None and not isinstance(trained[section], dict):
            raise DataError(side, f"'config': [{section}] is not a JSON object; {fix}")
    return Sidecar(model, collection, side, record)


def read_sidecars(paths: Paths, models: list[str]) -> list[Sidecar]:
    """The sidecar of every model folder of `models` (each collection) that has one."""
    out = []
    for m in models:
        for c in COLLECTIONS:
            folder = paths.model_dir(m, c)
            side = next((folder / n for n in SIDECARS if (folder / n).exists()), None)
            if side is not None:
                out.append(_read_sidecar(m, c, side))
    return out


# ------------------------------------------------------------------------------------------ the data


@dataclass
class TrainedData:
    """One data root some of the models were trained on.

    Args:
        root: the data root they recorded (None: not recorded).
        fingerprint: its fingerprint then (tpurank.core.provenance.data_fingerprint).
        synthetic: the synthetic scale; None for real data.
        known: whether real or synthetic is known (False: an old sidecar whose data root is gone).
        models: `model/collection` of each model trained on it.
        sidecar: the first of their sidecars (named in errors).
    """

    root: str | None
    fingerprint: str | None
    synthetic: str | None
    known: bool
    models: list[str] = field(default_factory=list)
    sidecar: Path | None = None

    @property
    def kind(self) -> str:
        return ("synthetic" if self.synthetic else "real") if self.known else "unknown"

    def as_json(self) -> dict[str, Any]:
        return {
            "data_root": self.root,
            "data_fingerprint": self.fingerprint,
            "data": self.kind,
            "synthetic_scale": self.synthetic,
            "models": self.models,
        }


def _data_of(record: dict[str, Any]) -> tuple[str | None, str | None, str | None, bool]:
    """(root, fingerprint, synthetic scale, known) as one sidecar recorded them."""
    root, fingerprint = record.get("data_root"), record.get("data_fingerprint")
    root = root if isinstance(root, str) else None
    fingerprint = fingerprint if isinstance(fingerprint, str) else None
    if record.get("data_synthetic"):
        return root, fingerprint, str(record["data_synthetic"]), True
    if "data_synthetic" in record:
        return root, fingerprint, None, True
    if root is not None and Path(root).is_dir():  # recorded before `data_synthetic` existed
        return root, fingerprint, synthetic_scale(Path(root)), True
    return root, fingerprint, None, False


def trained_data(sidecars: list[Sidecar]) -> list[TrainedData]:
    """The distinct data the models were trained on, the data most of them used first."""
    found: dict[tuple[Any, ...], TrainedData] = {}
    for s in sidecars:
        key = _data_of(s.record)
        entry = found.setdefault(key, TrainedData(*key, sidecar=s.path))
        entry.models.append(s.name)
    return sorted(found.values(), key=lambda d: -len(d.models))


def refuse_synthetic(data: list[TrainedData]) -> None:
    """Raise when any model was trained on synthetic data (build-models-dataset --allow-synthetic)."""
    for d in data:
        if d.synthetic:
            raise TpurankError(
                f"{d.sidecar}: {d.models[0]} was trained on synthetic data ({d.root}, '{d.synthetic}' "
                "scale): its scores are not Kaggle scores and a submission from these models would score "
                "near random on Kaggle; train on the real data, or pass --allow-synthetic to pack them anyway"
            )


# ---------------------------------------------------------------------------------------- the config


def _results_part(section: dict[str, Any] | None) -> dict[str, Any] | None:
    """A config section without the settings that change speed only (worker counts)."""
    return None if section is None else {k: v for k, v in section.items() if k != "jobs"}


def _collection_config(sides: list[Sidecar], members: list[str]) -> dict[str, Any]:
    """One collection's config as its models were trained: the ensemble's record (the last trained),
    each member's own section from the member's record; [prepare] and [features] must agree."""
    by_model = {s.model: s for s in sides}
    first = by_model.get("ensemble") or sides[0]
    merged = dict(first.config or {})
    for m in members:
        if m in by_model and m in (by_model[m].config or {}):
            merged[m] = by_model[m].config[m]  # type: ignore[index]
    for s in sides:
        for section in INFERENCE_SECTIONS:
            mine, theirs = _results_part((s.config or {}).get(section)), _results_part(merged.get(section))
            if mine != theirs:
                raise TpurankError(
                    f"{s.path}: trained with [{section}] {mine} but {first.path} with {theirs}; infer "
                    f"would prepare the test graphs for one of them only: retrain them together ({command('all')})"
                )
    return merged


def _normalized(sides: list[Sidecar], collection: str, data: dict[str, Any]) -> dict[str, Any]:
    """`data` read back as a Config of `collection` (keys added or renamed since, values coerced), as a dict."""
    try:
        resolved = from_dict({**with_new_names(data), "collections": {}}).for_collection(collection)
    except TpurankError as e:
        raise TpurankError(f"{sides[0].path}: its config does not read in this version ({e})") from None
    out = to_dict(resolved)
    out.pop("collections")
    return out


def _diff(value: dict[str, Any], base: dict[str, Any]) -> dict[str, Any]:
    """The keys of `value` that differ from `base`, nested tables compared key by key."""
    out: dict[str, Any] = {}
    for k, v in value.items():
        b = base.get(k)
        if isinstance(v, dict) and isinstance(b, dict):
            if sub := _diff(v, b):
                out[k] = sub
        elif v != b:
            out[k] = v
    return out


def _leaves(d: dict[str, Any]) -> int:
    return sum(_leaves(v) if isinstance(v, dict) else 1 for v in d.values())


def trained_config(sidecars: list[Sidecar], members: list[str], current: Config) -> tuple[Config, str]:
    """(the config the models were trained with, where it came from).

    Each collection's config comes from its models' sidecars (`_collection_config`); the five are
    written as one config: a base (the collection's config closest to the others) and a
    [collections] table per collection for what differs. A collection whose models recorded no
    config takes `current`'s (and the source says so).
    """
    per: dict[str, dict[str, Any]] = {}
    missing = []
    for c in COLLECTIONS:
        sides = [s for s in sidecars if s.collection == c and s.config]
        if sides:
            per[c] = _normalized(sides, c, _collection_config(sides, members))
        else:
            missing.append(c)
    if not per:
        return current, "the current config (the models recorded none)"
    for c in missing:
        per[c] = {k: v for k, v in to_dict(current.for_collection(c)).items() if k != "collections"}
    base = min(per.values(), key=lambda b: sum(_leaves(_diff(v, b)) for v in per.values()))
    tables = {c: d for c in COLLECTIONS if (d := _diff(per[c], base))}
    cfg = from_dict({**base, "collections": tables})
    for c in COLLECTIONS:
        back = to_dict(cfg.for_collection(c))
        back.pop("collections")
        if back != per[c]:
            raise TpurankError(
                f"the config of {c} the models recorded does not rebuild; retrain ({command('all')})"
            )
    source = "the models' sidecars"
    if missing:
        source += f" (the current config for {', '.join(missing)}: its models recorded none)"
    return cfg, source
