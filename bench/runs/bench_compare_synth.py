"""`tpurank compare-synth` on the real sample, saved: the synthetic data beside the real files.

docs/data.md quotes the tables `compare-synth` prints (the files' structure, their runtimes and
rankings, the ranking difficulty); this runs the command as a user would, in a fresh process, and
saves what it printed with the provenance every results file carries, so bench/figures/figures.py renders
the tables from the run that printed them.

    .venv/bin/python bench/runs/bench_compare_synth.py [--scale demo] [--seed 0] [--difficulty-seeds 5]
        [--real ../shared/data/tpugraphs-sample] [--out bench/results/compare_synth.json]

Without the real sample it prints why and exits 0 (as the other real-data benches do).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402
from real_data import SHARED  # noqa: E402

from tpurank.core.paths import has_dataset  # noqa: E402


def tables(printed: str) -> tuple[list[str], str]:
    """The markdown tables of compare-synth's output, each with the line that closes it (blocks
    between blank lines; the progress lines before the first table are dropped), and its last
    `summary:` line."""
    blocks = [b.strip() for b in printed.split("\n\n") if b.strip()]
    summary = next((line for line in printed.splitlines()[::-1] if line.startswith("summary: ")), "")
    kept = [b[b.index("| ") :] if "| " in b else b for b in blocks if "|---" in b]
    return kept, summary


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--real", type=Path, default=SHARED, help="the real sample's data root")
    p.add_argument("--scale", default="demo", help="the synthetic tree generated to compare (default: demo)")
    p.add_argument("--seed", type=int, default=0, help="its seed")
    p.add_argument("--difficulty-seeds", type=int, default=5, help="compare-synth's --difficulty-seeds")
    p.add_argument("--out", type=Path, help="write the results here (JSON)")
    a = p.parse_args()
    if not has_dataset(a.real):
        print(f"{a.real}: no real sample here (no dataset tree): nothing to compare")
        return 0
    cmd = [sys.executable, "-m", "tpurank", "compare-synth", "--real", str(a.real), "--scale", a.scale]
    cmd += ["--seed", str(a.seed), "--difficulty-seeds", str(a.difficulty_seeds)]
    start = time.perf_counter()
    r = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if r.returncode:
        print(r.stdout + r.stderr, file=sys.stderr)
        return r.returncode
    found, summary = tables(r.stdout)
    print(r.stdout)
    print(f"{seconds:.0f} s")
    if a.out:
        out = {
            "scale": a.scale,
            "seed": a.seed,
            "difficulty_seeds": a.difficulty_seeds,
            "seconds": round(seconds, 1),
            "tables": found,
            "summary": summary,
            "provenance": provenance.stamp(),
        }
        tmp = a.out.with_suffix(".tmp")
        tmp.write_text(json.dumps(out, indent=1) + "\n")
        tmp.replace(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
