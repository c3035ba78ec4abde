"""The synthetic generator's speed: the full-scale tree against its 20-minute target, and single
files side by side with another commit's generator.

`--tree DIR` times `tpurank synth --scale full --jobs N` into an empty DIR (the real file counts
and sizes: 7,868 files, about 11 GB) and prints minutes against the target. `--files N --ref REF`
generates the N largest layout files of the full plan (and 50 tile files) with this checkout's
generator and with REF's (a git worktree in a temporary folder), alternating one after the other so
both see the same machine, and prints each file's seconds, the ratio, and whether the two wrote the
same arrays (the generator's output must stay the same for a seed, or its version is bumped).
`--demo PAIRS` times `tpurank synth --scale demo` (what a first `all` generates) with one process
and with two in turn, PAIRS times each, and checks that both wrote the same bytes.

    .venv/bin/python bench/runs/bench_synth.py --tree /big/disk/synthetic-full --jobs 2 --out bench/results/synth_full_tree.json
    .venv/bin/python bench/runs/bench_synth.py --files 4 --ref f0a313f
    .venv/bin/python bench/runs/bench_synth.py --demo 3 --out bench/results/synth_demo.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402

PYTHON = sys.executable
TARGET_MIN = 20.0
ONE_FILE = """
import sys, time
from pathlib import Path
from tpurank.synth.scales import get_scale
from tpurank.synth.spec import plan
from tpurank.synth.stage import write_file
sc = get_scale("full")
specs = {(s.collection, s.split, s.index): s for s in plan(sc, 0)}
out = Path(sys.argv[1])
t = time.perf_counter()
for key in sys.argv[2:]:
    c, split, i = key.split("|")
    write_file(out, specs[(c, split, int(i))], sc, 0)
