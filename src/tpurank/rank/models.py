"""The trained models `rank` uses: a trained out folder, or a models dataset as `infer` reads it.

Either way they end up in the work folder's tree, where the stages read them: the models under
`<work>/out/models/` (an out folder's models linked, never written), the node-feature rule the
cache was built with under the work folder's prepared cache, and the config they were trained with.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

from tpurank.core.collections import COLLECTIONS
from tpurank.core.config import Config
from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.kaggle.infer import find_manifest, unpack
from tpurank.kaggle.models_dataset import CONFIG, MANIFEST, read_manifest
from tpurank.kaggle.trained import read_sidecars, trained_config
from tpurank.models.weights import WEIGHTS_FILE, read_weights
from tpurank.prepare.node_features import RULE_FILE

ENSEMBLE = "ensemble"


@dataclass
class TrainedModels:
    """Models ready to predict in a work tree.

    Args:
        paths: the work tree (its `data` is filled with the user's graphs, `out` holds the models).
        cfg: the config the models were trained with.
        members: collection -> the models its fitted ensemble combines.
        source: where the models came from (named in messages).
    """

    paths: Paths
    cfg: Config
    members: dict[str, list[str]]
    source: Path

    def models_for(self, collection: str, model: str) -> list[str]:
        """The models predicting `collection` for `model`: the ensemble's members and itself, or one.

        Raises:
            TpurankError: the models were not trained for this collection, or without this model.
        """
        trained = sorted(self.members)
        if collection not in self.members:
            raise TpurankError(
                f"{self.source}: no models trained for {collection} (trained: {', '.join(trained) or 'none'})"
            )
        if model == ENSEMBLE:
            return [*self.members[collection], ENSEMBLE]
        if not (self.paths.model_dir(model, collection)).is_dir():
            have = ", ".join([*self.members[collection], ENSEMBLE])
            raise TpurankError(f"{self.source}: no {model} model for {collection} (there: {have})")
        return [model]


def load_models(source: Path, work: Path, prepared: Path | None = None) -> TrainedModels:
    """The models of `source` (a trained out folder, or a folder holding a models dataset), staged in
    the work folder `work`.

    Args:
        source: the trained out folder or models dataset.
        work: the work folder (rank's own).
        prepared: where the out folder's prepared cache lives when not in `source/features/prepared`
            (training ran with `--work-dir`).

    Raises:
        TpurankError: `source` holds neither, or its ensemble, rule or config is missing or broken.
    """
    paths = Paths(data=work / "data", out=work / "out")
    if Paths(data=paths.data, out=source).models.is_dir():
        cfg = _from_out_folder(source, paths, prepared)
    elif source.is_dir() and ((source / MANIFEST).is_file() or any(source.rglob(MANIFEST))):
        manifest_file = find_manifest(source)
        if paths.models.is_symlink():  # an out folder's models, linked: unpacking would write into them
            raise TpurankError(f"{paths.models}: the work folder holds other models; use another --work")
        unpack(manifest_file.parent, read_manifest(manifest_file), paths)
        cfg = load_config(manifest_file.parent / CONFIG, [])
    else:
        raise TpurankError(
            f"{source}: neither a trained out folder (with models/) nor a models dataset ({MANIFEST})"
        )
    return TrainedModels(paths, cfg, _members(paths), source)


def _from_out_folder(source: Path, paths: Paths, prepared: Path | None) -> Config:
    """Link the out folder's models into the work tree, copy its rule; its models' config."""
    trained = Paths(data=paths.data, out=source)  # the out folder's own folders
    rules = [trained.prepared / RULE_FILE, *([prepared / RULE_FILE] if prepared else [])]
    rule = next((r for r in rules if r.is_file()), None)
    if rule is None:
        raise TpurankError(
            f"{rules[0]}: missing (the node-feature rule the models were trained with); name the work folder "
            "training used (--work-dir), or pass a models dataset (./run.sh build-models-dataset)"
        )
    link = paths.models
    if link.is_symlink() or link.exists():
        if not link.is_symlink() or link.resolve() != trained.models.resolve():
            raise TpurankError(f"{link}: the work folder holds other models; use another --work")
    else:
        paths.out.mkdir(parents=True, exist_ok=True)
        link.symlink_to(trained.models.resolve(), target_is_directory=True)
    paths.prepared.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(rule, paths.prepared / RULE_FILE)
    members = sorted({m for ms in _members(paths).values() for m in ms})
    cfg, _ = trained_config(read_sidecars(trained, members), members, Config())
    return cfg


def _members(paths: Paths) -> dict[str, list[str]]:
    """Collection -> its fitted ensemble's members, for every collection with a fitted ensemble."""
    out = {}
    for c in COLLECTIONS:
        wfile = paths.model_dir(ENSEMBLE, c) / WEIGHTS_FILE
        if wfile.is_file():
            out[c] = list(read_weights(wfile)["members"])
    if not out:
        raise TpurankError(f"{paths.models}: no fitted ensemble (train one: ./run.sh all)")
    return out
