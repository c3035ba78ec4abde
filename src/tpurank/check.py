"""`tpurank check PATH...`: validate npz files or whole trees; one line per bad file, exit 1 if any."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from tpurank.dataset import classify_path, kind_of
from tpurank.errors import DataError, TpurankError
from tpurank.npz import validate_file
from tpurank.progress import tqdm


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "targets",
        nargs="*",
        metavar="PATH",
        help="npz files or folders, searched recursively (default: the data root's npz_all/npz)",
    )
    p.add_argument("--jobs", type=int, default=1, help="worker processes (0 = one per core)")
    p.add_argument("--quiet", action="store_true", help="print only bad files")


def collect(targets: list[str]) -> list[Path]:
    files: list[Path] = []
    for t in targets:
        p = Path(t)
        if p.is_dir():
            files.extend(sorted(p.rglob("*.npz")))
        elif p.exists():
            files.append(p)
        else:
            raise TpurankError(f"{p}: no such file or folder")
    return files


def check_one(path: Path) -> str | None:
    """None when the file is valid, else the one-line problem (naming the file)."""
    where = classify_path(path)
    kind = kind_of(where[0]) if where else None
    try:
        validate_file(path, kind)
    except DataError as e:
        return str(e)
    except MemoryError:
        return f"{path}: not enough memory to validate"
    except Exception as e:  # a corrupt file can fail anywhere in a library: still one line
        return f"{path}: unreadable ({type(e).__name__}: {e})"
    return None


def run(args: argparse.Namespace) -> int:
    args.targets = args.targets or [str(args.paths.npz)]
    files = collect(args.targets)
    if not files:
        raise TpurankError(f"no .npz files under {' '.join(args.targets)}")
    jobs = args.jobs or os.cpu_count() or 1
    bar = dict(total=len(files), unit="file", disable=len(files) < 20, file=sys.stderr)
    if jobs > 1:
        try:
            with ProcessPoolExecutor(jobs) as ex:
                problems = list(tqdm(ex.map(check_one, files), **bar))
        except BrokenProcessPool:  # a worker killed by the OS (out of memory): no result to report
            raise TpurankError(
                f"a check worker died (out of memory?); rerun with fewer --jobs than {jobs}"
            ) from None
    else:
        problems = [check_one(f) for f in tqdm(files, **bar)]
    bad = [p for p in problems if p]
    for line in bad:
        print(line)
    if not args.quiet:
        print(f"checked {len(files)} files: {len(files) - len(bad)} ok, {len(bad)} bad", file=sys.stderr)
    return 1 if bad else 0
