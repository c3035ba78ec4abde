"""The command line run by this process (the test worker) instead of a child: a child pays the
imports of its stage again (torch and torch_geometric alone ~4 s, the interpreter and numpy ~0.5 s)
where the worker has them already. For tests about a command's result, not about a process of
its own (killing one, a fresh interpreter, what a child inherits): those keep helpers.tpurank.

Imported like helpers (`from runners import ...`); test files never import from each other.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import os
import runpy
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import types
from collections.abc import Iterator
from pathlib import Path
from typing import IO, NoReturn


@contextlib.contextmanager
def _as_a_child(env: dict[str, str] | None, cwd: Path | None) -> Iterator[None]:
    """The environment and working folder a child would get, and what a stage may change in the
    process (torch's thread count, the environment, the folder), put back afterwards."""
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    before, here = dict(os.environ), os.getcwd()
    try:
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
        if cwd is not None:
            os.chdir(cwd)
        yield
    finally:
        os.chdir(here)
        os.environ.clear()
        os.environ.update(before)
        if threads is not None and torch is not None:
            torch.set_num_threads(threads)


def in_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None):
    """`tpurank ARGS` as helpers.tpurank returns it (exit code, stdout, stderr), run by cli.main in
    this process with its output captured; `env` replaces the environment for the call."""
    from tpurank.cli import main

    out, err = io.StringIO(), io.StringIO()
    with _as_a_child(env, cwd), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(list(args))
        except SystemExit as e:  # argparse's usage errors and --help exit as a child would
            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            if isinstance(e.code, str):
                print(e.code, file=sys.stderr)
    return subprocess.CompletedProcess(list(args), rc, out.getvalue(), err.getvalue())


class Forked:
    """`tpurank ARGS` in a child forked from this process: a process of its own (a signal, a native
    crash or a hang ends it, never pytest), with the worker's imports already in it, so it starts in
    milliseconds instead of seconds. The child gets `env` (default: this one), `cwd`, Python's own
    Ctrl-C handling (KeyboardInterrupt) and its stdout and stderr in files; the parent reads them
    like subprocess.Popen's (`poll`, `send_signal`, `communicate`, `returncode`)."""

    def __init__(self, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> None:
        self.args = list(args)
        # the child's stdout and stderr, read (and closed) by communicate: no pipe to fill up
        self._out = tempfile.TemporaryFile()  # noqa: SIM115
        self._err = tempfile.TemporaryFile()  # noqa: SIM115
        self.returncode: int | None = None
        self._texts: tuple[str, str] | None = None
        sys.stdout.flush()
        sys.stderr.flush()
        self.pid = os.fork()
        if self.pid == 0:  # the child: never returns
            _child(self.args, env, cwd, self._out.fileno(), self._err.fileno())

    def poll(self) -> int | None:
        if self.returncode is None:
            pid, status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def wait(self, timeout: float | None = None) -> int:
        """The exit code (minus the signal that ended it); past `timeout` the child is killed and
        subprocess.TimeoutExpired raised, as subprocess.run does."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                self.send_signal(signal.SIGKILL)
                os.waitpid(self.pid, 0)
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
            time.sleep(0.005)
        assert self.returncode is not None
        return self.returncode

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        if self._texts is None:
            self._texts = _read(self._out), _read(self._err)
            self._out.close()
            self._err.close()
        return self._texts


def _read(f: IO[bytes]) -> str:
    f.seek(0)
    return f.read().decode(errors="replace")


def _child(args: list[str], env: dict[str, str] | None, cwd: Path | None, out: int, err: int) -> NoReturn:
    """Run the CLI as `python -m tpurank ARGS` would and leave with its exit code, by os._exit:
    nothing of the worker's (atexit, pytest, xdist) runs in the child."""
    code = 1
    try:
        faulthandler.disable()  # pytest's, on the worker's stderr
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8")
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", write_through=True)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if env is not None:
            os.environ.clear()
            os.environ.update(env)
            # the kaggle client fixes its config folder from the environment at import: as a fresh
            # process with `env` would, the child imports it again (the worker may have already)
            for name in [m for m in sys.modules if m.split(".")[0] in ("kaggle", "kagglesdk")]:
                del sys.modules[name]
        _one_openmp_thread()
        os.chdir(cwd or os.getcwd())
        from tpurank.cli import main

        code = main(args)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            print(e.code, file=sys.stderr)
    except KeyboardInterrupt:  # as Python ends on an uncaught Ctrl-C: by the signal itself
        traceback.print_exc()
        sys.stderr.flush()
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(BaseException):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)


