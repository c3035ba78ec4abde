"""The CPU preset at its 10-minute budget on full-scale synthetic layout data, change by change.

Rows (issue 25's table, the default `--rows`): `before` (the code before the schedule and early-stop
fixes, fd93e76), `before+lr2` (the same code at the preset's new peak rate, 2e-3), `schedule` (the
warm-up and cosine follow the time budget; early stopping as before: `gnn.min_train_share=0`),
`early-stop` (and no stop before half the budget: the preset as first measured), `features` (and the tile-
aware GNN inputs, `gnn.tile_features` and `gnn.dim_features`). More rows: the first schedule fix at
9af1bbe (its warm-up still counted steps), the peak rate under the decaying schedule (`lr1`, `lr2`,
`lr3`, the pilot at dbd1b85), the preset after the table (`per-collection`: patience never ends the
budget, the tile-aware inputs on nlp:default only; `early-stop-rerun` beside it,
as the machine had slowed down), the verdict at one speed (`before-paired` and `shipped-paired`: the
code before issue 25 and that preset, back to back within each seed), xla:random's extra steps
(`xla-speed`: its layers kept for the backward pass, half the validations; `before-speed` back to back
with it: with the paired nlp:default runs, the preset as shipped), and LightGBM without and with its
MXU columns (`lgbm`, `lgbm+mxu`). A row without a commit runs at the checkout's HEAD
when the bench starts (all are pinned now).

Each run trains the model of one row, collection and seed with the CPU preset of the row's own tree
(configs/profile-cpu.toml, called configs/cpu-budget.toml at older commits), predicts the valid split and keeps its score (`submissions/valid_<model>.json`) and how the GNN
trained (`model.json`: steps, minutes, why it stopped). A row at a commit runs from a git worktree of
that commit, so editing the checkout during a bench changes nothing; each run is saved to the
results as soon as it ends, so a killed bench resumes at the run it was in. Nothing else may run
meanwhile: the budget is wall time, and a busy machine trains fewer steps (a file `PAUSE` in the
bench's folder holds the next run back until it is removed).

Below each row the table prints its real-sample rows (`REAL`: tau on the real unet graph of bench_real.py
runs with the row's change; "-" where the row was never measured on real data, as the schedule rows), and
each verdict ends with what they say: "real: lower" where a row's real rows are below its base's beyond
the seed spread. Real data decides; the synthetic rows share physics with some of the features.

    .venv/bin/python bench/runs/bench_budget.py --rows before-paired shipped-paired --seeds 0 1 2
    .venv/bin/python bench/runs/bench_budget.py --rows before-speed xla-speed --collections layout:xla:random
    .venv/bin/python bench/runs/bench_budget.py --table   # the table of what is measured so far, real rows beside
    .venv/bin/python bench/runs/bench_budget.py --curves  # each GNN run: steps and valid tau per validation
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402
import real_rows as rr  # noqa: E402

from tpurank.core.paths import NPZ_SUBDIR  # noqa: E402

PYTHON = sys.executable
DATA = ROOT / "data" / "synthetic-full"
WORK = ROOT / "data" / "bench" / "budget"
RESULTS = ROOT / "bench" / "results" / "budget.json"
COLLECTIONS = ["layout:xla:random", "layout:nlp:default"]

# row -> (commit, or None for the checkout's HEAD when the bench starts; --set overrides)
ROWS: dict[str, tuple[str | None, list[str]]] = {
    "before": ("fd93e76", []),
    # the control: the old schedule at the preset's new peak rate (is the gain the decay or the rate?)
    "before+lr2": ("fd93e76", ["gnn.lr=0.002"]),
    "schedule": ("fce21ea", ["gnn.min_train_share=0"]),
    "early-stop": ("fce21ea", []),
    "features": ("cc08e2a", ["gnn.tile_features=true", "gnn.dim_features=true"]),
    # the first schedule fix, whose warm-up still counted steps: 100 of the ~290 a budget trains
    "schedule@9af1bbe": ("9af1bbe", ["gnn.min_train_share=0"]),
    "early-stop@9af1bbe": ("9af1bbe", []),
    "features@9af1bbe": ("9af1bbe", ["gnn.tile_features=true"]),
    # the peak rate under a rate that decays within the budget (the pilot that chose the preset's 2e-3)
    "lr1": ("dbd1b85", []),
    "lr2": ("dbd1b85", ["gnn.lr=0.002"]),
    "lr3": ("dbd1b85", ["gnn.lr=0.003"]),
    # the preset after the table: patience never ends the budget, the tile-aware inputs on nlp:default only
    "per-collection": ("cc3f44c", []),
    # the shipped preset again, beside the per-collection runs: the machine's speed drifts within a day
    "early-stop-rerun": ("fce21ea", []),
    "before-rerun": ("fd93e76", []),  # and the code before issue 25, at the same speed
    # the verdict measured fairly: before and the shipped preset back to back within each seed
    "before-paired": ("fd93e76", []),
    "shipped-paired": ("cc3f44c", []),
    # xla:random fits more steps in its minutes: layers kept for the backward pass, a validation every 100
    "xla-speed": ("029103f", []),
    "before-speed": ("fd93e76", []),  # the code before issue 25 again, back to back with xla-speed
    # LightGBM with the CPU preset (300 rounds), without and with the MXU columns
    "lgbm": ("cc08e2a", []),
    "lgbm+mxu": ("cc08e2a", ["features.mxu_columns=true"]),
}
TABLE = ["before", "before+lr2", "schedule", "early-stop", "features", "per-collection"]  # the default --rows
SHIPPED = ["early-stop", "per-collection"]  # the preset as shipped before and after the table
PAIRED = ("shipped-paired", "before-paired")  # the shipped preset and its base, run back to back
# the preset as shipped now, per collection: (its row, the base run back to back with it); xla-speed
# changed layout:xla:random only, so nlp:default keeps its paired runs
CURRENT = {"layout:xla:random": ("xla-speed", "before-speed"), "layout:nlp:default": PAIRED}

# row -> its real-sample rows: bench_real.py's layout half (tau on the real unet graph, all configs) run with
# the row's change at a fixed step budget, so rows that change only the 10-minute schedule have none ("-").
# The verdict compares a row's real rows with its base's of the same setting.
GNN_W64 = "gnn, width 64, 300 steps"  # bench_real's own GNN settings
GNN_CPU = "the CPU profile's gnn with the tile-aware inputs, 300 steps"
LGBM_CPU = "lgbm, 500 configs a graph, 300 rounds"  # the CPU profile's LightGBM
LGBM_REAL = "lgbm, 1000 configs a graph, 300 rounds"  # bench_real's own LightGBM
_W64 = ("real_layout_w64.json", "real_layout_w64_s345.json")  # seeds 0-2 and 3-5
_W64_FEATURES = ("real_layout_w64_features.json", "real_layout_w64_features_s345.json")
_BEFORE = [rr.layout(_W64, "gnn", GNN_W64)]  # the GNN without the tile-aware inputs
REAL: dict[str, list[rr.Real]] = {
    **dict.fromkeys(["before", "before-rerun", "before-paired", "before-speed"], _BEFORE),
    "features": [
        rr.layout(_W64_FEATURES, "gnn", GNN_W64),
        rr.layout(("real_layout_cpu_gnn_1x300.json",), "gnn", GNN_CPU),
    ],
    "lr1": [rr.layout(("real_layout_cpu_gnn_lr1e-3.json",), "gnn", GNN_CPU)],  # peak rate 1e-3
    "lr2": [rr.layout(("real_layout_cpu_gnn_1x300.json",), "gnn", GNN_CPU)],  # the profile's 2e-3
    "lgbm": [
        rr.layout(("real_layout_cpu_nomxu.json",), "lgbm", LGBM_CPU),
        rr.layout(("real_layout_w64.json",), "lgbm", LGBM_REAL),
    ],
    "lgbm+mxu": [
        rr.layout(("real_layout_cpu_mxu.json",), "lgbm", LGBM_CPU),
        rr.layout(("real_layout_w64_features.json",), "lgbm", LGBM_REAL),
    ],
}
REAL_VERDICTS = [("features", "before"), ("lgbm+mxu", "lgbm")]  # the rows measured on real data, and both


def git(*args: str, cwd: Path = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def worktree(commit: str, root: Path) -> Path:
    """A detached worktree of `commit` under the bench's folder (made once)."""
    tree = root / "code" / commit[:12]
    if not (tree / "run.sh").exists():
        tree.parent.mkdir(parents=True, exist_ok=True)
        git("worktree", "add", "--detach", "--force", str(tree), commit)
    return tree


