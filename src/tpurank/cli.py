"""`python -m tpurank <stage> [args]`: one subcommand per pipeline stage (the table: tpurank.stages).

The run-wide options are resolved here, once per command, into `args.paths` (Paths) and
`args.cfg` (Config). Expected failures (`TpurankError`, OSError) print as one line on stderr and
exit 1; there is never a bare stack trace for bad input.
"""

from __future__ import annotations

import argparse
import sys

from tpurank.core.env import check_environment
from tpurank.core.memory import ask_torch_for_huge_pages
from tpurank.core.paths import Paths
from tpurank.core.pipes import end_quietly
from tpurank.stages import STAGES, execute, guarded, resolve_config, stage_module, stage_parser

# stages that fill the data root themselves (all, download, synth) or never read it: the synthetic
# fallback (core.paths.synthetic_fallback) stays out of them
NO_DATA_FALLBACK = (
    "all", "download", "synth", "compare-synth", "featurize-pb", "runs", "build-code-dataset",
    "build-models-dataset",
)  # fmt: skip


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
    check_environment()  # every $TPURANK_* variable, as the config is: a bad one stops here
    module = stage_module(name)
    args = stage_parser(name, module).parse_args(argv)
    args.stage = name
    # the others fall back to the synthetic data `all` made; `check PATH...` names its own files
    fallback = name not in NO_DATA_FALLBACK and not (name == "check" and args.targets)
    args.paths = Paths.resolve(args.data_dir, args.out_dir, args.work_dir, fallback=fallback)
    resolve_config(args, args.paths.data)
    if name == "train":  # `all` says it once it knows its data (tpurank.pipeline)
        print(f"[train] {args.profile_info.line}", file=sys.stderr)
    return execute(module, args)


def _flushed(rc: int) -> int:
    """`rc` once stdout is flushed: a closed pipe or a full disk shows here, inside `guarded`,
    not as an exception Python prints at exit."""
    sys.stdout.flush()
    return rc


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ask_torch_for_huge_pages()  # before any stage imports torch (tpurank.core.memory)
    if not argv or argv[0] not in STAGES:
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


if __name__ == "__main__":
    raise SystemExit(main())
