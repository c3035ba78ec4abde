"""`download` and `submit` end to end through the real kaggle client against a local Kaggle stand-in.

kagglesdk talks to http://localhost:7777 when KAGGLE_API_ENVIRONMENT=TEST. The server below answers
the calls the two stages make (DownloadDataFiles -> a zip of the tiny synthetic dataset;
StartSubmissionUpload, the upload PUT, CreateSubmission), and can refuse the upload or the
submission. Credentials are fake and live in the test's own HOME / config dir, never the user's.
Port 7777 is fixed, so the tests hold a file lock while the server runs (xdist workers take turns).
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import os
import subprocess
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from runners import forked

from tpurank.core.paths import Paths
from tpurank.submission.format import expected_for_split, render

ROOT = Path(__file__).resolve().parents[2]
PORT = 7777
SERVICE = "/api/v1/competitions.CompetitionApiService/"
USER, KEY = "fake-user", "fake-key-0123"


class KaggleStandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, archive: bytes) -> None:
        super().__init__(("127.0.0.1", PORT), Handler)
        self.archive = archive
        self.refuse: str | None = None  # "upload" or "create"
        self.stall_upload = False  # read the upload, then never answer (until `release`)
        self.release = threading.Event()
        self.calls: list[str] = []
        self.auth: list[str] = []
        self.uploaded: bytes = b""


class Handler(BaseHTTPRequestHandler):
    server: KaggleStandIn

    def log_message(self, *args) -> None:  # keep pytest output clean
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json", **headers: str) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in headers.items():
            self.send_header(k.replace("_", "-"), v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj: dict) -> None:
        self._send(code, json.dumps(obj).encode())

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def do_POST(self) -> None:
        self.server.calls.append(f"POST {self.path}")
        self.server.auth.append(self.headers.get("Authorization", ""))
        request = json.loads(self._body() or b"{}")
        name = self.path.removeprefix(SERVICE)
        if name == "DownloadDataFiles":
            assert request.get("competitionName") == "predict-ai-model-runtime", request
            # Kaggle answers with a redirect to the archive
            self._send(302, b"", Location=f"http://localhost:{PORT}/files/predict-ai-model-runtime.zip")
        elif name == "StartSubmissionUpload":
            self._json(
                200, {"token": "blob-token-1", "createUrl": f"http://localhost:{PORT}/upload/blob-token-1"}
            )
        elif name == "CreateSubmission":
            assert request.get("blobFileTokens") == "blob-token-1", request
            if self.server.refuse == "create":
                self._json(400, {"code": 400, "message": "Submission limit reached for today"})
            else:
                self._json(200, {"message": "Successfully submitted to Google - Fast or Slow?", "ref": 4242})
        else:
            self._json(404, {"code": 404, "message": f"unknown call {name}"})

    def do_GET(self) -> None:
        self.server.calls.append(f"GET {self.path}")
        if self.path == "/files/predict-ai-model-runtime.zip":
            self._send(200, self.server.archive, "application/zip")
        else:
            self._send(404, b"{}")

    def do_PUT(self) -> None:
        self.server.calls.append(f"PUT {self.path}")
        body = self._body()
        if self.server.stall_upload:
            self.server.release.wait(60)
            return
        if self.server.refuse == "upload":
            self._send(403, b"forbidden", "text/plain")
            return
        self.server.uploaded = body
        self._json(200, {})


def _zip_tree(root: Path) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(root.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(root).as_posix())
    return buf.getvalue()


@pytest.fixture
def kaggle_server(tiny_root: Path) -> Iterator[KaggleStandIn]:
    lock = open(Path(tempfile.gettempdir()) / f"tpurank-kaggle-{PORT}.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        try:
            server = KaggleStandIn(_zip_tree(tiny_root))
        except OSError as e:
            pytest.skip(f"cannot listen on localhost:{PORT} ({e})")
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield server
        server.release.set()
        server.shutdown()
        server.server_close()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path / "home"),
        "KAGGLE_API_ENVIRONMENT": "TEST",
        "NO_PROXY": "localhost,127.0.0.1",
    }
    env.update(extra)
    return env


def _tpurank(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command in a process of its own with only `env` (forked: its imports inherited)."""
    return forked(*args, env=env, cwd=ROOT, timeout=120)


