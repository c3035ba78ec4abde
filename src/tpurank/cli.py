"""`python -m tpurank <stage> [args]`: one subcommand per pipeline stage.

Each stage lives in its own module exposing `add_arguments(parser)` and `run(args) -> int`; the
module is imported only when its stage runs, so `--help` is instant. Before a stage runs, the
common options are resolved into `args.paths` (Paths) and `args.cfg` (Config). Expected failures
(`TpurankError`, OSError) print as one line on stderr and exit 1; there is never a bare stack
trace for bad input. A stage module may define `output_folders(args) -> list[Path]`: the folders
it writes, each held under an exclusive lock while it runs (tpurank.lock).
"""

from __future__ import annotations

import argparse
import importlib
import sys

from tpurank.config import load_config
from tpurank.errors import TpurankError
from tpurank.lock import output_locks
from tpurank.memory import ask_torch_for_huge_pages
from tpurank.paths import Paths

# stage -> (module, one-line help). Order is the pipeline's order.
STAGES: dict[str, tuple[str, str]] = {
    "download": ("tpurank.download", "download and unpack the competition data with the kaggle package"),
    "synth": ("tpurank.synth.cli", "generate a synthetic dataset in the exact real format"),
    "check": ("tpurank.check", "validate npz files or whole dataset trees"),
    "featurize-pb": ("tpurank.pb.featurize", "turn raw tuning protobufs into dataset npz files"),
    "prepare": ("tpurank.prepare.stage", "prune, deduplicate and compact every graph into the cache"),
    "features": ("tpurank.tabular.stage", "build tabular feature tables from the prepared cache"),
    "train": ("tpurank.train", "train a model (--model lgbm | gnn | baseline) per collection"),
    "predict": ("tpurank.predict", "score a split with a model and write its submission CSV"),
    "ensemble": ("tpurank.ensemble", "fit ensemble weights on valid and write its predictions"),
    "score": ("tpurank.score", "score an ID,TopConfigs CSV against known runtimes"),
    "validate": ("tpurank.validate", "write reports/validation.md with every model side by side"),
    "check-submission": ("tpurank.submission_check", "validate a submission CSV, listing every problem"),
    "submit": ("tpurank.submit", "submit the checked CSV to Kaggle with the kaggle package"),
    "all": ("tpurank.pipeline", "run the whole pipeline end to end"),
    "build-code-dataset": ("tpurank.kaggle_code", "package the code for the Kaggle notebooks"),
    "build-models-dataset": (
        "tpurank.models_dataset",
        "pack trained models for the Kaggle inference notebook",
    ),
    "infer": ("tpurank.infer", "test submission from a models dataset: prepare test, predict, no training"),
}


def _common(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("common options")
    g.add_argument("--data-dir", help="data root (default: $TPURANK_DATA, Kaggle input, then data/)")
    g.add_argument("--out-dir", help="root for models/, predictions/, submissions/, reports/ (and features/)")
    g.add_argument(
        "--work-dir",
        help="root for the large intermediates, features/ (default: $TPURANK_WORK, else --out-dir)",
    )
    g.add_argument("--config", dest="config_file", help="TOML config file")
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. --set gnn.hidden=128",
    )


def common_argv(args: argparse.Namespace, data_dir: str | None = None) -> list[str]:
    """The resolved common options of `args` as arguments, for a stage that runs other stages."""
    out = ["--data-dir", str(data_dir or args.paths.data), "--out-dir", str(args.paths.out)]
    if args.paths.work is not None:
        out += ["--work-dir", str(args.paths.work)]
    if args.config_file:
        out += ["--config", args.config_file]
    for item in args.set:
        out += ["--set", item]
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpurank",
        description="Rank XLA compiler configurations by runtime (TpuGraphs). Stages, in pipeline order:",
    )
    sub = parser.add_subparsers(dest="stage", metavar="STAGE", required=True)
    for name, (module, help_text) in STAGES.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module)
    return parser


def jobs_arg(text: str) -> int:
    """argparse type of every `--jobs`: a whole number >= 0 (0 = one per core)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0 = one per core), got {n}")
    return n


def os_error_line(e: OSError) -> str:
    """`<file>: <reason>` for an OSError, without Python's `[Errno N]` prefix."""
    where = f"{e.filename}: " if e.filename else ""
    if e.filename2:
        where = f"{e.filename} -> {e.filename2}: "
    return f"{where}{e.strerror or e}"


def _stage_module(module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and module.startswith(e.name):
            raise TpurankError(f"stage module {module} is not available in this version") from None
        raise


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ask_torch_for_huge_pages()  # before any stage imports torch (tpurank.memory)
    parser = build_parser()
    # First pass: find the stage; then let its module add its own arguments and parse again.
    head = [a for a in argv if a not in ("-h", "--help")]
    known, _ = parser.parse_known_args(head) if head and head[0] in STAGES else (None, None)
    if known is None:
        parser.parse_args(argv)  # prints help or a usage error and exits
        return 2
    stage_parser = argparse.ArgumentParser(prog=f"tpurank {known.stage}", description=STAGES[known.stage][1])
    try:
        module = _stage_module(known._module)
        module.add_arguments(stage_parser)
        _common(stage_parser)
        args = stage_parser.parse_args(argv[1:])
        args.stage = known.stage
        args.paths = Paths.resolve(args.data_dir, args.out_dir, args.work_dir)
        args.cfg = load_config(args.config_file, args.set)
        folders = module.output_folders(args) if hasattr(module, "output_folders") else []
        with output_locks(folders, known.stage):
            return int(module.run(args) or 0)
    except TpurankError as e:
        print(f"tpurank {known.stage}: error: {e}", file=sys.stderr)
        return 1
    except OSError as e:  # an unwritable output folder, a full disk: the message names the file
        print(f"tpurank {known.stage}: error: {os_error_line(e)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"tpurank {known.stage}: interrupted (finished outputs are kept)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
