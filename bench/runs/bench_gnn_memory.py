"""Where GNN training's resident memory goes on the CPU (the 4 GB target of docs/scale.md).

Trains one collection from an existing prepared cache for a few steps, in this process, while a
thread samples the resident set every 50 ms, and prints the peak per phase (loading, building
micro-batches, the training step, validation) and the wall time. Run it with and without each
memory measure to see what it is worth:

    .venv/bin/python bench/runs/bench_gnn_memory.py --data DIR --work WORK_DIR [--steps 30] [--set gnn.KEY=VALUE ...]
        [--no-trim]                      # no malloc_trim after each CPU step (tpurank.core.memory)
        --set gnn.checkpoint_layers=false

        [--no-eval-trim]                 # ... but only after validation (as before 09df6f3)
        [--old-heap]                     # glibc's dynamic mmap threshold, no huge pages (before bound_cpu_heap)
        [--mmap-threshold-mb 1]          # another fixed threshold (0: glibc's dynamic one)
        [--no-huge-pages]                # torch not asked for huge pages (the threshold still fixed)

WORK_DIR is a --work-dir whose features/prepared holds the collection (e.g. bench_scale's
<work>/work). Results are printed, not saved: each variant is one run. It also prints, per phase,
the highest resident set at the START of a call (what the call stacks its own tensors on) and the
highest peak of one call (Linux: VmHWM, reset before each call); --trace F writes one JSON line per
call (phase, GB before, GB peak, seconds, the step's graph sizes).
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

from peak_rss import peak_rss_gb, reset_peak_rss  # noqa: E402

from tpurank.core import memory  # noqa: E402

if not {"--old-heap", "--no-huge-pages"} & set(sys.argv):
    memory.ask_torch_for_huge_pages()  # before torch's first allocation, as the CLI does

from tpurank.core.config_files import load_config  # noqa: E402
from tpurank.core.paths import Paths  # noqa: E402
from tpurank.gnn import device as devices  # noqa: E402
from tpurank.gnn.data import load_split  # noqa: E402
from tpurank.gnn.device import setup_runtime  # noqa: E402
from tpurank.gnn.families import gnn as gnn_model  # noqa: E402
from tpurank.gnn.training import loop  # noqa: E402


def parse_args() -> argparse.Namespace:
    """The options: each memory measure can be switched off, to see what it is worth."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True, help="the --work-dir holding features/prepared")
    p.add_argument("--collection", default="layout:xla:random")
    p.add_argument("--config", type=Path, help="TOML config (default: the defaults)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--no-trim", action="store_true", help="skip malloc_trim after each CPU step")
    p.add_argument("--no-eval-trim", action="store_true", help="skip malloc_trim after validation only")
    p.add_argument("--old-heap", action="store_true", help="glibc's dynamic mmap threshold, no huge pages")
    p.add_argument("--no-huge-pages", action="store_true", help="torch not asked for huge pages")
    p.add_argument(
        "--mmap-threshold-mb",
        type=float,
        default=memory.MMAP_THRESHOLD / 2**20,
        help="glibc's mmap threshold fixed at this size (default: tpurank's); 0 = glibc's dynamic one",
    )
    p.add_argument("--trace", type=Path, help="one JSON line per training step / validation")
    return p.parse_args()


class Watch:
    """The resident set per phase, sampled every 50 ms in a thread, and a record of each traced call."""

    def __init__(self, trace: Path | None) -> None:
        self.phase = "start"
        self.peaks: dict[str, float] = {}
        self.proc = psutil.Process()
        threading.Thread(target=self.watch, daemon=True).start()
        self.calls: list[dict] = []  # per traced call: phase, GB before, GB peak of the call, seconds
        self.sizes: dict = {}
        self.trace = open(trace, "w") if trace else None  # noqa: SIM115 (open for the whole run)

    def watch(self) -> None:
        """The sampling thread: the highest resident set seen in each phase."""
        while True:
            rss = self.proc.memory_info().rss / 1e9
            self.peaks[self.phase] = max(self.peaks.get(self.phase, 0.0), rss)
            time.sleep(0.05)

    def tagged(self, name: str, fn, traced: bool = False):
        """`fn`, its calls counted in phase `name`; traced: each call's own peak and time recorded too."""

        def run(*args, **kwargs):
            self.phase = name
            before, t = self.proc.memory_info().rss / 1e9, time.perf_counter()
            if traced:
                reset_peak_rss()  # this call's own peak
            try:
                return fn(*args, **kwargs)
            finally:
                self.phase = "loop"
                if traced:
                    rec = {
                        "phase": name,
                        "before": round(before, 3),
                        "peak": round(peak_rss_gb(), 3),
                        "seconds": round(time.perf_counter() - t, 2),
                        **(self.sizes if name == "train step" else {}),
                    }
                    self.calls.append(rec)
                    if self.trace:
                        self.trace.write(json.dumps(rec) + "\n")
                        self.trace.flush()

        return run


