"""The submission a run hands in: the submitted model's test CSV copied to submissions/submission.csv."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tpurank.core.atomic import atomic_path
from tpurank.core.paths import Paths
from tpurank.submission.format import expected_for_split, missing_files

SUBMITTED_MODEL = "ensemble"


def incomplete_test_set(paths: Paths, stage: str = "all") -> bool:
    """True when sample_submission.csv lists test IDs without a file (e.g. the 10-file sample).

    The pipeline then ranks the files present only and says loudly that Kaggle will not accept it.

    Args:
        stage: the stage whose run this is (`all`, `infer`): the warning's label.
    """
    absent = missing_files(expected_for_split(paths, "test"))
    if absent:
        print(
            f"[{stage}] WARNING: {len(absent)} test IDs of {paths.sample_submission} have no file; the submission "
            "will rank only the files present and is NOT a valid Kaggle submission",
            file=sys.stderr,
        )
    return bool(absent)


def publish_submission(paths: Paths) -> Path:
    """Copy the submitted model's test CSV (and sidecar) to submissions/submission.csv."""
    src = paths.submission_file(SUBMITTED_MODEL, "test")
    dst = paths.submission
    for a, b in ((src, dst), (src.with_suffix(".json"), dst.with_suffix(".json"))):
        if a.exists():
            with atomic_path(b) as tmp:
                shutil.copyfile(a, tmp)
    return dst