def _basic(user: str, key: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()


def test_download_unpacks_the_archive(kaggle_server: KaggleStandIn, tiny_root: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = _env(tmp_path, KAGGLE_USERNAME=USER, KAGGLE_KEY=KEY, KAGGLE_CONFIG_DIR=str(tmp_path / "cfg"))
    r = _tpurank(["download", "--data-dir", str(data)], env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "POST " + SERVICE + "DownloadDataFiles" in kaggle_server.calls
    assert kaggle_server.auth[0] == _basic(USER, KEY)  # the fake credentials were sent
    want = sorted(p.relative_to(tiny_root) for p in tiny_root.rglob("*.npz"))
    assert want and sorted(p.relative_to(data) for p in data.rglob("*.npz")) == want
    assert (data / "sample_submission.csv").read_bytes() == (tiny_root / "sample_submission.csv").read_bytes()
    assert not (data / "predict-ai-model-runtime.zip").exists()
    check = _tpurank(["check", "--data-dir", str(data)], env)
    assert check.returncode == 0, check.stdout[-2000:] + check.stderr[-2000:]


def _submission(tiny_root: Path, tmp_path: Path) -> Path:
    paths = Paths(data=tiny_root, out=tmp_path)
    expected = expected_for_split(paths, "test")
    costs = {e.id: np.arange(e.num_configs, dtype=float) for e in expected}
    csv = tmp_path / "submission.csv"
    csv.write_text(render(costs, expected, str(csv)))
    return csv


def test_submit_accepted_with_kaggle_json_in_xdg_config(
    kaggle_server: KaggleStandIn, tiny_root: Path, tmp_path: Path
) -> None:
    """No env credentials and no ~/.kaggle: the kaggle package finds ~/.config/kaggle/kaggle.json."""
    cfg = tmp_path / "home" / ".config" / "kaggle"
    cfg.mkdir(parents=True)
    (cfg / "kaggle.json").write_text(json.dumps({"username": USER, "key": KEY}))
    os.chmod(cfg / "kaggle.json", 0o600)
    csv = _submission(tiny_root, tmp_path)
    r = _tpurank(
        ["submit", "--file", str(csv), "--data-dir", str(tiny_root), "-m", "test run"], _env(tmp_path)
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "Successfully submitted" in r.stdout
    assert kaggle_server.uploaded == csv.read_bytes()
    assert [c.split("?")[0] for c in kaggle_server.calls] == [
        f"POST {SERVICE}StartSubmissionUpload",
        "PUT /upload/blob-token-1",
        f"POST {SERVICE}CreateSubmission",
    ]
    assert kaggle_server.auth[0] == _basic(USER, KEY)


@pytest.mark.parametrize("refuse", ["upload", "create"])
def test_submit_refused_is_a_one_line_error(
    refuse: str, kaggle_server: KaggleStandIn, tiny_root: Path, tmp_path: Path
) -> None:
    kaggle_server.refuse = refuse
    csv = _submission(tiny_root, tmp_path)
    env = _env(tmp_path, KAGGLE_USERNAME=USER, KAGGLE_KEY=KEY, KAGGLE_CONFIG_DIR=str(tmp_path / "cfg"))
    r = _tpurank(["submit", "--file", str(csv), "--data-dir", str(tiny_root)], env)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert "refused" in err[0]
    if refuse == "create":
        assert "Submission limit reached" in err[0]
    assert "submitted" not in r.stdout.lower().replace("not submitted", "")


def test_submit_whose_upload_is_never_answered_fails_in_one_line(
    kaggle_server: KaggleStandIn, tiny_root: Path, tmp_path: Path
) -> None:
    """The kaggle client swallows an upload error (prints it, returns "failed") and retries the PUT ten
    times: the timeout still ends the command at once, naming the host, with no retry."""
    kaggle_server.stall_upload = True
    csv = _submission(tiny_root, tmp_path)
    env = _env(
        tmp_path,
        KAGGLE_USERNAME=USER,
        KAGGLE_KEY=KEY,
        KAGGLE_CONFIG_DIR=str(tmp_path / "cfg"),
        TPURANK_NET_TIMEOUT="1",
    )
    r = _tpurank(["submit", "--file", str(csv), "--data-dir", str(tiny_root)], env)
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "Traceback" not in r.stderr, r.stderr
    assert err[0].startswith(f"tpurank submit: error: submit: localhost:{PORT} did not answer within 1 s")
    assert r.stdout == ""
    assert [c.split("?")[0] for c in kaggle_server.calls] == [
        f"POST {SERVICE}StartSubmissionUpload",
        "PUT /upload/blob-token-1",
    ]