def tpurank(tree: Path, args: list[str], log: Path) -> float:
    """`python -m tpurank ARGS` with the code of `tree`, its output appended to `log`; its peak RSS (GB)."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    with log.open("a") as f:
        f.write(f"$ tpurank {' '.join(args)}\n")
        f.flush()
        child = subprocess.Popen([PYTHON, "-m", "tpurank", *args], cwd=tree, env=env, stdout=f, stderr=f)
        try:  # this child's own peak (plus the bench's small resident set at the fork), not the others'
            _, status, usage = os.wait4(child.pid, 0)
        except BaseException:  # Ctrl-C: no orphaned training left holding the cores
            child.kill()
            child.wait()
            raise
        child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode:
        sys.exit(f"tpurank {args[0]} failed (exit {child.returncode}); see {log}")
    return usage.ru_maxrss * 1024 / 1e9  # Linux reports KiB; GB as bench_scale and bench_gnn_memory print


def model_of(row: str) -> str:
    """The model a row trains: LightGBM for the `lgbm` rows, else the GNN."""
    return "lgbm" if row.startswith("lgbm") else "gnn"


def run_dir(work: Path, row: str, collection: str, seed: int) -> Path:
    """The folder of one run: its log, model, predictions."""
    return work / "runs" / row / collection.replace(":", "_") / f"seed-{seed}"


def run_one(row: str, commit: str, collection: str, seed: int, a: argparse.Namespace) -> dict:
    """Train (LightGBM after its features), predict valid and read back one run of the table."""
    tree = worktree(commit, a.work)
    work = a.work / "work" / commit[:12]  # the prepared cache, shared by the commit's runs
    out = run_dir(a.work, row, collection, seed)
    out.mkdir(parents=True, exist_ok=True)
    log = out / "bench.log"
    common = [
        "--collections",
        collection,
        "--data-dir",
        str(a.data),
        "--out-dir",
        str(out),
        "--work-dir",
        str(work),
    ]
    tpurank(tree, ["prepare", *common], log)
    sets = [x for s in [*ROWS[row][1], *a.extra, f"seed={seed}"] for x in ("--set", s)]
    cpu = tree / "configs" / "profile-cpu.toml"
    cpu = cpu if cpu.exists() else tree / "configs" / "cpu-budget.toml"  # its name at older commits
    preset = ["--config", str(cpu), *sets]
    m = model_of(row)
    if m == "lgbm":  # its feature tables under the run's own folder, beside a link to the shared cache
        link = out / "features" / "prepared"
        if not link.is_symlink():
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(work / "features" / "prepared")
        common = [*common[:-2], "--work-dir", str(out)]
        tpurank(tree, ["features", *common, *preset], log)
    start = time.perf_counter()
    peak = tpurank(tree, ["train", "--model", m, *common, *preset], log)
    trained = time.perf_counter() - start
    tpurank(tree, ["predict", "--model", m, "--split", "valid", *common, *preset], log)
    side = json.loads((out / "submissions" / f"valid_{m}.json").read_text())
    rec = {
        "row": row,
        "commit": commit,
        "collection": collection,
        "seed": seed,
        "score": side["scores"][collection],
        "train_wall_s": round(trained, 1),
        "train_peak_rss_gb": round(peak, 2),
    }
    stamp = provenance.stamp()  # the bench's own commit; the record's is the row's code
    rec["provenance"] = {**stamp, "commit": commit, "bench_commit": stamp["commit"]}
    if m == "gnn":
        model = json.loads((out / "models" / "gnn" / collection.replace(":", "-") / "model.json").read_text())
        keep = ("steps_run", "evals_run", "seconds", "stopped_by", "best_valid_score")
        best = max(model["history"], key=lambda h: h["valid_score"], default={})
        rec["model"] = {**{k: model[k] for k in keep}, "best_step": best.get("step")}
    return rec


def load(path: Path) -> list[dict]:
    return json.loads(path.read_text()) if path.exists() else []


def save(path: Path, results: list[dict]) -> None:
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(results, indent=1) + "\n")
    tmp.replace(path)


def table(results: list[dict], real: rr.RealRows | None = None) -> str:
    """Mean ± population std over seeds (and mean steps) per row and collection, and the mean over
    collections; below each measured row its real-sample rows (or "-": never measured on real data)."""
    real = real or rr.RealRows(REAL)
    lines = [
        "| row | data | " + " | ".join(COLLECTIONS) + f" | mean | {rr.LAYOUT} |",
        "|---" * (len(COLLECTIONS) + 4) + "|",
    ]
    for row in ROWS:
        cells, means = [], []
        for c in COLLECTIONS:
            runs = [r for r in results if r["row"] == row and r["collection"] == c]
            if not runs:
                cells.append("-")
                continue
            s = [r["score"] for r in runs]
            means.append(statistics.fmean(s))
            # the steps a run fits in its minutes: the machine's speed drifts, and the score with it
            steps = [r["model"]["steps_run"] for r in runs if "steps_run" in r.get("model", {})]
            at = f", {statistics.fmean(steps):.0f} steps" if steps else ""
            cells.append(f"{means[-1]:.4f} ± {statistics.pstdev(s):.4f} ({len(s)} seeds{at})")
        if any(c != "-" for c in cells):
            mean = f"{statistics.fmean(means):.4f}" if len(means) == len(COLLECTIONS) else "-"
            lines.append(f"| {row} | synthetic | " + " | ".join(cells) + f" | {mean} |  |")
            blank = " |" * (len(COLLECTIONS) + 1)
            lines += [f"| {row} | real |{blank} {r[0]} |" for r in real.cells(row, [rr.LAYOUT])]
    return "\n".join(lines) + "\n\n" + rr.LEGEND


def verdict(results: list[dict], row: str, base: str = "before", real: rr.RealRows | None = None) -> str:
    """Issue 25's target: `row` beats `base` by >= 0.03 mean tau, no collection worse beyond its spread,
    on 3 seeds of each; then what the real rows say (real data decides: "real: lower" flags a row whose
    real rows are below its base's beyond the seed spread, whatever the synthetic outcome)."""
    said = (real or rr.RealRows(REAL)).judge(row, base)
    gains, worse, seeds = [], [], []
    for c in COLLECTIONS:
        runs_a, runs_b = ([r for r in results if r["row"] == x and r["collection"] == c] for x in (base, row))
        if not runs_a or not runs_b:
            return f"{row} vs {base}: not every collection measured yet; {said}"
        a, b = [r["score"] for r in runs_a], [r["score"] for r in runs_b]
        # seeds both rows ran: a duplicate record or a lone seed adds none
        seeds.append(len({r["seed"] for r in runs_a} & {r["seed"] for r in runs_b}))
        gains.append(statistics.fmean(b) - statistics.fmean(a))
        if gains[-1] < -max(statistics.pstdev(a), statistics.pstdev(b)):
            worse.append(c)
    mean = statistics.fmean(gains)
    met = mean >= 0.03 and not worse
    per = ", ".join(f"{c} {g:+.4f}" for c, g in zip(COLLECTIONS, gains, strict=True))
    if not met:
        outcome = "NOT met"
    elif min(seeds) >= 3:
        outcome = "met"
    else:
        outcome = f"met on only {min(seeds)} of the 3 seeds asked"
    return f"{row} vs {base}: {per}; mean {mean:+.4f} (target +0.03, none worse beyond spread): {outcome}; {said}"


def per_collection(results: list[dict], rows: dict[str, tuple[str, str]]) -> list[dict]:
    """The runs of each collection's (row, base) renamed `current` and `current-base`: one verdict for a
    preset whose collections were measured in different rows."""
    names = {}
    for c, (row, base) in rows.items():
        names[c, row], names[c, base] = "current", "current-base"
    return [
        {**r, "row": names[r["collection"], r["row"]]}
        for r in results
        if (r["collection"], r["row"]) in names
    ]


def report(results: list[dict], real: rr.RealRows | None = None) -> str:
    """The table, then the target's verdict for each shipped preset and each row measured on real data."""
    real = real or rr.RealRows(REAL)
    pairs = [(row, "before") for row in SHIPPED] + [PAIRED, *REAL_VERDICTS]
    lines = [verdict(results, row, base, real) for row, base in pairs]
    which = "; ".join(f"{c}: {row} vs {base}" for c, (row, base) in CURRENT.items())
    picked = per_collection(results, CURRENT)
    lines.append(verdict(picked, "current", "current-base", real).replace("; real:", f" ({which}); real:", 1))
    return table(results, real) + "\n\n" + "\n".join(lines)


def curves(results: list[dict], work: Path) -> str:
    """One line per GNN run: steps, the valid tau at each validation (model.json), the all-config tau."""
    lines = [
        "| row | collection | seed | steps | valid tau at each validation | valid tau, all configs |",
        "|---|---|---|---|---|---|",
    ]
    for r in sorted(results, key=lambda r: (r["collection"], r["seed"], list(ROWS).index(r["row"]))):
        if model_of(r["row"]) != "gnn":
            continue
        c = r["collection"]
        path = run_dir(work, r["row"], c, r["seed"]) / "models" / "gnn" / c.replace(":", "-") / "model.json"
        taus = (
            " ".join(f"{h['valid_score']:.3f}" for h in json.loads(path.read_text())["history"])
            if path.exists()
            else "(run folder gone)"
        )
        steps = r.get("model", {}).get("steps_run", "-")
        lines.append(f"| {r['row']} | {c} | {r['seed']} | {steps} | {taus} | {r['score']:.4f} |")
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", default=TABLE, choices=list(ROWS))
    p.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    p.add_argument("--collections", nargs="+", default=COLLECTIONS, choices=COLLECTIONS)
    p.add_argument(
        "--data", type=Path, default=DATA, help="full-scale synthetic data (bench_scale.py makes it)"
    )
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--work", type=Path, default=WORK, help="worktrees, caches and runs")
    p.add_argument("--set", dest="extra", action="append", default=[], help="one more override (smoke tests)")
    p.add_argument("--table", action="store_true", help="print the table of the saved results and exit")
    p.add_argument("--curves", action="store_true", help="print each GNN run's validations and exit")
    rr.add_option(p)
    a = p.parse_args()
    a.data, a.work = a.data.resolve(), a.work.resolve()  # runs start in a worktree: no relative paths
    results = load(a.results)
    if a.table or a.curves:
        print(
            curves(results, a.work)
            if a.curves
            else report(results, rr.RealRows(REAL, rr.folders(a.real_dir)))
        )
        return 0
    if not (a.data / NPZ_SUBDIR).exists():
        sys.exit(
            f"{a.data}: no full-scale synthetic data; python -m tpurank synth --scale full --out {a.data} "
            f"--collections {' '.join(COLLECTIONS)} --splits train valid --jobs 2"
        )
    head = git("rev-parse", "HEAD")
    # seeds outermost: a bench stopped early still has every row at its first seeds
    for seed in a.seeds:
        for collection in a.collections:
            for row in a.rows:
                if any((r["row"], r["collection"], r["seed"]) == (row, collection, seed) for r in results):
                    continue
                while (a.work / "PAUSE").exists():  # another heavy job wants the cores between two runs
                    time.sleep(10)
                commit = ROWS[row][0] or head
                print(
                    f"[{time.strftime('%H:%M:%S')}] {row} {collection} seed {seed} ({commit[:8]})", flush=True
                )
                rec = run_one(row, git("rev-parse", commit), collection, seed, a)
                print(f"    score {rec['score']:.4f}; {rec.get('model', '')}", flush=True)
                results = [*load(a.results), rec]
                save(a.results, results)
    print(report(results, rr.RealRows(REAL, rr.folders(a.real_dir))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
