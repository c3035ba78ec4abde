"""A server that accepts and never answers: `download` and `submit` end in one line within seconds.

The kaggle client talks to http://localhost:7777 with KAGGLE_API_ENVIRONMENT=TEST; here a raw
socket listens there, accepts every connection, reads what is sent and never writes a byte.
TPURANK_NET_TIMEOUT=1 keeps each test to a few seconds (the default is 60 s). Port 7777 is shared
with tests/kaggle_stand_in.py, so the same file lock is held while the socket is open.
"""

from __future__ import annotations

import contextlib
import fcntl
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from runners import forked

from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR, Paths
from tpurank.data.net import DEFAULT_TIMEOUT_S, TIMEOUT_ENV, network_timeouts, timeout_seconds
from tpurank.submission.format import expected_for_split, render

ROOT = Path(__file__).resolve().parents[2]
PORT = 7777


class SilentServer:
    """Accepts connections on localhost:PORT, reads them, and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", PORT))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.received = b""
        self.held: list[socket.socket] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                for c in self.held:  # keep reading, so the client's request is fully sent
                    with contextlib.suppress(OSError):  # nothing to read yet
                        self.received += c.recv(65536)
                continue
            conn.setblocking(False)
            self.accepted += 1
            self.held.append(conn)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    lock = open(Path(tempfile.gettempdir()) / f"tpurank-kaggle-{PORT}.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        try:
            server = SilentServer()
        except OSError as e:
            pytest.skip(f"cannot listen on localhost:{PORT} ({e})")
        yield server
        server.close()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _run(args: list[str], tmp_path: Path, timeout_s: str = "1") -> tuple[subprocess.CompletedProcess, float]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "KAGGLE_API_ENVIRONMENT": "TEST",
        "NO_PROXY": "localhost,127.0.0.1",
        "KAGGLE_USERNAME": "fake-user",
        "KAGGLE_KEY": "fake-key-0123",
        "KAGGLE_CONFIG_DIR": str(tmp_path / "cfg"),
        TIMEOUT_ENV: timeout_s,
    }
    start = time.monotonic()
    r = forked(*args, env=env, cwd=ROOT, timeout=120)  # a process of its own, its imports inherited
    return r, time.monotonic() - start


def _one_line(r: subprocess.CompletedProcess) -> str:
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Traceback" not in r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1, r.stderr
    return err[0]


def test_download_from_a_silent_server_fails_in_one_line(silent_server: SilentServer, tmp_path: Path) -> None:
    r, took = _run(["download", "--data-dir", str(tmp_path / "data")], tmp_path)
    line = _one_line(r)
    assert f"download: localhost:{PORT} did not answer within 1 s" in line and TIMEOUT_ENV in line
    assert silent_server.accepted == 1 and b"POST /api/v1/competitions" in silent_server.received
    assert took < 20  # one timeout, no retries
    assert not (tmp_path / "data" / NPZ_SUBDIR.parts[0]).exists()


def test_submit_to_a_silent_server_fails_in_one_line(
    silent_server: SilentServer, tiny_root: Path, tmp_path: Path
) -> None:
    paths = Paths(data=tiny_root, out=tmp_path)
    expected = expected_for_split(paths, "test")
    csv = tmp_path / "submission.csv"
    csv.write_text(render({e.id: np.arange(e.num_configs, dtype=float) for e in expected}, expected, "x"))
    r, took = _run(["submit", "--file", str(csv), "--data-dir", str(tiny_root)], tmp_path, "1.5")
    line = _one_line(r)
    assert line.endswith(
        f"submit: localhost:{PORT} did not answer within 1.5 s; check the network connection (a proxy or "
        f"firewall?) and try again later ({TIMEOUT_ENV}=SECONDS waits longer)"
    )
    assert "submitted" not in r.stdout
    assert took < 20


@pytest.mark.parametrize("value", ["0", "-3", "nan", "inf", "soon"])
def test_a_bad_timeout_setting_is_one_line(value: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIMEOUT_ENV, value)
    with pytest.raises(TpurankError, match=rf"^\${TIMEOUT_ENV} must be a number > 0, got '{value}'$"):
        timeout_seconds()


def test_the_timeout_applies_only_inside_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """requests is patched only while the block runs; outside, its own behaviour is untouched."""
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    monkeypatch.delenv(TIMEOUT_ENV, raising=False)
    assert timeout_seconds() == DEFAULT_TIMEOUT_S
    send, increment = HTTPAdapter.send, Retry.increment
    with network_timeouts("x"):
        assert HTTPAdapter.send is not send and Retry.increment is not increment
    assert HTTPAdapter.send is send and Retry.increment is increment
    with pytest.raises(ValueError, match="boom"), network_timeouts("x"):
        raise ValueError("boom")
    assert HTTPAdapter.send is send


def _listen() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(8)
    return sock


def test_no_retry_of_a_timeout_even_when_the_session_asks_for_ten(monkeypatch: pytest.MonkeyPatch) -> None:
    """kaggle's upload session mounts Retry(total=10): a silent server would be asked ten times."""
    import requests
    from requests.adapters import HTTPAdapter
    from urllib3.util.retry import Retry

    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    sock = _listen()
    port = sock.getsockname()[1]
    session = requests.Session()
    session.mount("http://", HTTPAdapter(max_retries=Retry(total=10, backoff_factor=0.5)))
    start = time.monotonic()
    try:
        with pytest.raises(TpurankError) as e, network_timeouts("upload"):
            session.put(f"http://127.0.0.1:{port}/x", data=b"abc")
    finally:
        took = time.monotonic() - start
        accepted = []
        sock.settimeout(0.1)
        with contextlib.suppress(TimeoutError):
            while True:
                accepted.append(sock.accept()[0])
        for c in accepted:
            c.close()
        sock.close()
    assert str(e.value).startswith(f"upload: 127.0.0.1:{port} did not answer within 0.5 s")
    assert len(accepted) == 1 and took < 5


def test_a_body_that_stops_midway_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    import requests

    monkeypatch.setenv(TIMEOUT_ENV, "0.5")
    sock = _listen()
    port = sock.getsockname()[1]
    release = threading.Event()

    def answer_then_stall() -> None:
        conn, _ = sock.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n" + b"x" * 1000)
        release.wait(10)
        conn.close()

    thread = threading.Thread(target=answer_then_stall, daemon=True)
    thread.start()
    try:
        with pytest.raises(TpurankError) as e, network_timeouts("download"):
            response = requests.get(f"http://127.0.0.1:{port}/f.zip", stream=True)
            for _ in response.iter_content(1000):
                pass
    finally:
        release.set()
        thread.join(5)
        sock.close()
    assert str(e.value).startswith(f"download: 127.0.0.1:{port} stopped sending for 0.5 s")
