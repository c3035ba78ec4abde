"""`python -m tpurank <stage> [args]`: one subcommand per pipeline stage (the table: tpurank.stages).

The run-wide options are resolved here, once per command, into `args.paths` (Paths) and
`args.cfg` (Config). Expected failures (`TpurankError`, OSError) print as one line on stderr and
exit 1; there is never a bare stack trace for bad input.
"""

from __future__ import annotations

import argparse
import sys

from tpurank.core.config import load_config
from tpurank.core.memory import ask_torch_for_huge_pages
from tpurank.core.paths import Paths
from tpurank.stages import STAGES, execute, guarded, stage_module, stage_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tpurank",
        description="Rank XLA compiler configurations by runtime (TpuGraphs). Stages, in pipeline order:",
    )
    sub = parser.add_subparsers(dest="stage", metavar="STAGE", required=True)
    for name, (_, help_text) in STAGES.items():
        sub.add_parser(name, help=help_text, description=help_text)
    return parser


def _run(name: str, argv: list[str]) -> int:
    module = stage_module(name)
    args = stage_parser(name, module).parse_args(argv)
    args.stage = name
    args.paths = Paths.resolve(args.data_dir, args.out_dir, args.work_dir)
    args.cfg = load_config(args.config_file, args.set)
    return execute(module, args)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ask_torch_for_huge_pages()  # before any stage imports torch (tpurank.core.memory)
    if not argv or argv[0] not in STAGES:
        build_parser().parse_args(argv)  # prints help or a usage error and exits
        return 2
    name = argv[0]
    try:
        return guarded(name, lambda: _run(name, argv[1:]))
    except KeyboardInterrupt:
        print(f"tpurank {name}: interrupted (finished outputs are kept)", file=sys.stderr)
        return 130


if __name__ == "__main__":
    raise SystemExit(main())
