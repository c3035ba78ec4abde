"""The command-line options every stage shares, defined once so they read and behave alike.

`add_common` adds the run-wide options (`--data-dir`, `--out-dir`, `--work-dir`, `--config`,
`--set`) that the CLI resolves into `args.paths` and `args.cfg` before a stage runs; the others are
added by the stages that take them.
"""

from __future__ import annotations

import argparse

from tpurank.core.collections import COLLECTIONS, SPLITS
from tpurank.core.profiles import CHOICES as PROFILE_CHOICES


def jobs_arg(text: str) -> int:
    """argparse type of every `--jobs`: a whole number >= 0 (0 = one per core)."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, got {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 (0 = one per core), got {n}")
    return n


def _names(p: argparse.ArgumentParser, flag: str, names: tuple[str, ...], metavar: str, all_by_default: bool,
           help: str) -> None:  # fmt: skip
    p.add_argument(flag, nargs="+", choices=names, default=list(names) if all_by_default else None,
                   metavar=metavar, help=help)  # fmt: skip


def add_collections(p: argparse.ArgumentParser, all_by_default: bool = True, help: str | None = None) -> None:
    """`--collections C [C ...]`, checked against the five collections.

    Args:
        p: the stage's parser.
        all_by_default: default to all five (else None: the stage decides).
        help: the help text (default: the five names).
    """
    help = help or f"any of {', '.join(COLLECTIONS)} (default: all five)"
    _names(p, "--collections", COLLECTIONS, "C", all_by_default, help)


def add_splits(p: argparse.ArgumentParser, all_by_default: bool = True) -> None:
    """`--splits S [S ...]`: train, valid, test."""
    _names(p, "--splits", SPLITS, "S", all_by_default, "any of train valid test (default: all three)")


def add_jobs(p: argparse.ArgumentParser, default: int | None, help: str) -> None:
    """`--jobs N`: worker processes (0 = one per core)."""
    p.add_argument("--jobs", type=jobs_arg, default=default, metavar="N", help=help)


def add_common(p: argparse.ArgumentParser) -> None:
    """The run-wide options: where data, outputs and intermediates live, and the config."""
    g = p.add_argument_group("common options")
    g.add_argument("--data-dir", help="data root (default: $TPURANK_DATA, Kaggle input, then data/)")
    g.add_argument("--out-dir", help="root for models/, predictions/, submissions/, reports/ (and features/)")
    g.add_argument(
        "--work-dir",
        help="root for the large intermediates, features/ (default: $TPURANK_WORK, else --out-dir)",
    )
    g.add_argument(
        "--profile",
        choices=PROFILE_CHOICES,
        default=None,
        help="training scale: auto (default, or $TPURANK_PROFILE) picks cpu without a usable GPU, kaggle-t4 "
        "on a GPU with <= 16 GB, gpu on a larger one",
    )
    g.add_argument("--config", dest="config_file", help="TOML config file (above the profile)")
    g.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. --set gnn.hidden=128",
    )
