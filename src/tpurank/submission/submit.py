"""`tpurank submit`: check the submission CSV, then send it to Kaggle with the kaggle package.

kaggle's `competition_submit` does not raise when the upload is refused: it returns a response
whose message says so (and prints the error). The response is checked here, so a refusal is a
one-line error and exit 1; a server that does not answer is one too (`tpurank.data.net`). The CSV
is checked first against the data it was made for (`check-submission`'s rule:
tpurank.submission.reference).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import sys
from pathlib import Path
from typing import Any

from tpurank.core.errors import TpurankError, command
from tpurank.data.download import COMPETITION, kaggle_api
from tpurank.data.net import network_timeouts
from tpurank.submission.check import check_as_asked

UPLOAD_FAILED = "Could not submit to competition"  # KaggleApi.COMPETITION_SUBMIT_UPLOAD_FAILED_MESSAGE


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--file", help="CSV to submit (default: submissions/submission.csv)")
    p.add_argument("--message", "-m", default="tpurank", help="submission description shown on Kaggle")


def accepted(response: Any) -> tuple[bool, str]:
    """(whether Kaggle accepted the submission, its message) from competition_submit's response."""
    if response is None:
        return False, "no response"
    message = str(getattr(response, "message", "") or "").strip()
    ref = getattr(response, "ref", 0) or 0
    if message == UPLOAD_FAILED:
        return False, f"{message} (the upload was refused)"
    if ref or message.lower().startswith("successfully"):
        return True, message
    return False, message or "no submission reference in Kaggle's answer"


def run(args: argparse.Namespace) -> int:
    csv = Path(args.file) if args.file else args.paths.submission
    if not csv.exists():
        raise TpurankError(
            f"{csv}: no submission yet; run {command('all')} or {command('predict --split test')}"
        )
    api = kaggle_api()  # credentials first: the check below reads the whole test set
    result, ref = check_as_asked(csv, args.paths)  # the data it was made for (submission/reference.py)
    if result.problems:
        for line in result.problems:
            print(line)
        raise TpurankError(f"{csv}: {len(result.problems)} problem(s); not submitted")
    if not result.with_data:
        print(result.notes[-1], file=sys.stderr)  # what was left unchecked, and how to check it
    printed = io.StringIO()  # the client prints a failed upload's error itself: kept for our one line
    try:
        with contextlib.redirect_stdout(printed), network_timeouts("submit"):
            response = api.competition_submit(str(csv), args.message, COMPETITION, quiet=True)
    except TpurankError:
        raise
    except Exception as e:  # the kaggle client raises plain exceptions (HTTPError for a 4xx answer)
        raise TpurankError(
            f"Kaggle refused the submission: {str(e).splitlines()[0] if str(e) else e}"
        ) from None
    ok, message = accepted(response)
    if not ok:
        detail = printed.getvalue().strip().splitlines()
        more = f" ({detail[0]})" if detail and detail[0] not in message else ""
        raise TpurankError(f"{csv}: Kaggle refused the submission: {message}{more}")
    print(f"submitted {csv} to {COMPETITION}: {message}")
    print(f"see https://www.kaggle.com/competitions/{COMPETITION}/submissions")
    if ref.synthetic is not None:
        print(
            f"tpurank submit: warning: {csv} ranks SYNTHETIC data ('{ref.synthetic}'): its IDs are not the "
            "competition's, so Kaggle will not score it",
            file=sys.stderr,
        )
    return 0
