"""The command's exit skips unloading modules, but nothing a normal exit does for the results: the
status, the exit handlers, flushed streams, and waiting for threads still running."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(body: str) -> subprocess.CompletedProcess[str]:
    code = "from tpurank.core.exit import exit_now\nimport atexit, sys, threading, time\n" + textwrap.dedent(
        body
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("rc", [0, 1, 3])
def test_the_status_the_exit_handlers_and_the_buffered_output_all_survive(rc: int) -> None:
    r = _run(f"""
        atexit.register(lambda: print("handler ran"))
        sys.stdout.write("unflushed, ")  # still in the buffer: a pipe is block-buffered
        print("to stderr", file=sys.stderr, end="")
        exit_now({rc})
        print("never")
    """)
    assert (r.returncode, r.stdout, r.stderr) == (rc, "unflushed, handler ran\n", "to stderr")


def test_a_thread_still_running_is_waited_for_as_a_normal_exit_does() -> None:
    r = _run("""
        def late() -> None:
            time.sleep(0.5)
            print("thread done", flush=True)

        threading.Thread(target=late).start()
        exit_now(4)
    """)
    assert (r.returncode, r.stdout) == (4, "thread done\n")


def test_the_command_line_exits_so() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tpurank", "--help"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0 and "usage: tpurank" in r.stdout
    r = subprocess.run(
        [sys.executable, "-m", "tpurank", "nonsense"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 2 and "invalid choice" in r.stderr


def test_output_that_cannot_be_written_fails_the_exit() -> None:
    code = "from tpurank.core.exit import exit_now\nimport sys\nsys.stdout.write('lost')\nexit_now(0)\n"
    with open("/dev/full", "w") as full:
        r = subprocess.run(
            [sys.executable, "-c", code], stdout=full, stderr=subprocess.PIPE, text=True, timeout=60
        )
    assert r.returncode != 0  # Python's own exit reports the failed flush, as without exit_now