def _one_openmp_thread() -> None:
    """A forked child has the parent's OpenMP runtime but not its threads: a parallel region of more
    than one thread waits for them forever (GNU libgomp, torch's and LightGBM's). So the child runs
    one thread, as the whole suite does under ./run.sh (OMP_NUM_THREADS=1): torch's count is set,
    and the variable, which the stages read for LightGBM's threads, given where the test did not."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def forked(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, timeout: float | None = None
):
    """`tpurank ARGS` in a forked child (Forked), waited for: what helpers.tpurank returns."""
    child = Forked(*args, env=env, cwd=cwd)
    out, err = child.communicate(timeout)
    return subprocess.CompletedProcess(child.args, child.returncode, out, err)


@contextlib.contextmanager
def _stdout_into(f: IO[bytes]) -> Iterator[None]:
    """This process's stdout into file `f`, at the descriptor too: what a child it starts prints
    (a benchmark that hands --help on to a stage) is caught as a child's own stdout would be."""
    sys.stdout.flush()
    saved = os.dup(1)
    os.dup2(f.fileno(), 1)
    stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", write_through=True)
    try:
        with contextlib.redirect_stdout(stdout):
            yield
    finally:
        stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _modules_below(folder: Path) -> dict[str, types.ModuleType]:
    """The imported modules of the files below `folder` (a folder of scripts, no package: each
    module named after its file), taken out of sys.modules."""
    prefix = f"{folder}{os.sep}"
    names = {p.stem for p in folder.rglob("*.py")}
    below = {
        n: sys.modules[n]
        for n in names
        if str(getattr(sys.modules.get(n), "__file__", "")).startswith(prefix)
    }
    for name in below:
        del sys.modules[name]
    return below


def script_helps(root: Path, scripts: list[str], *sub: str, path: tuple[Path, ...] = ()) -> dict[str, list]:
    """`python SCRIPT [SUB] --help` of each script (a path below `root`, where it runs) run in this
    process (runpy, as `python SCRIPT` runs it: its folder first on sys.path): {script: [exit, stdout]},
    the exit a traceback's text where it raised. A helper module of the benchmarks (no `__main__`)
    is only imported; `path`: the folders its importer puts on sys.path after its own. A child would
    import torch and the package again for seconds.

    Each script finds its neighbours as a fresh `python SCRIPT` would: the modules of its top folder
    (bench/) imported before it are set aside while it runs and that folder's entries taken off
    sys.path, so a script that does not put its helpers' room on sys.path fails here too."""
    results: dict[str, list] = {}
    for script in scripts:
        top = root / Path(script).parts[0]
        argv, saved_path = list(sys.argv), list(sys.path)
        sys.argv = [script, *sub, "--help"]
        own = [str((root / script).parent), *map(str, path)]
        sys.path[:] = [*own, *(p for p in saved_path if not (p and Path(p).is_relative_to(top)))]
        saved_modules = _modules_below(top)
        with tempfile.TemporaryFile() as out:
            try:
                with _as_a_child(None, root), _stdout_into(out), contextlib.redirect_stderr(io.StringIO()):
                    runpy.run_path(script, run_name="__main__")
                code: int | str = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else str(e.code))
            except BaseException:  # noqa: BLE001  (the script's own failure is the result)
                code = traceback.format_exc()
            finally:
                sys.argv, sys.path[:] = argv, saved_path
                _modules_below(top)
                sys.modules.update(saved_modules)
            results[script] = [code, _read(out)]
    return results