def instrument(a: argparse.Namespace, w: Watch) -> int:
    """Tag the training loop's phases and switch off the measures the options name; the mmap threshold."""

    def sized(graphs, rows, *rest):
        w.sizes.update(
            nodes=[len(g.opcode) for g in graphs], configurable=[len(g.config_nodes) for g in graphs]
        )
        return batches(graphs, rows, *rest)

    batches = w.tagged("micro-batches", loop.micro_batches)
    loop.micro_batches = sized
    loop.train_step = w.tagged("train step", loop.train_step, traced=True)
    loop.evaluate = w.tagged("validation", loop.evaluate, traced=True)
    trim = loop.release_free_memory
    if a.no_trim:
        loop.release_free_memory = lambda: False
    elif a.no_eval_trim:
        loop.release_free_memory = lambda: w.calls[-1]["phase"] != "validation" and trim()
    threshold = 0 if a.old_heap else round(a.mmap_threshold_mb * 2**20)
    # set here, not through bound_cpu_heap: that one skips the threshold without huge pages
    if threshold != memory.MMAP_THRESHOLD or a.no_huge_pages:
        devices.bound_cpu_heap = lambda: threshold > 0 and memory.fix_mmap_threshold(threshold)
    return threshold


def run_training(a: argparse.Namespace, w: Watch) -> float:
    """Train the collection from the prepared cache, in this process as `train` does; the seconds it took."""
    overrides = [f"gnn.max_steps={a.steps}", f"gnn.eval_every={max(1, a.steps // 2)}", *a.set]
    cfg = load_config(a.config, overrides).for_collection(a.collection)
    out = Path("/tmp") / f"bench-gnn-memory-{time.time_ns()}"
    paths = Paths(a.data, out, a.work)
    t = time.perf_counter()
    w.phase = "load"
    train = load_split(paths, a.collection, "train", False)
    valid = load_split(paths, a.collection, "valid", False)
    loop.fit(gnn_model.SPEC, paths, cfg, a.collection, train, valid, setup_runtime(), False)
    seconds = time.perf_counter() - t
    time.sleep(0.2)
    return seconds


def report(a: argparse.Namespace, w: Watch, threshold: int, seconds: float) -> None:
    """Peak RSS per phase and overall; per traced kind of call, the highest RSS at a start and of one call."""
    print(
        f"{a.collection}, {a.steps} steps, {' '.join(a.set) or 'config as given'}"
        f"{', no trim' if a.no_trim else ''}{f', mmap threshold {threshold / 2**20:g} MB' if threshold else ', dynamic mmap threshold'}{', no huge pages' if a.old_heap or a.no_huge_pages else ''}: {seconds:.1f} s"
    )
    for name, gb in w.peaks.items():
        print(f"  peak RSS during {name:<14} {gb:5.2f} GB")
    print(f"  peak RSS overall             {max(w.peaks.values()):5.2f} GB")
    for name in ("train step", "validation"):
        mine = [c for c in w.calls if c["phase"] == name]
        if mine:
            worst = max(mine, key=lambda c: c["before"])
            print(
                f"  {name} ({len(mine)} calls, {sum(c['seconds'] for c in mine):.1f} s): highest RSS at its "
                f"start {worst['before']:.2f} GB, highest peak of one call {max(c['peak'] for c in mine):.2f} GB"
            )


def main() -> int:
    """Instrument the loop, train, then report: one variant of the memory measures per run."""
    a = parse_args()
    w = Watch(a.trace)
    threshold = instrument(a, w)
    seconds = run_training(a, w)
    report(a, w, threshold, seconds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
