"""The trained models `rank` uses: a trained out folder, or a models dataset as `infer` reads it.

Either way they end up in the work folder's tree, where the stages read them: the models under
`<work>/out/models/` (an out folder's models linked, never written), the node-feature rule the
cache was built with under the work folder's prepared cache, and the config they were trained with.

Any subset of the members (lgbm, gnn, baseline) ranks, with or without a fitted ensemble: by
default the ensemble where its weights are fitted, else the trained member with the best valid
score (`TrainedModels.choose`, in tpurank.kaggle.choice: `infer` chooses the same way), said in one line.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from tpurank.core.config import Config
from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError, command
from tpurank.core.paths import Paths
from tpurank.kaggle.choice import ENSEMBLE, TrainedModels, trained_models, valid_score
from tpurank.kaggle.infer import find_manifest, unpack
from tpurank.kaggle.models_dataset import CONFIG, MANIFEST, read_manifest
from tpurank.kaggle.trained import read_sidecars, trained_config
from tpurank.prepare.node_features import RULE_FILE

__all__ = [
    "ENSEMBLE",
    "TrainedModels",
    "load_models",
    "trained_models",
    "valid_score",
]  # the choice: kaggle/choice.py


def load_models(source: Path, work: Path, prepared: Path | None = None) -> TrainedModels:
    """The models of `source` (a trained out folder, or a folder holding a models dataset), staged in
    the work folder `work`.

    Args:
        source: the trained out folder or models dataset.
        work: the work folder (rank's own).
        prepared: where the out folder's prepared cache lives when not in `source/features/prepared`
            (training ran with `--work-dir`).

    Raises:
        TpurankError: `source` holds neither, or no trained model, or its rule or config is missing
            or broken.
    """
    paths = Paths(data=work / "data", out=work / "out")
    if Paths(data=paths.data, out=source).models.is_dir():
        cfg = _from_out_folder(source, paths, prepared)
    elif source.is_dir() and ((source / MANIFEST).is_file() or any(source.rglob(MANIFEST))):
        manifest_file = find_manifest(source)
        if paths.models.is_symlink():  # an out folder's models, linked: unpacking would write into them
            raise TpurankError(f"{paths.models}: the work folder holds other models; use another --work")
        unpack(manifest_file.parent, read_manifest(manifest_file), paths)
        cfg = load_config(manifest_file.parent / CONFIG, [], saved=True)
    else:
        raise TpurankError(
            f"{source}: neither a trained out folder (with models/) nor a models dataset ({MANIFEST})"
        )
    return TrainedModels(paths, cfg, trained_models(paths, source), source)


def _from_out_folder(source: Path, paths: Paths, prepared: Path | None) -> Config:
    """Link the out folder's models into the work tree, copy its rule; its models' config."""
    trained = Paths(data=paths.data, out=source)  # the out folder's own folders
    rules = [trained.prepared / RULE_FILE, *([prepared / RULE_FILE] if prepared else [])]
    rule = next((r for r in rules if r.is_file()), None)
    if rule is None:
        raise TpurankError(
            f"{rules[0]}: missing (the node-feature rule the models were trained with); name the work folder "
            f"training used (--work-dir), or pass a models dataset ({command('build-models-dataset')})"
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
    members = sorted({m for t in trained_models(paths, source).values() for m in t.members})
    cfg, _ = trained_config(read_sidecars(trained, members), members, Config())
    return cfg
