"""`tpurank submit`: check the submission CSV, then send it to Kaggle with the kaggle package."""

from __future__ import annotations

import argparse
from pathlib import Path

from tpurank.download import COMPETITION, HOW_TO, have_credentials, kaggle_api
from tpurank.errors import TpurankError


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", help="CSV to submit (default: submissions/submission.csv)")
    p.add_argument("--message", "-m", default="tpurank", help="submission description shown on Kaggle")


def run(args: argparse.Namespace) -> int:
    from tpurank.submission_check import check_submission_file

    if not have_credentials():
        raise TpurankError(HOW_TO)
    csv = Path(args.file) if args.file else args.paths.submissions / "submission.csv"
    if not csv.exists():
        raise TpurankError(
            f"{csv}: no submission yet; run ./run.sh all or `python -m tpurank predict --split test`"
        )
    problems = check_submission_file(csv, args.paths)
    if problems:
        for line in problems:
            print(line)
        raise TpurankError(f"{csv}: {len(problems)} problem(s); not submitted")
    api = kaggle_api()
    try:
        api.competition_submit(str(csv), args.message, COMPETITION)
    except Exception as e:  # the kaggle client raises plain exceptions
        raise TpurankError(f"Kaggle rejected the submission: {e}") from None
    print(
        f"submitted {csv} to {COMPETITION}: see https://www.kaggle.com/competitions/{COMPETITION}/submissions"
    )
    return 0
