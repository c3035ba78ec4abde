"""`tpurank <command> [args]`: one subcommand per command (the table: `COMMANDS`); `--help` lists them
as STAGEs, its word for them (the glossary: docs/architecture.md).

The run-wide options are resolved here, once per command, into `args.paths` (Paths) and
`args.cfg` (Config). Expected failures (`TpurankError`, OSError) print as one line on stderr and
exit 1; there is never a bare stack trace for bad input.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
from types import ModuleType

from tpurank.core.env import check_environment
from tpurank.core.errors import TpurankError
from tpurank.core.exit import exit_now
from tpurank.core.memory import ask_torch_for_huge_pages
from tpurank.core.options import (
    CONFIG,
    CONFIG_OPTIONS,
    DATA_DIR,
    FLAGS,
    OUT_DIR,
    RUN_WIDE,
    SET,
    WORK_DIR,
    add_common,
)
from tpurank.core.pipes import end_quietly
from tpurank.run.context import resolve_command
from tpurank.run.stages import execute, guarded

# command -> (module, one-line help). Order is the pipeline's order.
COMMANDS: dict[str, tuple[str, str]] = {
    "download": ("tpurank.data.download", "download and unpack the competition data with the kaggle package"),
    "synth": ("tpurank.synth.cli", "generate a synthetic dataset in the exact real format"),
    "compare-synth": (
        "tpurank.report.compare_synth",
        "compare a synthetic dataset with real files, side by side",
    ),
    "check": ("tpurank.data.check_npz", "validate npz files or whole dataset trees"),
    "featurize-pb": ("tpurank.pb.featurize", "turn raw tuning protobufs into dataset npz files"),
    "prepare": ("tpurank.prepare.cli", "prune, deduplicate and compact every graph into the cache"),
    "features": ("tpurank.features.cli", "build tabular feature tables from the prepared cache"),
    "train": ("tpurank.train.cli", "train a model (--model lgbm | gnn | baseline) per collection"),
    "predict": ("tpurank.predict.cli", "score a split with a model and write its submission CSV"),
    "ensemble": (
        "tpurank.run.ensemble_steps",
        "fit the ensemble on valid (train --model ensemble), then predict valid and test",
    ),
    "score": ("tpurank.submission.score", "score an ID,TopConfigs CSV against known runtimes"),
    "validate": ("tpurank.validate.cli", "write reports/validation.md with every model side by side"),
    "check-submission": ("tpurank.submission.check", "validate a submission CSV, listing every problem"),
    "submit": ("tpurank.submission.submit", "submit the checked CSV to Kaggle with the kaggle package"),
    "all": ("tpurank.run.pipeline", "run the whole pipeline end to end"),
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
    "rank": (
        "tpurank.rank.cli",
        "rank the candidate configs of your own .pb or .npz files with trained models",
    ),
    "tune": (
        "tpurank.tune.cli",
        "replay the autotuning loop on a file with measured runtimes: propose, measure, calibrate",
    ),
}


# command -> the run-wide options it uses (core/options.py); the others are refused in one line, never
# accepted and ignored. A command that keeps a step record or provenance uses the data root, the out and
# work folders and the config; the rest name what they read.
_PATHS_AND_CONFIG = RUN_WIDE
RUN_WIDE_USED: dict[str, tuple[str, ...]] = {
    "download": (DATA_DIR,),  # it fills the data root
    "synth": (DATA_DIR, CONFIG, SET),  # the data root unless --out; the config's seed (no profile sets it)
    "compare-synth": (CONFIG, SET),  # the config's seed; --real and --synthetic name the data
    "check": (DATA_DIR,),
    "featurize-pb": (),  # IN.pb and OUT name everything
    "prepare": _PATHS_AND_CONFIG,
    "features": _PATHS_AND_CONFIG,
    "train": _PATHS_AND_CONFIG,
    "predict": _PATHS_AND_CONFIG,
    "ensemble": _PATHS_AND_CONFIG,
    "score": (DATA_DIR,),  # the CSV against the data's runtimes; writes only --json
    "validate": _PATHS_AND_CONFIG,
    "check-submission": (DATA_DIR,),
    "submit": (DATA_DIR, OUT_DIR),  # submissions/submission.csv unless --file; checked against the data
    "all": _PATHS_AND_CONFIG,
    "config": (DATA_DIR, *CONFIG_OPTIONS),  # the data decides the demo preset
    "runs": (OUT_DIR,),  # unless OUT folders are named
    "build-code-dataset": (),  # the source and --dest
    "build-models-dataset": (
        OUT_DIR,
        WORK_DIR,
        *CONFIG_OPTIONS,
    ),  # models, the cache's rule; a fallback config
    "infer": (DATA_DIR, OUT_DIR, WORK_DIR, CONFIG, SET),  # the models' own config: no profile
    "rank": (WORK_DIR,),  # the prepared cache training used; everything else in --models and --work
    "tune": (WORK_DIR,),  # as rank
}


# command -> (its own option, as shown, the run-wide option it leaves unused when given)
OVERRIDES: dict[str, tuple[str, str, str]] = {
    "synth": ("out", "--out", DATA_DIR),
    "check": ("targets", "PATH", DATA_DIR),
    "submit": ("file", "--file", OUT_DIR),
    "runs": ("outs", "OUT", OUT_DIR),
}


def refuse_overridden(name: str, args: argparse.Namespace, parser: argparse.ArgumentParser) -> None:
    """Exit 2 in one line when a command's own option and the run-wide one it replaces are both given
    (`check PATH --data-dir X`): one of them would be ignored without a word."""
    if name not in OVERRIDES:
        return
    own, shown, dest = OVERRIDES[name]
    if getattr(args, own) and getattr(args, dest) is not None:
        flag = FLAGS[dest]
        parser.exit(2, f"tpurank {name}: error: {flag}: ignored when {shown} is given; give one of them\n")


def command_module(name: str) -> ModuleType:
    """The module of command `name` (imported now)."""
    module = COMMANDS[name][0]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise TpurankError(f"stage module {module} is not available in this version") from None
        raise


def command_parser(name: str, module: ModuleType, common: bool = True) -> argparse.ArgumentParser:
    """The parser of one command: its own options, then (`common`) the run-wide ones."""
    parser = argparse.ArgumentParser(prog=f"tpurank {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    options = getattr(module, "Options", None)
    wants_force = options is not None and "force" in {f.name for f in dataclasses.fields(options)}
    if wants_force and parser.get_default("force") is None:  # a recorded command without a deeper --force
        parser.add_argument(
            "--force", action="store_true", help="run even when its step record says it is up to date"
        )
    if common:
        add_common(parser, RUN_WIDE_USED.get(name, RUN_WIDE))  # every command is listed (a test checks)
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpurank",
        description="Rank XLA compiler configurations by runtime (TpuGraphs). Stages, in pipeline order:",
    )
    sub = parser.add_subparsers(dest="command", metavar="STAGE", required=True)
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def _run(name: str, argv: list[str]) -> int:
    check_environment()  # every $TPURANK_* variable, as the config is: a bad one stops here
    module = command_module(name)
    parser = command_parser(name, module)
    args = parser.parse_args(argv)
    refuse_overridden(name, args, parser)
    args.command = name
    resolve_command(name, args)  # the data root, the folders and the config, in their order
    if name == "train":  # `all` says it once it knows its data (tpurank.run.pipeline)
        print(f"[train] {args.profile_info.line}", file=sys.stderr)
    return execute(module, args)


def _flushed(rc: int) -> int:
    """`rc` once stdout is flushed: a closed pipe or a full disk shows here, inside `guarded`,
    not as an exception Python prints at exit."""
    sys.stdout.flush()
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ask_torch_for_huge_pages()  # before any command imports torch (tpurank.core.memory)
    if not argv or argv[0] not in COMMANDS:
        build_parser().parse_args(argv)  # prints help or a usage error and exits
        return 2
    name = argv[0]
    try:
        return guarded(name, lambda: _flushed(_run(name, argv[1:])))
    except BrokenPipeError:  # stdout's reader left (`config show | head -1`); guarded let it through
        return end_quietly()
    except KeyboardInterrupt:
        print(f"tpurank {name}: interrupted (finished outputs are kept)", file=sys.stderr)
        return 130


def entry() -> None:
    """The `tpurank` command (and `python -m tpurank`): `main`, then the exit that skips unloading
    the modules (tpurank.core.exit)."""
    exit_now(main())


if __name__ == "__main__":
    entry()
