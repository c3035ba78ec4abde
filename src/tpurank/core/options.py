"""The command-line options every command shares, defined once so they read and behave alike.

`add_common` adds the run-wide options (`--data-dir`, `--out-dir`, `--work-dir`, `--profile`,
`--config`, `--set`) that the CLI resolves into `args.paths` and `args.cfg` before a command runs:
those the command uses (each command names them: tpurank.cli.RUN_WIDE_USED), the others refused in one
line (an option accepted and ignored would leave the user looking for output that is not there). The
others are added by the commands that take them.
"""

from __future__ import annotations

import argparse
from typing import Any

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


def _names(
    p: argparse.ArgumentParser,
    flag: str,
    names: tuple[str, ...],
    metavar: str,
    all_by_default: bool,
    help: str,
) -> None:
    p.add_argument(
        flag,
        nargs="+",
        choices=names,
        default=list(names) if all_by_default else None,
        metavar=metavar,
        help=help,
    )


def add_collections(p: argparse.ArgumentParser, all_by_default: bool = True, help: str | None = None) -> None:
    """`--collections C [C ...]`, checked against the five collections.

    Args:
        p: the command's parser.
        all_by_default: default to all five (else None: the command decides).
        help: the help text (default: the five names).
    """
    help = help or f"any of {', '.join(COLLECTIONS)} (default: all five)"
    _names(p, "--collections", COLLECTIONS, "C", all_by_default, help)


def add_splits(p: argparse.ArgumentParser, all_by_default: bool = True) -> None:
    """`--splits S [S ...]`: train, valid, test."""
    _names(p, "--splits", SPLITS, "S", all_by_default, "any of train valid test (default: all three)")


def add_scored_configs(p: argparse.ArgumentParser) -> None:
    """`--official-subsets DIR` or `--all-configs` (`score`, `validate`): which configs of a layout
    graph its score counts, by default at most 1,000 (tpurank.data.subsets.scored_configs)."""
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--official-subsets", metavar="DIR", help="eval_indices folder: score layout graphs on those subsets"
    )
    which.add_argument(
        "--all-configs",
        action="store_true",
        help="score every config of every graph (default: a layout graph on at most 1,000 of them)",
    )


def add_jobs(p: argparse.ArgumentParser, default: int | None, help: str) -> None:
    """`--jobs N`: worker processes (0 = one per core)."""
    p.add_argument("--jobs", type=jobs_arg, default=default, metavar="N", help=help)


# the run-wide options, by their dest; each command names those it uses (tpurank.cli.RUN_WIDE_USED)
DATA_DIR, OUT_DIR, WORK_DIR, PROFILE, CONFIG, SET = (
    "data_dir",
    "out_dir",
    "work_dir",
    "profile",
    "config_file",
    "set",
)
RUN_WIDE = (DATA_DIR, OUT_DIR, WORK_DIR, PROFILE, CONFIG, SET)
CONFIG_OPTIONS = (PROFILE, CONFIG, SET)  # they resolve the config: `--profile` sizes it, the others set it
FLAGS = {
    DATA_DIR: "--data-dir",
    OUT_DIR: "--out-dir",
    WORK_DIR: "--work-dir",
    PROFILE: "--profile",
    CONFIG: "--config",
    SET: "--set",
}


class Refused(argparse.Action):
    """A run-wide option the command does not use: given, it is one line and exit 2, never ignored.

    A command that took `--out-dir X` and wrote nothing there would exit 0 and leave the user looking
    in X for what is not there; every command parses every run-wide option, and those it ignores are
    refused here, at parse time, before anything runs.
    """

    def __init__(
        self, option_strings: list[str], dest: str, uses: tuple[str, ...] = (), **kwargs: Any
    ) -> None:
        self.uses = uses
        kwargs["help"] = argparse.SUPPRESS
        super().__init__(option_strings, dest, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        command = parser.prog.removeprefix("tpurank ")
        takes = ", ".join(FLAGS[d] for d in RUN_WIDE if d in self.uses) or "none"
        parser.exit(
            2,
            f"{parser.prog}: error: {option_string}: {command} does not use it, so it would be ignored "
            f"(the run-wide options {command} takes: {takes})\n",
        )


def add_common(p: argparse.ArgumentParser, uses: tuple[str, ...] = RUN_WIDE) -> None:
    """The run-wide options: where data, outputs and intermediates live, and the config.

    Args:
        p: the command's parser.
        uses: the dests of those the command uses (RUN_WIDE); the others are refused (`Refused`).
    """
    g = p.add_argument_group("common options")

    def add(dest: str, *flags: str, **kwargs: Any) -> None:
        if dest not in uses:
            kwargs = {k: v for k, v in kwargs.items() if k in ("default", "metavar")}
            g.add_argument(*flags, dest=dest, action=Refused, uses=uses, nargs=None, **kwargs)
            return
        g.add_argument(*flags, dest=dest, **kwargs)

    add(DATA_DIR, "--data-dir", help="data root (default: $TPURANK_DATA, Kaggle input, then data/)")
    add(OUT_DIR, "--out-dir", help="root for models/, predictions/, submissions/, reports/ (and features/)")
    add(
        WORK_DIR,
        "--work-dir",
        help="root for the large intermediates, features/ (default: $TPURANK_WORK, else --out-dir)",
    )
    add(
        PROFILE,
        "--profile",
        choices=PROFILE_CHOICES,
        default=None,
        help="training scale: auto (default, or $TPURANK_PROFILE) picks cpu without a usable GPU, kaggle-t4 "
        "on a GPU with <= 16 GB, gpu on a larger one",
    )
    add(CONFIG, "--config", help="TOML config file (above the profile)")
    add(
        SET,
        "--set",
        action="append",
        default=[],
        metavar="SECTION.KEY=VALUE",
        help="override one config value (repeatable), e.g. --set gnn.hidden=128",
    )
