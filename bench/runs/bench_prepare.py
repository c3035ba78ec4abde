"""Benchmark of the `prepare` stage: memory and time on one big file, throughput on demo.

On a full-scale synthetic nlp graph whose float32 node_config_feat is >= 1.5 GiB it measures, in
one run and each in a fresh subprocess (so peak RSS is that of the work alone, imports included):
  - peak RSS of `prepare` on that file / float32 size of its node_config_feat (target <= 0.5);
  - wall time of `prepare` / wall time of merely `np.load`ing every array (target <= 1.5);
best of `--repeat` runs each, with the file already in the page cache. Then the throughput of
`python -m tpurank prepare` on the demo dataset (graphs/s, MB/s of npz).

    .venv/bin/python bench/runs/bench_prepare.py            # generates data/bench and data/synthetic-demo once
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tpurank.core.paths import NPZ_SUBDIR

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
BIG_ROOT = ROOT / "data" / "bench" / "prepare-big"  # a one-file dataset tree (data/ is gitignored)
BIG_FILE = BIG_ROOT / NPZ_SUBDIR / "layout/nlp/random/train/bench_big_nlp.npz"
DEMO_ROOT = ROOT / "data" / "synthetic-demo"
MIN_CONFIG_BYTES = int(1.5 * 2**30)  # the target's ">= 1.5 GB" taken as GiB, the stricter reading
BIG_CONFIGS = 32_000  # x ~700 configurable nodes x 18 x 4 bytes: ~1.6 GB float32
PYTHON = sys.executable

# Child programs: each prints one JSON line with its wall time (of the work only) and peak RSS.
_LOAD = """
import json, resource, sys, time
import numpy as np
t = time.perf_counter()
with np.load(sys.argv[1]) as z:
    arrays = {k: z[k] for k in z.files}
wall = time.perf_counter() - t
print(json.dumps({"wall": wall, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""
_PREPARE = """
import json, resource, sys, time
from pathlib import Path
from tpurank.core.config import Config
from tpurank.core.paths import Paths
from tpurank.prepare.stage import prepare_dataset
t = time.perf_counter()
res = prepare_dataset(Paths(Path(sys.argv[1]), Path(sys.argv[2])), Config(), jobs=1, progress=False,
                      out=Path(sys.argv[2]))
wall = time.perf_counter() - t
assert not res.failed, res.failed
row = res.index.iloc[0]
print(json.dumps({"wall": wall, "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  "configs": int(row["configs"]), "unique": int(row["configs_unique"]),
                  "nodes": int(row["nodes"]), "nodes_kept": int(row["nodes_kept"])}))
"""


def child(code: str, *args: str) -> dict:
    out = subprocess.run([PYTHON, "-c", code, *args], capture_output=True, text=True, cwd=ROOT)
    if out.returncode:
        raise SystemExit(f"benchmark child failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def config_bytes(path: Path) -> tuple[int, tuple[int, ...]]:
    from tpurank.data.npz import member_shapes

    shape = member_shapes(path)["node_config_feat"][0]
    return int(shape[0] * shape[1] * shape[2] * 4), shape


def ensure_big() -> None:
    if BIG_FILE.exists() and config_bytes(BIG_FILE)[0] >= MIN_CONFIG_BYTES:
        return
    from tpurank.synth import write_big_layout_graph

    print(f"generating {BIG_FILE.relative_to(ROOT)} (once) ...", flush=True)
    BIG_FILE.parent.mkdir(parents=True, exist_ok=True)
    write_big_layout_graph(BIG_FILE, collection="layout:nlp:random", configs=BIG_CONFIGS, seed=0)
    size, shape = config_bytes(BIG_FILE)
    if size < MIN_CONFIG_BYTES:
        raise SystemExit(
            f"{BIG_FILE}: node_config_feat {shape} is only {size / 2**30:.2f} GiB; raise BIG_CONFIGS"
        )


def bench_big(repeat: int, big: Path | None) -> None:
    if big is None:
        ensure_big()
    path = big or BIG_FILE
    root = path.resolve().parents[6]  # <root>/npz_all/npz/layout/<family>/<search>/<split>/<file>
    size, shape = config_bytes(path)
    with path.open("rb") as fh:  # warm the page cache so both sides read from memory
        while fh.read(64 << 20):
            pass
    loads, preps = [], []
    for _ in range(repeat):
        loads.append(child(_LOAD, str(path)))
        with tempfile.TemporaryDirectory(prefix="bench-prepare-") as out:
            preps.append(child(_PREPARE, str(root), out))
    load = min(loads, key=lambda r: r["wall"])
    prep = min(preps, key=lambda r: r["wall"])
    peak = max(r["rss"] for r in preps)
    mb = 2**20
    print(f"big file: {path}, npz {path.stat().st_size / mb:.0f} MiB")
    print(f"  node_config_feat {shape}: float32 {size / mb:.0f} MiB")
    print(
        f"  prepare: {prep['configs']} -> {prep['unique']} unique configs, nodes {prep['nodes']} -> {prep['nodes_kept']}"
    )
    print(
        f"  np.load every array: {load['wall']:.2f} s (best of {repeat}), peak RSS {load['rss'] / mb:.0f} MiB"
    )
    print(f"  prepare (one file):  {prep['wall']:.2f} s (best of {repeat}), peak RSS {peak / mb:.0f} MiB")
    print(f"RATIO peak RSS / float32 node_config_feat = {peak / size:.2f} (target <= 0.5)")
    print(f"RATIO wall prepare / np.load              = {prep['wall'] / load['wall']:.2f} (target <= 1.5)")


def bench_demo(jobs: int) -> None:
    from tpurank.core.paths import NPZ_SUBDIR
    from tpurank.data.dataset import discover

    if not (DEMO_ROOT / NPZ_SUBDIR).is_dir():
        print(f"generating {DEMO_ROOT.relative_to(ROOT)} (once) ...", flush=True)
        cmd = [PYTHON, "-m", "tpurank", "synth", "--scale", "demo", "--out", str(DEMO_ROOT)]
        subprocess.run(cmd, check=True, cwd=ROOT)
    files = discover(DEMO_ROOT / NPZ_SUBDIR)
    total = sum(f.path.stat().st_size for f in files)
    with tempfile.TemporaryDirectory(prefix="bench-prepare-demo-") as out:
        cmd = [PYTHON, "-m", "tpurank", "prepare", "--data-dir", str(DEMO_ROOT), "--out", out]
        t = time.perf_counter()
        subprocess.run(
            [*cmd, "--jobs", str(jobs), "--no-progress"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL
        )
        wall = time.perf_counter() - t
    print(
        f"demo: {len(files)} graphs, {total / 2**20:.1f} MiB npz, --jobs {jobs}: {wall:.1f} s "
        f"(whole CLI run) -> {len(files) / wall:.1f} graphs/s, {total / 2**20 / wall:.2f} MiB/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeat", type=int, default=2, help="runs of each big-file measurement (best is kept)")
    ap.add_argument("--jobs", type=int, default=2, help="prepare workers for the demo throughput")
    ap.add_argument(
        "--big", type=Path, help="use this layout npz (inside a dataset tree) instead of the synthetic one"
    )
    ap.add_argument("--skip-big", action="store_true")
    ap.add_argument("--skip-demo", action="store_true")
    args = ap.parse_args()
    if not args.skip_big:
        bench_big(args.repeat, args.big)
    if not args.skip_demo:
        bench_demo(args.jobs)


if __name__ == "__main__":
    main()
