"""The stage table, and how one stage runs once its paths and config are resolved.

Each stage lives in its own module exposing `add_arguments(parser)` and `run(args) -> int`; the
module is imported only when its stage runs, so `--help` is instant. A stage module may define
`output_folders(args) -> list[Path]`: the folders it writes, each held under an exclusive lock
while it runs (tpurank.core.lock). The CLI resolves `args.paths` (Paths) and `args.cfg` (Config)
once per command; `all` and `infer` hand the same objects to every stage they run (`run_stage`).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from tpurank.chain import Step
from tpurank.core.config import Config
from tpurank.core.config_files import config_layers, from_layers
from tpurank.core.errors import TpurankError
from tpurank.core.lock import output_locks
from tpurank.core.options import add_common
from tpurank.core.paths import NPZ_SUBDIR, Paths, preset_file, synthetic_scale
from tpurank.core.pipes import stdout_closed
from tpurank.core.profiles import resolve_profile

# core/config.py's defaults are sized for the real data; on small synthetic data every stage trains
# less (this preset, above the profile and under the user's --config and --set), so the demo `all`
# ends within 15 minutes on 2 cores
SMALL_SCALES = ("tiny", "demo")
DEMO_PRESET = "demo.toml"

# stage -> (module, one-line help). Order is the pipeline's order.
STAGES: dict[str, tuple[str, str]] = {
    "download": ("tpurank.data.download", "download and unpack the competition data with the kaggle package"),
    "synth": ("tpurank.synth.cli", "generate a synthetic dataset in the exact real format"),
    "compare-synth": (
        "tpurank.report.compare_synth",
        "compare a synthetic dataset with real files, side by side",
    ),
    "check": ("tpurank.data.check", "validate npz files or whole dataset trees"),
    "featurize-pb": ("tpurank.pb.featurize", "turn raw tuning protobufs into dataset npz files"),
    "prepare": ("tpurank.prepare.stage", "prune, deduplicate and compact every graph into the cache"),
    "features": ("tpurank.features.stage", "build tabular feature tables from the prepared cache"),
    "train": ("tpurank.rankers.train", "train a model (--model lgbm | gnn | baseline) per collection"),
    "predict": ("tpurank.rankers.predict", "score a split with a model and write its submission CSV"),
    "ensemble": ("tpurank.rankers.ensemble", "fit ensemble weights on valid and write its predictions"),
    "score": ("tpurank.submission.score", "score an ID,TopConfigs CSV against known runtimes"),
    "validate": ("tpurank.report.validate", "write reports/validation.md with every model side by side"),
    "check-submission": ("tpurank.submission.check", "validate a submission CSV, listing every problem"),
    "submit": ("tpurank.submission.submit", "submit the checked CSV to Kaggle with the kaggle package"),
    "all": ("tpurank.pipeline", "run the whole pipeline end to end"),
    "config": (
        "tpurank.report.config_show",
        "config show: every key of the resolved config, its default and overrides",
    ),
    "runs": ("tpurank.report.runs", "table runs side by side: config differences, scores, training time"),
    "build-code-dataset": ("tpurank.kaggle.code_dataset", "package the code for the Kaggle notebooks"),
    "build-models-dataset": (
        "tpurank.kaggle.models_dataset",
        "pack trained models for the Kaggle inference notebook",
    ),
    "infer": (
        "tpurank.kaggle.infer",
        "test submission from a models dataset: prepare test, predict, no training",
    ),
}


def resolve_config(args: argparse.Namespace, data_root: Path) -> None:
    """Set `args.profile_info` (Profile), `args.layers` and `args.cfg`: what a run on `data_root` uses.

    The layers, lowest first: the profile (`--profile`, else the device's), the demo preset when the
    data is small synthetic data, the user's `--config`, then `--set` (core/config.py config_layers).
    """
    profile = resolve_profile(getattr(args, "profile", None))
    scale = synthetic_scale(data_root) if (data_root / NPZ_SUBDIR).is_dir() else None
    preset = preset_file(DEMO_PRESET) if scale in SMALL_SCALES else None
    args.profile_info = profile
    args.layers = config_layers(args.config_file, args.set, preset, profile.file)
    args.cfg = from_layers(args.layers)


def stage_module(name: str) -> ModuleType:
    """The module of stage `name` (imported now)."""
    module = STAGES[name][0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise TpurankError(f"stage module {module} is not available in this version") from None
        raise


def stage_parser(name: str, module: ModuleType, common: bool = True) -> argparse.ArgumentParser:
    """The parser of one stage: its own options, then (`common`) the run-wide ones."""
    parser = argparse.ArgumentParser(prog=f"tpurank {name}", description=STAGES[name][1])
    module.add_arguments(parser)
    if common:
        add_common(parser)
    return parser


def execute(module: ModuleType, args: argparse.Namespace) -> int:
    """Run a stage on parsed arguments, its output folders locked; a success leaves its step
    record (tpurank.chain: what it read and wrote, by content), which `all` trusts."""
    folders = module.output_folders(args) if hasattr(module, "output_folders") else []
    with output_locks(folders, args.stage):
        step = Step(args)  # its inputs named before it reads them
        rc = int(module.run(args) or 0)
        if rc == 0:
            step.save()
        return rc


def stage_args(
    name: str, argv: list[str], paths: Paths, cfg: Config
) -> tuple[ModuleType, argparse.Namespace]:
    """The module of stage `name` and its parsed options `argv` on the caller's paths and config."""
    module = stage_module(name)
    args = stage_parser(name, module, common=False).parse_args(argv)
    args.stage, args.paths, args.cfg = name, paths, cfg
    args.config_file, args.set = None, []
    return module, args


def run_stage(name: str, argv: list[str], paths: Paths, cfg: Config) -> int:
    """Run stage `name` with its own options `argv` and the caller's resolved paths and config.

    Args:
        name: a key of STAGES.
        argv: the stage's own options (no run-wide ones: those are `paths` and `cfg`).
        paths: the resolved folders.
        cfg: the resolved config.
    """
    return execute(*stage_args(name, argv, paths, cfg))


def run_command(argv: list[str], paths: Paths, cfg: Config) -> int:
    """Run `tpurank <argv>` (argv[0] names the stage) on resolved paths and config, as `all` and
    `infer` run their steps: an expected failure is printed in one line and returns 1."""
    return guarded(argv[0], lambda: run_stage(argv[0], argv[1:], paths, cfg))


def os_error_line(e: OSError) -> str:
    """`<file>: <reason>` for an OSError, without Python's `[Errno N]` prefix."""
    where = f"{e.filename}: " if e.filename else ""
    if e.filename2:
        where = f"{e.filename} -> {e.filename2}: "
    return f"{where}{e.strerror or e}"


def guarded(name: str, call: Callable[[], int]) -> int:
    """`call()`, with an expected failure (TpurankError, OSError) printed as one line: exit 1."""
    try:
        return call()
    except TpurankError as e:
        print(f"tpurank {name}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # an unwritable output folder, a full disk: the message names the file
        if isinstance(e, BrokenPipeError) and stdout_closed():
            raise  # our reader left (`| head`): not an error, cli.main ends quietly (core/pipes.py)
        print(f"tpurank {name}: error: {os_error_line(e)}", file=sys.stderr)
        return 1
