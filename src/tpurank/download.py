"""`tpurank download`: fetch and unpack the competition data with the kaggle package."""

from __future__ import annotations

import argparse
import os
import zipfile
from pathlib import Path

from tpurank.errors import TpurankError

COMPETITION = "predict-ai-model-runtime"
HOW_TO = (
    "Kaggle credentials not found. Create an API token at https://www.kaggle.com/settings "
    "(Account > API > Create New Token), save it as ~/.kaggle/kaggle.json (chmod 600) or set "
    "KAGGLE_USERNAME and KAGGLE_KEY (a newer access token: KAGGLE_API_TOKEN or "
    "~/.kaggle/access_token), and accept the competition rules at "
    f"https://www.kaggle.com/competitions/{COMPETITION}/rules."
)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--force", action="store_true", help="download even if the data is already there")


def have_credentials() -> bool:
    """Whether the kaggle package will find credentials: a legacy key or a newer access token."""
    if os.environ.get("KAGGLE_USERNAME") and os.environ.get("KAGGLE_KEY"):
        return True
    if os.environ.get("KAGGLE_API_TOKEN"):
        return True
    config_dir = Path(os.environ.get("KAGGLE_CONFIG_DIR", Path.home() / ".kaggle"))
    tokens = [Path.home() / ".kaggle" / name for name in ("access_token", "access_token.txt")]
    return (config_dir / "kaggle.json").exists() or any(t.exists() for t in tokens)


def kaggle_api():
    """An authenticated KaggleApi, or a TpurankError that says how to provide credentials."""
    if not have_credentials():
        raise TpurankError(HOW_TO)
    try:
        from kaggle.api.kaggle_api_extended import KaggleApi
    except ImportError as e:
        raise TpurankError(f"the kaggle package is not installed ({e}); run ./run.sh setup") from None
    api = KaggleApi()
    try:
        api.authenticate()
    except Exception as e:  # the kaggle client raises plain exceptions for bad tokens
        raise TpurankError(f"Kaggle authentication failed: {e}. {HOW_TO}") from None
    return api


def download(data_root: Path, force: bool = False) -> Path:
    """Download the competition archive into data_root and unpack it there."""
    if (data_root / "npz_all" / "npz").is_dir() and not force:
        print(f"data already present at {data_root} (use --force to download again)")
        return data_root
    api = kaggle_api()
    data_root.mkdir(parents=True, exist_ok=True)
    print(f"downloading {COMPETITION} into {data_root} (about 6 GB)...")
    try:
        api.competition_download_files(COMPETITION, path=str(data_root), quiet=False)
    except Exception as e:
        raise TpurankError(f"download failed: {e}") from None
    archive = data_root / f"{COMPETITION}.zip"
    if not archive.exists():
        raise TpurankError(f"{archive}: the download produced no archive")
    try:
        with zipfile.ZipFile(archive) as zf:
            zf.extractall(data_root)
    except zipfile.BadZipFile as e:
        raise TpurankError(f"{archive}: corrupt archive ({e}); delete it and download again") from None
    archive.unlink()
    return data_root


def run(args: argparse.Namespace) -> int:
    download(args.paths.data, args.force)
    print(f"data ready at {args.paths.data}")
    return 0
