"""`tpurank download`: fetch and unpack the competition data with the kaggle package.

Credentials are whatever the kaggle package's own `authenticate()` finds (an access token,
KAGGLE_USERNAME/KAGGLE_KEY, kaggle.json in $KAGGLE_CONFIG_DIR, ~/.kaggle or ~/.config/kaggle, OAuth
credentials): tpurank keeps no list of its own. The endpoint follows kagglesdk's
KAGGLE_API_ENVIRONMENT (TEST: http://localhost:7777, as the tests use). Every request has a
timeout (`tpurank.data.net`: TPURANK_NET_TIMEOUT, default 60 s); a silent server is a one-line error.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shutil
import tempfile
import zipfile
from pathlib import Path
from typing import Any

from tpurank.core.errors import TpurankError
from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.net import network_timeouts

COMPETITION = "predict-ai-model-runtime"
HOW_TO = (
    "Kaggle credentials not found. Create an API token at https://www.kaggle.com/settings "
    "(Account > API > Create New Token), save it as ~/.kaggle/kaggle.json or ~/.config/kaggle/kaggle.json "
    "(chmod 600) or set KAGGLE_USERNAME and KAGGLE_KEY (a newer access token: KAGGLE_API_TOKEN or "
    "~/.kaggle/access_token), and accept the competition rules at "
    f"https://www.kaggle.com/competitions/{COMPETITION}/rules."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="download even if the data is already there")


def api_class() -> type:
    """KaggleApi, whose client honours KAGGLE_API_ENVIRONMENT.

    kaggle 2.2.4 builds its client with an explicit env (PROD unless --staging/--local is in its
    own argv), so kagglesdk's KAGGLE_API_ENVIRONMENT is ignored; when that variable is set, the
    client is built with env=None and kagglesdk resolves it. Importing kaggle authenticates and
    prints help when there are no credentials: that output is swallowed (we report it ourselves).
    """
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            # an optional client: importing kaggle authenticates (see above)
            from kaggle.api.kaggle_api_extended import KaggleApi
            from kagglesdk import KaggleClient
    except ImportError as e:
        raise TpurankError(f"the kaggle package is not installed ({e}); run ./run.sh setup") from None

    class Api(KaggleApi):
        def build_kaggle_client(self) -> Any:
            if not os.environ.get("KAGGLE_API_ENVIRONMENT"):
                return super().build_kaggle_client()
            return KaggleClient(
                env=None,
                username=self.config_values.get(self.CONFIG_NAME_USER),
                password=self.config_values.get(self.CONFIG_NAME_KEY),
                api_token=self.config_values.get(self.CONFIG_NAME_TOKEN),
                response_processor=self.get_response_processor(),
            )

    return Api


def kaggle_api() -> Any:
    """An authenticated KaggleApi (the package's own credential discovery), or a one-line TpurankError."""
    api = api_class()()
    try:
        with contextlib.redirect_stdout(io.StringIO()), network_timeouts("Kaggle authentication"):
            api.authenticate()
    except TpurankError:
        raise
    except SystemExit:  # kaggle's authenticate() prints help and exits when it finds nothing
        raise TpurankError(HOW_TO) from None
    except Exception as e:  # the kaggle client raises plain exceptions for bad tokens
        raise TpurankError(f"Kaggle authentication failed: {e}. {HOW_TO}") from None
    return api


def have_credentials() -> bool:
    """Whether the kaggle package authenticates (used by `all` to choose Kaggle over synthetic data)."""
    try:
        kaggle_api()
    except TpurankError:
        return False
    return True


def download(data_root: Path, force: bool = False) -> Path:
    """Download the competition archive into data_root and unpack it there. The npz folder is
    whole when it exists (`unpack` moves it into place last), so its presence skips the download."""
    if (data_root / NPZ_SUBDIR).is_dir() and not force:
        print(f"data already present at {data_root} (use --force to download again)")
        return data_root
    api = kaggle_api()
    data_root.mkdir(parents=True, exist_ok=True)
    print(f"downloading {COMPETITION} into {data_root} (about 6 GB)...")
    try:
        with network_timeouts("download"):
            api.competition_download_files(COMPETITION, path=str(data_root), force=force, quiet=False)
    except TpurankError:
        raise
    except Exception as e:
        raise TpurankError(f"download failed: {e}") from None
    archive = data_root / f"{COMPETITION}.zip"
    if not archive.exists():
        raise TpurankError(f"{archive}: the download produced no archive")
    unpack(archive, data_root)
    if not (data_root / NPZ_SUBDIR).is_dir():
        raise TpurankError(f"{archive}: unpacked, but it holds no {NPZ_SUBDIR} folder")
    archive.unlink()
    return data_root


def unpack(archive: Path, data_root: Path) -> None:
    """Unpack `archive` into a folder inside `data_root`, then move each top-level entry into place,
    the npz folder last: an unpack killed halfway leaves no npz folder, so the next run downloads
    again instead of taking half the data for the whole."""
    staging = Path(tempfile.mkdtemp(prefix=".unpacking-", dir=data_root))
    try:
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(staging)
        except zipfile.BadZipFile as e:
            raise TpurankError(f"{archive}: corrupt archive ({e}); delete it and download again") from None
        for entry in sorted(staging.iterdir(), key=lambda e: e.name == NPZ_SUBDIR.parts[0]):
            dest = data_root / entry.name
            if dest.is_dir() and not dest.is_symlink():
                shutil.rmtree(dest)  # --force: the new archive's folder replaces the old one whole
            os.replace(entry, dest)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def run(args: argparse.Namespace) -> int:
    download(args.paths.data, args.force)
    print(f"data ready at {args.paths.data}")
    return 0
