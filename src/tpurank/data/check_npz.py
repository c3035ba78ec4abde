"""`tpurank check PATH...`: validate npz files or whole trees; one line per bad file, exit 1 if any."""

from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path

from tpurank.core.collections import kind_of
from tpurank.core.errors import DataError, TpurankError
from tpurank.core.links import not_a_file
from tpurank.core.options import add_jobs
from tpurank.core.paths import DATA_FIX, NPZ_SUBDIR
from tpurank.core.progress import tqdm
from tpurank.core.workers import die_with_parent
from tpurank.data.dataset import classify_path
from tpurank.data.npz import validate_file


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "targets",
        nargs="*",
        metavar="PATH",
        help=f"npz files or folders, searched recursively (default: the data root's {NPZ_SUBDIR})",
    )
    add_jobs(p, 1, "worker processes (default: 1; 0 = one per core)")
    p.add_argument("--quiet", action="store_true", help="print only bad files")


def collect(targets: list[str]) -> list[Path]:
    files: list[Path] = []
    for t in targets:
        p = Path(t)
        if p.is_dir():
            files.extend(sorted(p.rglob("*.npz")))  # linked folders are not entered: no loop
        elif p.exists() or p.is_symlink():  # a loop or dangling link is named by check_one
            files.append(p)
        else:
            raise TpurankError(f"{p}: no such file or folder")
    return files


def content_warnings(path: Path, split: str | None, num_configs: int, runtime_any: bool) -> list[str]:
    """Readable but suspicious content for the file's split folder, one line each.

    Args:
        path: the file (for the messages).
        split: train, valid or test from the folder it is in; None outside a dataset tree.
        num_configs: its config count.
        runtime_any: whether any runtime is non-zero.
    """
    if num_configs == 0:  # (in test it is an error, see check_one)
        return [f"{path}: 0 configs: nothing to rank or learn from (prepare skips it)"]
    if split in ("train", "valid") and not runtime_any:
        return [f"{path}: every runtime is 0 (as in a test file): nothing to learn from or score in {split}"]
    if split == "test" and runtime_any:
        return [
            f"{path}: a test file with measured runtimes (released test files hold 0): is it in the right folder?"
        ]
    return []


def check_one(path: Path) -> tuple[str | None, list[str]]:
    """(None when the file is valid, else the one-line problem naming it; warning lines)."""
    if (problem := not_a_file(path)) is not None:  # before resolving it: a link loop cannot be
        return f"{path}: {problem}", []
    where = classify_path(path)
    kind = kind_of(where[0]) if where else None
    try:
        g = validate_file(path, kind)
    except DataError as e:
        return str(e), []
    except MemoryError:
        return f"{path}: not enough memory to validate", []
    except OSError as e:  # permission denied and the like: the reason, not "[Errno N]"
        return f"{path}: {e.strerror or e}", []
    except Exception as e:  # a corrupt file can fail anywhere in a library: still one line
        return f"{path}: unreadable ({type(e).__name__}: {e})", []
    split = where[1] if where else None
    if g.num_configs == 0 and split == "test":
        return f"{path}: 0 configs: a test graph needs at least one for its submission row", []
    return None, content_warnings(path, split, g.num_configs, bool(g.config_runtime.any()))


def run(args: argparse.Namespace) -> int:
    if not args.targets and not args.paths.npz.is_dir():  # the data root's tree: say how to name another
        raise TpurankError(f"{args.paths.npz}: no dataset here; {DATA_FIX}, or name npz files or folders")
    args.targets = args.targets or [str(args.paths.npz)]
    files = collect(args.targets)
    if not files:
        fix = f"; {DATA_FIX}" if args.targets == [str(args.paths.npz)] else ""
        raise TpurankError(f"no .npz files under {' '.join(args.targets)}{fix}")
    jobs = args.jobs or os.cpu_count() or 1
    bar = dict(total=len(files), unit="file", disable=len(files) < 20, file=sys.stderr)
    if jobs > 1:
        try:
            with ProcessPoolExecutor(jobs, initializer=die_with_parent, initargs=(os.getpid(),)) as ex:
                problems = list(tqdm(ex.map(check_one, files), **bar))
        except BrokenProcessPool:  # a worker killed by the OS (out of memory): no result to report
            raise TpurankError(
                f"a check worker died (out of memory?); rerun with fewer --jobs than {jobs}"
            ) from None
    else:
        problems = [check_one(f) for f in tqdm(files, **bar)]
    bad = [p for p, _ in problems if p]
    warned = [w for _, ws in problems for w in ws]
    for line in bad:
        print(line)
    for line in warned:
        print(f"tpurank check: warning: {line}", file=sys.stderr)
    if not args.quiet:
        note = f", {len(warned)} warning(s)" if warned else ""
        print(
            f"checked {len(files)} files: {len(files) - len(bad)} ok, {len(bad)} bad{note}", file=sys.stderr
        )
    return 1 if bad else 0
