"""`download` and `submit` end to end through the real kaggle client against a local Kaggle stand-in.

kagglesdk talks to http://localhost:7777 when KAGGLE_API_ENVIRONMENT=TEST. The stand-in
(tests/kaggle_stand_in.py) answers the calls the two stages make (DownloadDataFiles -> a zip of the
tiny synthetic dataset; StartSubmissionUpload, the upload PUT, CreateSubmission), and can refuse the
upload or the submission. Credentials are fake and live in the test's own HOME / config dir, never
the user's.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from kaggle_stand_in import KEY, PORT, SERVICE, USER, KaggleStandIn, basic, client_env, serving
from runners import forked

from tpurank.core.paths import Paths
from tpurank.submission.format import expected_for_split, render

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def kaggle_server(tiny_root: Path) -> Iterator[KaggleStandIn]:
    with serving(tiny_root) as server:
        yield server


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return client_env(tmp_path / "home", **extra)


def _tpurank(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess:
    """The command in a process of its own with only `env` (forked: its imports inherited)."""
    return forked(*args, env=env, cwd=ROOT, timeout=120)


def test_download_unpacks_the_archive(kaggle_server: KaggleStandIn, tiny_root: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    env = _env(tmp_path, KAGGLE_USERNAME=USER, KAGGLE_KEY=KEY, KAGGLE_CONFIG_DIR=str(tmp_path / "cfg"))
    r = _tpurank(["download", "--data-dir", str(data)], env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "POST " + SERVICE + "DownloadDataFiles" in kaggle_server.calls
    assert kaggle_server.auth[0] == basic(USER, KEY)  # the fake credentials were sent
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
    assert kaggle_server.auth[0] == basic(USER, KEY)


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
