"""How one command runs once its paths and config are resolved, alone or as a step of `all`/`infer`.

A command's module exposes `add_arguments(parser)` and `run(args) -> int`. A command that writes declares
it beside its code: `declare(args) -> StageIO` (tpurank.core.staleness), the files it reads and
writes and the config sections it reads; its `Options` dataclass names its options, marking those
that never change its result. `execute` locks the folders it writes (tpurank.core.lock), skips it
when its step record (tpurank.run.records) says it is up to date, and records a success. The CLI
(tpurank.cli: the table of commands) parses a command's options from the command line; `all` and
`infer` build the `Options` directly and hand every step the same resolved paths and config.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import sys
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.lock import output_locks
from tpurank.core.names import StepCommand
from tpurank.core.paths import Paths
from tpurank.core.pipes import stdout_closed
from tpurank.core.staleness import StageIO
from tpurank.prepare.built_with import check_prepared
from tpurank.run.records import NEVER_RAN, StepRecord, result_options


def declaration(module: ModuleType, args: argparse.Namespace) -> StageIO | None:
    """The command's declaration for this run (None for one that writes nothing of the pipeline's)."""
    return module.declare(args) if hasattr(module, "declare") else None


class StageRun:
    """One run of a command on parsed arguments: its declaration and, when it keeps one, its record
    (keyed now, before it reads anything).

    Args:
        module: the command's module.
        args: its options, `command`, `paths` and `cfg`.
    """

    def __init__(self, module: ModuleType, args: argparse.Namespace) -> None:
        self.module, self.args = module, args
        self.io = declaration(module, args)
        self.record: StepRecord | None = None
        if self.io is None or not self.io.record:
            return
        paths: Paths = args.paths
        if args.command != StepCommand.PREPARE and any(f.root == paths.prepared for f in self.io.reads):
            check_prepared(paths.prepared, args.cfg, getattr(args, "collections", None))
        options = result_options(getattr(module, "Options", None), args)
        self.record = StepRecord(args.command, self.io, options, args.cfg, paths.reports)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (for a child process: tpurank.core.isolated) with its module by name."""
        return {**self.__dict__, "module": self.module.__name__}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state, module=importlib.import_module(state["module"]))

    def up_to_date(self) -> bool:
        """Its record matches: same code, options, config and inputs, and its outputs untouched."""
        return self.record is not None and self.record.up_to_date()

    def why(self) -> str:
        """Why it runs: what changed since its record, or that it keeps none."""
        if self.record is None:
            return "it keeps no record (it always runs)"
        return self.record.stale_reason() or "--force"

    def last_seconds(self) -> float | None:
        """How long its last success with these options took, None if unknown."""
        return self.record.last_seconds() if self.record is not None else None

    def __call__(self) -> int:
        """Run it with its output folders locked; a success saves its record and its duration."""
        with output_locks(self.io.lock_folders() if self.io else [], self.args.command):
            t = time.perf_counter()
            rc = int(self.module.run(self.args) or 0)
            if rc == 0 and self.record is not None:
                self.record.save(time.perf_counter() - t)
            return rc


def execute(module: ModuleType, args: argparse.Namespace) -> int:
    """Run a command alone: skipped when its record says it is up to date (unless `--force`)."""
    run = StageRun(module, args)
    if not getattr(args, "force", False) and run.up_to_date():
        where = run.record.path if run.record else ""
        print(
            f"tpurank {args.command}: up to date (the same code, options, config and inputs as its last run, "
            f"outputs untouched: {where}); --force runs it again",
            file=sys.stderr,
        )
        return 0
    reason = run.record.stale_reason() if run.record is not None else None
    if reason not in (None, NEVER_RAN):
        print(f"tpurank {args.command}: runs again: {reason}", file=sys.stderr)
    return run()


def step_namespace(command: str, options: Any, paths: Paths, cfg: Config) -> argparse.Namespace:
    """The arguments of a step of `all` or `infer`: its command's typed `options` on the caller's
    paths and config (the run-wide options already resolved)."""
    values = {f.name: getattr(options, f.name) for f in dataclasses.fields(options)}
    return argparse.Namespace(**values, command=command, paths=paths, cfg=cfg, config_file=None, set=[])


def run_step(options: Any, paths: Paths, cfg: Config) -> int:
    """Run the command of typed `options` (its module's `Options`, which name the command) on
    resolved paths and config, as `all` and `infer` run their steps: an expected failure is printed
    in one line and returns 1."""
    module = sys.modules[type(options).__module__]
    command = options.COMMAND
    return guarded(command, lambda: execute(module, step_namespace(command, options, paths, cfg)))


def command_argv(options: Any) -> list[str]:
    """The command line a user would type for a step, as words: `predict --model gnn --split valid`
    (options at their default left out)."""
    words = [options.COMMAND]
    for f in dataclasses.fields(options):
        value = getattr(options, f.name)
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if value in (None, False) or value == default:
            continue
        if f.metadata.get("positional"):
            words.append(str(value))
            continue
        flag = "--" + f.name.replace("_", "-")
        words += [flag] if value is True else [flag, *map(str, value if isinstance(value, list) else [value])]
    return words


def command_line(options: Any) -> str:
    """`command_argv` as one line, for progress messages."""
    return " ".join(command_argv(options))


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
