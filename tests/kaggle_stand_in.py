"""A local stand-in for Kaggle's API, for the real kaggle client (kagglesdk, KAGGLE_API_ENVIRONMENT=TEST:
http://localhost:7777) in tpurank's stages and in the `kaggle` command line.

It answers the calls of `download` and `submit` (the competition's files and a submission), and of the
README's loop: `kaggle datasets create` (a dataset's status, blob uploads, the dataset), `kaggle
kernels push`, `kernels status` and `kernels output`. Each answer has the fields and the HTTP codes
the kaggle client reads (kaggle/api/kaggle_api_extended.py, kagglesdk's *_api_service types); what
it refuses, it refuses as Kaggle does: an owner other than the credentials' user (403), an unknown
dataset or kernel (404), a dataset source that does not exist (`invalidDatasetSources`). A pushed
kernel does not run: its output is what the test puts in `outputs` for it, its status complete.

Port 7777 is fixed (kagglesdk's), so `serving` holds a file lock while the server runs (xdist
workers take turns). Imported like helpers (`from kaggle_stand_in import ...`).
"""

from __future__ import annotations

import base64
import fcntl
import io
import json
import tempfile
import threading
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

PORT = 7777
COMPETITION = "predict-ai-model-runtime"
SERVICE = "/api/v1/competitions.CompetitionApiService/"
DATASETS = "/api/v1/datasets.DatasetApiService/"
BLOBS = "/api/v1/blobs.BlobApiService/"
KERNELS = "/api/v1/kernels.KernelsApiService/"
USER, KEY = "fake-user", "fake-key-0123"


def basic(user: str, key: str) -> str:
    """The Authorization header of the kaggle client for a user name and key."""
    return "Basic " + base64.b64encode(f"{user}:{key}".encode()).decode()


@dataclass
class Kernel:
    """A pushed kernel: its request as sent (`SaveKernel`) and its version."""

    request: dict
    version: int = 1


@dataclass
class State:
    """What the stand-in was sent and holds."""

    calls: list[str] = field(default_factory=list)
    auth: list[str] = field(default_factory=list)
    uploaded: bytes = b""  # the last competition submission's upload
    blobs: dict[str, bytes] = field(default_factory=dict)  # blob token -> its bytes
    blob_names: dict[str, str] = field(default_factory=dict)  # blob token -> the file name started
    datasets: dict[str, dict[str, bytes]] = field(default_factory=dict)  # owner/slug -> file -> bytes
    kernels: dict[str, Kernel] = field(default_factory=dict)  # owner/slug -> what was pushed
    outputs: dict[str, dict[str, bytes]] = field(default_factory=dict)  # owner/slug -> output files


