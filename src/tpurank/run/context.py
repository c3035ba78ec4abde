"""Where a command's folders and config come from: decided here, once per command.

The order, first match wins, and every command (and each step of `all`) receives the result:

1. The data root: `--data-dir`, then `$TPURANK_DATA`, then the Kaggle input folder, then `data/`
   (tpurank.core.paths.resolve_data_root). A command that reads the data and was not told where
   falls back, when `data/` holds no dataset, to the synthetic tree `./run.sh all` made there
   (`core.paths.synthetic_fallback`); those that fill the data root or never read it (OWN_DATA) do not.
2. The outputs: `--out-dir`, else the project root; the intermediates: `--work-dir`, else
   `$TPURANK_WORK`, else the outputs' folder.
3. `all` alone finds or makes its data first (the data root, else a Kaggle download, else the
   synthetic demo generated with the seed of the user's layers: `seed_before_data`).
4. The config, from its layers, lowest first: the profile (`--profile`, else the device's), the demo
   preset when the data is small synthetic data, `--config`, then `--set` (`resolve_config`).
5. Commands that predict with models trained elsewhere (`infer`, `rank`, `tune`) take the config
   those models were trained with, from the models dataset they read (`--config` and `--set` over it
   where the command takes them): a model predicts with the settings it was trained with, whatever
   this machine's profile (kaggle/infer.py, rank/models.py). Step 4 is not theirs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from tpurank.core.config_files import config_layers, from_layers
from tpurank.core.errors import TpurankError
from tpurank.core.names import NEURAL_MODELS, Model
from tpurank.core.paths import NPZ_SUBDIR, Paths, preset_file, synthetic_scale
from tpurank.core.profiles import default_budget_s, parse_duration, resolve_profile, with_cpu_warning

# core/config.py's defaults are sized for the real data; on small synthetic data every stage trains
# less (this preset, above the profile and under the user's --config and --set), so the demo `all`
# ends within 15 minutes on 2 cores
SMALL_SCALES = ("tiny", "demo")
DEMO_PRESET = "demo.toml"
# commands that fill the data root themselves (all, download, synth), never read it, or find it from
# their input (check-submission, submit): the synthetic fallback stays out of them (step 1)
OWN_DATA = (
    "all",
    "download",
    "synth",
    "compare-synth",
    "featurize-pb",
    "runs",
    "build-code-dataset",
    "build-models-dataset",
    "rank",
    "tune",
    "check-submission",  # the data its CSV was made for (submission/reference.py), said in one line
    "submit",
)
CONFIG_ELSEWHERE = (
    "all",  # its config waits for the data it finds or makes (step 3)
    "infer",  # the models' own (step 5)
    "rank",
    "tune",
)


def resolve_command(name: str, args: argparse.Namespace) -> None:
    """Set `args.paths` (steps 1 and 2) and, but for CONFIG_ELSEWHERE, the config (step 4)."""
    # `check PATH...` names its own files
    fallback = name not in OWN_DATA and not (name == "check" and getattr(args, "targets", None))
    args.paths = Paths.resolve(args.data_dir, args.out_dir, args.work_dir, fallback=fallback)
    if name not in CONFIG_ELSEWHERE:
        resolve_config(args, args.paths.data)


def seed_before_data(args: argparse.Namespace) -> int:
    """The seed of the user's layers (profile, `--config`, `--set`): what `all` generates its
    synthetic data with before that data decides the demo preset (step 3)."""
    profile = resolve_profile(getattr(args, "profile", None))
    return from_layers(config_layers(args.config_file, args.set, None, profile.file)).seed


def resolve_config(args: argparse.Namespace, data_root: Path) -> None:
    """Set `args.profile_info` (Profile), `args.layers` and `args.cfg`: what a run on `data_root` uses
    (step 4)."""
    profile = resolve_profile(getattr(args, "profile", None))
    scale = synthetic_scale(data_root) if (data_root / NPZ_SUBDIR).is_dir() else None
    preset = preset_file(DEMO_PRESET) if scale in SMALL_SCALES else None
    args.layers = config_layers(args.config_file, args.set, preset, profile.file)
    args.cfg = from_layers(args.layers)
    model = getattr(args, "model", None) or Model.GNN.value  # `all` trains the GNN
    if model in NEURAL_MODELS:  # a GPU profile on a CPU: its projected training time, in its line
        collections = getattr(args, "collections", None)
        profile = with_cpu_warning(profile, args.cfg, collections, model, run_budget_s(args))
    args.profile_info = profile


def run_budget_s(args: argparse.Namespace) -> float | None:
    """The whole run's budget in seconds when the command has one (`all --budget`, else its default:
    `core.profiles.default_budget_s`), None for a stage without (`train`: the config's time budgets apply)."""
    if not hasattr(args, "budget"):
        return None
    try:
        return parse_duration(args.budget) if args.budget else default_budget_s(args.cfg)
    except TpurankError:  # a bad --budget: `all` says so in its own line
        return None