print(time.perf_counter() - t)
"""


def time_tree(out: Path, jobs: int) -> float:
    """Minutes to generate the full-scale tree into `out` (which must not hold one yet)."""
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"{out}: not empty; give an empty folder (the generator keeps finished files)")
    t = time.perf_counter()
    cmd = [PYTHON, "-m", "tpurank", "synth", "--scale", "full", "--out", str(out), "--jobs", str(jobs)]
    subprocess.run(cmd, cwd=ROOT, check=True)
    return (time.perf_counter() - t) / 60


def time_demo(out: Path, jobs: int) -> tuple[float, int]:
    """Seconds and the peak RSS (KB, the largest process) of `tpurank synth --scale demo` into `out`
    (emptied first), from /usr/bin/time."""
    shutil.rmtree(out, ignore_errors=True)
    cmd = [PYTHON, "-m", "tpurank", "synth", "--scale", "demo", "--out", str(out), "--jobs", str(jobs)]
    r = subprocess.run(["/usr/bin/time", "-f", "%e %M", *cmd], cwd=ROOT, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    seconds, kb = r.stderr.strip().splitlines()[-1].split()
    return float(seconds), int(kb)


def demo_pairs(pairs: int) -> dict:
    """The demo tree with one process and with two, in turn: seconds, peak RSS, size, same bytes."""
    runs: dict[str, list] = {"1": [], "2": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(pairs):
            for jobs in (1, 2):
                runs[str(jobs)].append(time_demo(Path(tmp) / str(jobs), jobs))
                print(f"demo, {jobs} process(es): {runs[str(jobs)][-1][0]:.1f} s", flush=True)
        one, two = Path(tmp) / "1", Path(tmp) / "2"  # the last pair's trees
        npz = sorted(p.relative_to(one) for p in one.rglob("*.npz"))
        compared = [*npz, Path("sample_submission.csv")]
        same = (
            bool(npz)
            and npz == sorted(p.relative_to(two) for p in two.rglob("*.npz"))
            and all((one / f).read_bytes() == (two / f).read_bytes() for f in compared)
        )
        size = sum((one / f).stat().st_size for f in npz)
    seconds = {j: sorted(s for s, _ in r) for j, r in runs.items()}
    return {
        "what": "`tpurank synth --scale demo` with --jobs 1 and --jobs 2 in turn",
        "seconds": seconds,
        "median_s": {j: statistics.median(s) for j, s in seconds.items()},
        "peak_rss_mb": {j: round(max(kb for _, kb in r) / 1024) for j, r in runs.items()},
        "files": len(npz),
        "npz_mb": round(size / 1e6, 1),
        "same_bytes": same,
    }


def largest(n: int) -> list[list[str]]:
    """Groups of files to time: each of the n largest layout files of the full plan alone, then 50
    tile files together; a file is named `collection|split|index`."""
    sys.path.insert(0, str(ROOT / "src"))
    from tpurank.synth.scales import get_scale
    from tpurank.synth.spec import plan
    from tpurank.synth.stage import work_estimate

    sc = get_scale("full")
    specs = sorted(plan(sc, 0), key=lambda s: -work_estimate(s, sc, 0))
    tiles = [s for s in specs if s.collection == "tile:xla"][:50]
    groups = [[s] for s in specs[:n]] + [tiles]
    return [[f"{s.collection}|{s.split}|{s.index}" for s in group] for group in groups]


def generate(src: Path, out: Path, keys: list[str]) -> float:
    """Seconds `src`'s generator takes to write `keys` into `out`."""
    env = {"PYTHONPATH": str(src / "src"), "PATH": "/usr/bin:/bin", "OMP_NUM_THREADS": "1"}
    r = subprocess.run([PYTHON, "-c", ONE_FILE, str(out), *keys], env=env, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(r.stderr[-2000:])
    return float(r.stdout.strip().splitlines()[-1])


def same_arrays(a: Path, b: Path) -> bool:
    files = sorted(p.relative_to(a) for p in a.rglob("*.npz"))
    if files != sorted(p.relative_to(b) for p in b.rglob("*.npz")):
        return False
    for rel in files:
        with np.load(a / rel) as x, np.load(b / rel) as y:
            if x.files != y.files or any(not np.array_equal(x[k], y[k]) for k in x.files):
                return False
    return True


def side_by_side(n: int, ref: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        old = Path(tmp) / "ref"
        subprocess.run(["git", "worktree", "add", "--detach", str(old), ref], cwd=ROOT, check=True)
        try:
            print(f"| file | {ref} s | this checkout s | ratio |\n|---|---|---|---|")
            for group in largest(n):
                a, b = Path(tmp) / "a", Path(tmp) / "b"
                shutil.rmtree(a, ignore_errors=True)
                shutil.rmtree(b, ignore_errors=True)
                t_old, t_new = generate(old, a, group), generate(ROOT, b, group)
                name = group[0] if len(group) == 1 else f"{len(group)} tile files"
                same = "same arrays" if same_arrays(a, b) else "DIFFERENT arrays"
                print(f"| {name} | {t_old:.1f} | {t_new:.1f} | {t_new / t_old:.2f} ({same}) |", flush=True)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(old)], cwd=ROOT, check=False)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tree", type=Path, help="time the full-scale tree into this empty folder")
    ap.add_argument("--jobs", type=int, default=2, help="worker processes for --tree (default 2)")
    ap.add_argument("--files", type=int, default=0, help="the N largest layout files side by side with --ref")
    ap.add_argument("--ref", default="HEAD", help="the commit whose generator --files compares against")
    ap.add_argument(
        "--demo", type=int, default=0, help="time the demo tree with 1 and 2 processes, PAIRS times"
    )
    ap.add_argument("--out", type=Path, help="--tree, --demo: also save the results here (JSON)")
    args = ap.parse_args()
    if args.demo:
        res = demo_pairs(args.demo)
        print(f"demo: median {res['median_s']['1']} s with one process, {res['median_s']['2']} s with two")
        if args.out:
            res["provenance"] = provenance.stamp()
            args.out.write_text(json.dumps(res, indent=2) + "\n")
            print(f"saved {args.out}")
    if args.tree:
        minutes = time_tree(args.tree, args.jobs)
        verdict = "PASS" if minutes <= TARGET_MIN else "FAIL"
        print(
            f"full-scale tree, {args.jobs} processes: {minutes:.1f} min (target <= {TARGET_MIN:g}): {verdict}"
        )
        if args.out:
            files = list(args.tree.rglob("*.npz"))
            res = {
                "minutes": round(minutes, 2),
                "jobs": args.jobs,
                "target_min": TARGET_MIN,
                "verdict": verdict,
            }
            res |= {"files": len(files), "npz_gb": round(sum(f.stat().st_size for f in files) / 1e9, 2)}
            res["provenance"] = provenance.stamp()
            args.out.write_text(json.dumps(res, indent=2) + "\n")
            print(f"saved {args.out}")
    if args.files:
        side_by_side(args.files, args.ref)
    if not (args.tree or args.files or args.demo):
        ap.error("give --tree DIR, --files N or --demo PAIRS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