class KaggleStandIn(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, archive: bytes) -> None:
        super().__init__(("127.0.0.1", PORT), Handler)
        self.archive = archive
        self.refuse: str | None = None  # "upload" or "create" (a competition submission)
        self.stall_upload = False  # read the upload, then never answer (until `release`)
        self.release = threading.Event()
        self.state = State()
        self.lock = threading.Lock()

    # the attributes the competition tests read
    @property
    def calls(self) -> list[str]:
        return self.state.calls

    @property
    def auth(self) -> list[str]:
        return self.state.auth

    @property
    def uploaded(self) -> bytes:
        return self.state.uploaded


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

    def _error(self, code: int, message: str) -> None:
        """Kaggle's error body: kagglesdk raises HTTPError(message) for a `code` of 400 and over."""
        self._json(code, {"code": code, "message": message})

    def _body(self) -> bytes:
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _user(self) -> str:
        """The user name of the Basic credentials sent ("" without)."""
        header = self.headers.get("Authorization", "")
        if not header.startswith("Basic "):
            return ""
        return base64.b64decode(header.removeprefix("Basic ")).decode().split(":", 1)[0]

    def do_POST(self) -> None:
        state = self.server.state
        with self.server.lock:
            state.calls.append(f"POST {self.path}")
            state.auth.append(self.headers.get("Authorization", ""))
        request = json.loads(self._body() or b"{}")
        for prefix, answer in (
            (SERVICE, self._competitions),
            (DATASETS, self._datasets),
            (BLOBS, self._blobs),
            (KERNELS, self._kernels),
        ):
            if self.path.startswith(prefix):
                answer(self.path.removeprefix(prefix), request)
                return
        self._error(404, f"unknown call {self.path}")

    def _competitions(self, name: str, request: dict) -> None:
        if name == "DownloadDataFiles":
            assert request.get("competitionName") == COMPETITION, request
            # Kaggle answers with a redirect to the archive
            self._send(302, b"", Location=f"http://localhost:{PORT}/files/{COMPETITION}.zip")
        elif name == "StartSubmissionUpload":
            self._json(
                200, {"token": "blob-token-1", "createUrl": f"http://localhost:{PORT}/upload/blob-token-1"}
            )
        elif name == "CreateSubmission":
            assert request.get("blobFileTokens") == "blob-token-1", request
            if self.server.refuse == "create":
                self._error(400, "Submission limit reached for today")
            else:
                self.server.state.uploaded = self.server.state.blobs.get("blob-token-1", b"")
                self._json(200, {"message": "Successfully submitted to Google - Fast or Slow?", "ref": 4242})
        else:
            self._error(404, f"unknown call {name}")

    def _blobs(self, name: str, request: dict) -> None:
        if name != "StartBlobUpload":
            self._error(404, f"unknown call {name}")
            return
        state = self.server.state
        with self.server.lock:
            token = f"blob-{len(state.blob_names) + 2}"  # blob-token-1 is the submission's
            state.blob_names[token] = request["name"]
        self._json(200, {"token": token, "createUrl": f"http://localhost:{PORT}/upload/{token}"})

    def _datasets(self, name: str, request: dict) -> None:
        state = self.server.state
        if name == "GetDatasetStatus":
            ref = f"{request.get('ownerSlug')}/{request.get('datasetSlug')}"
            if ref in state.datasets:
                self._json(200, {"status": "READY"})
            else:
                self._error(404, f"Dataset {ref} not found")
        elif name == "CreateDataset":
            owner, slug = request.get("ownerSlug", ""), request.get("slug", "")
            if owner != self._user():
                self._error(403, f"Permission 'datasets.create' was denied for owner {owner}")
                return
            tokens = [f.get("token", "") for f in request.get("files", [])]
            if unknown := [t for t in tokens if t not in state.blobs]:
                self._error(400, f"unknown blob tokens {unknown}")
                return
            with self.server.lock:
                state.datasets[f"{owner}/{slug}"] = {state.blob_names[t]: state.blobs[t] for t in tokens}
            url = f"http://localhost:{PORT}/datasets/{owner}/{slug}"
            self._json(200, {"ref": f"{owner}/{slug}", "url": url, "status": "Ok", "error": ""})
        else:
            self._error(404, f"unknown call {name}")

    def _kernels(self, name: str, request: dict) -> None:
        state = self.server.state
        if name == "SaveKernel":
            ref = request.get("slug", "")
            owner = ref.split("/")[0]
            if owner != self._user():
                self._error(403, f"Permission 'kernels.create' was denied for {ref}")
                return
            sources = request.get("datasetDataSources", [])
            with self.server.lock:
                version = state.kernels[ref].version + 1 if ref in state.kernels else 1
                state.kernels[ref] = Kernel(request, version)
            self._json(
                200,
                {
                    "ref": f"/code/{ref}",
                    "url": f"http://localhost:{PORT}/code/{ref}",
                    "versionNumber": version,
                    "error": "",
                    "invalidDatasetSources": [s for s in sources if s not in state.datasets],
                    "invalidCompetitionSources": [
                        c for c in request.get("competitionDataSources", []) if c != COMPETITION
                    ],
                },
            )
            return
        ref = f"{request.get('userName')}/{request.get('kernelSlug')}"
        if ref not in state.kernels:
            self._error(404, f"Kernel {ref} not found")
        elif name == "GetKernelSessionStatus":
            self._json(200, {"status": "COMPLETE"})
        elif name == "ListKernelSessionOutput":
            files = [
                {"url": f"http://localhost:{PORT}/output/{ref}/{n}", "fileName": n}
                for n in sorted(state.outputs.get(ref, {}))
            ]
            self._json(200, {"files": files, "log": "[]"})
        else:
            self._error(404, f"unknown call {name}")

    def do_GET(self) -> None:
        self.server.state.calls.append(f"GET {self.path}")
        if self.path == f"/files/{COMPETITION}.zip":
            self._send(200, self.server.archive, "application/zip")
            return
        if self.path.startswith("/output/"):
            owner, slug, name = self.path.removeprefix("/output/").split("/", 2)
            body = self.server.state.outputs.get(f"{owner}/{slug}", {}).get(name)
            if body is not None:
                self._send(200, body, "application/octet-stream")
                return
        self._send(404, b"{}")

    def do_PUT(self) -> None:
        self.server.state.calls.append(f"PUT {self.path}")
        body = self._body()
        if self.server.stall_upload:
            self.server.release.wait(60)
            return
        if self.server.refuse == "upload":
            self._send(403, b"forbidden", "text/plain")
            return
        token = self.path.removeprefix("/upload/")
        with self.server.lock:
            self.server.state.blobs[token] = body
        self._json(200, {})


def zip_tree(root: Path) -> bytes:
    """A zip of every file under `root` (the competition's archive)."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for f in sorted(root.rglob("*")):
            if f.is_file():
                zf.write(f, f.relative_to(root).as_posix())
    return buf.getvalue()


@contextmanager
def serving(data_root: Path) -> Iterator[KaggleStandIn]:
    """The stand-in on localhost:7777, its competition archive the data under `data_root`; skips the
    test (with the reason) where the port cannot be had."""
    lock = open(Path(tempfile.gettempdir()) / f"tpurank-kaggle-{PORT}.lock", "w")  # noqa: SIM115
    fcntl.flock(lock, fcntl.LOCK_EX)
    try:
        try:
            server = KaggleStandIn(zip_tree(data_root))
        except OSError as e:
            pytest.skip(f"cannot listen on localhost:{PORT} ({e})")
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield server
        finally:
            server.release.set()
            server.shutdown()
            server.server_close()
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def client_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment of a process that reaches the stand-in: its own HOME, no proxy for localhost."""
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "KAGGLE_API_ENVIRONMENT": "TEST",
        "NO_PROXY": "localhost,127.0.0.1",
    }
    env.update(extra)
    return env
