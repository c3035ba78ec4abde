"""Pretraining on the synthetic tree, then training on the real graphs: does the GNN rank an unseen
real layout graph better when it starts from a model of synthetic programs (`gnn.init_from`)?

1. `tpurank synth --scale S --collections layout:xla:default` into <work>/synth;
2. `prepare` it with the real train graph's node-feature rule (the columns kept: the networks'
   inputs must match), and `train --model gnn` there with bench_real.py's GNN settings and
   `--pretrain-steps` steps: the pretrained model.pt;
3. the pretrained model alone ranks the unseen real graph (`zero_shot`: no real training);
4. `bench_real.py --only layout` with `--set gnn.init_from=<that model.pt>`: the real train graph
   `unet3d` trains from it, and the real valid graph that no model saw is scored (leave one program
   out, as every row of bench_real.py).

One pretrained model (seed 0) starts every seed of step 4, so the seeds' spread is the real
training's. Compare with bench_real.py's own rows without `gnn.init_from` (the same settings).

    .venv/bin/python bench/runs/bench_pretrain.py                     # demo scale, 600 steps, gnn only
    .venv/bin/python bench/runs/bench_pretrain.py --models gnn lgbm --reuse   # the ensemble, same pretraining
Saves bench/results/real_layout_pretrained.json (or --out): bench_real's record plus the
pretraining's. Exits 0 with the reason when ../shared is absent.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

import bench_real  # noqa: E402
import provenance  # noqa: E402
import real_data as rd  # noqa: E402

from tpurank.core.paths import Paths  # noqa: E402
from tpurank.data.subsets import load_subsets  # noqa: E402
from tpurank.models.predictions import load_predictions  # noqa: E402
from tpurank.prepare.node_features import RULE_FILE  # noqa: E402

RESULTS = ROOT / "bench" / "results" / "real_layout_pretrained.json"


def pretrain(work: Path, scale: str, steps: int, profile: str) -> tuple[Path, float]:
    """A gnn trained on a synthetic layout:xla:default tree with bench_real's settings: its model.pt."""
    log = work / "pretrain.log"
    data, out = work / "synth", work / "out"
    sets = [*bench_real.budget_sets(bench_real.BUDGETS["full"])]
    sets += [f"gnn.max_steps={steps}", f"gnn.eval_every={steps}", f"gnn.warmup_steps={steps // 10}"]
    common = ["--data-dir", str(data), "--out-dir", str(out), "--work-dir", str(work / "cache")]
    common += [x for s in sets for x in ("--set", s)]
    only = ["--collections", rd.LAYOUT]
    os.environ["TPURANK_PROFILE"] = profile
    t = time.perf_counter()
    rd.stage(["synth", "--scale", scale, *only, "--out", str(data)], log)
    # the real train graph's node-feature rule (the columns it keeps), so the two networks take the
    # same inputs: the synthetic tree varies fewer columns than the real graphs do
    real = ["--data-dir", str(rd.layout_root(work / "real-root")), "--out-dir", str(work / "real-out")]
    rd.stage(["prepare", "--no-progress", *only, *real, "--work-dir", str(work / "real-cache")], log)
    rule = Paths(work, work, work / "real-cache").prepared / RULE_FILE
    mine = Paths(data, out, work / "cache").prepared / RULE_FILE
    mine.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(rule, mine)
    rd.stage(["prepare", "--no-progress", "--keep-rule", *only, *common], log)
    rd.stage(["train", "--model", "gnn", *only, *common], log)
    model = out / "models" / "gnn" / rd.LAYOUT.replace(":", "-") / "model.pt"
    if not model.exists():
        raise SystemExit(f"bench_pretrain: no pretrained {model} (see {log})")
    return model, time.perf_counter() - t


def zero_shot(work: Path, model: Path, profile: str) -> dict[str, float]:
    """The pretrained model alone on the unseen real graph, before any real training: tau on all
    configs and on the official subset (does the synthetic tree's model carry any real order?)."""
    log, root, cache = work / "pretrain.log", work / "real-root", work / "real-cache"
    out = work / "zero-shot"
    paths = Paths(root, out, cache)
    target = paths.model_dir("gnn", rd.LAYOUT)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(model, target / model.name)
    os.environ["TPURANK_PROFILE"] = profile
    argv = ["predict", "--model", "gnn", "--split", "test", "--partial", "--collections", rd.LAYOUT]
    rd.stage([*argv, "--data-dir", str(root), "--out-dir", str(out), "--work-dir", str(cache)], log)
    costs = load_predictions(paths.prediction_file("gnn", "test"))
    files = rd.scored_graphs(root, rd.LAYOUT)
    subsets = load_subsets(rd.SHARED / "eval_indices").get(rd.LAYOUT, {})
    return {
        "all": rd.mean_of(rd.score_costs(costs, files, rd.LAYOUT, None)),
        "subset": rd.mean_of(rd.score_costs(costs, files, rd.LAYOUT, subsets)),
    }


def pretrained(a: argparse.Namespace) -> tuple[Path, float]:
    """The pretrained model.pt and its seconds: `--reuse` keeps the work folder's when it was made
    with the same scale, steps and profile; else the folder is emptied and it is trained again."""
    record = a.work / "pretrained.json"
    made = {"scale": a.scale, "steps": a.pretrain_steps, "profile": a.profile}
    if a.reuse and record.exists() and (old := json.loads(record.read_text()))["made"] == made:
        print(f"reused {old['model']} (pretrained in {old['seconds']:.0f} s)", flush=True)
        return Path(old["model"]), old["seconds"]
    if a.work.exists():
        shutil.rmtree(a.work)  # a model of another scale or length would be reused
    a.work.mkdir(parents=True)
    model, seconds = pretrain(a.work, a.scale, a.pretrain_steps, a.profile)
    record.write_text(json.dumps({"made": made, "model": str(model), "seconds": seconds}))
    print(f"pretrained {model} in {seconds:.0f} s", flush=True)
    return model, seconds


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--scale", default="demo", choices=["tiny", "demo", "full"], help="synthetic tree's scale")
    p.add_argument("--pretrain-steps", type=int, default=600, help="gnn steps on the synthetic tree")
    p.add_argument("--models", nargs="+", default=["gnn"], choices=bench_real.LEARNED)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--profile", default="gpu", choices=["cpu", "kaggle-t4", "gpu"])
    p.add_argument("--work", type=Path, default=ROOT / "data" / "bench" / "pretrain")
    p.add_argument("--out", type=Path, default=RESULTS)
    p.add_argument("--reuse", action="store_true", help="keep --work's pretrained model of the same settings")
    a = p.parse_args()
    if reason := rd.missing_sample(rd.SHARED):
        print(f"bench_pretrain: skipped: {reason}")
        return 0
    model, seconds = pretrained(a)
    alone = zero_shot(a.work, model, a.profile)
    print(f"the pretrained model alone on the real graph: tau {alone['all']:.4f}", flush=True)
    real = a.out.with_name(a.out.stem + "_bench_real.json")
    cmd = [sys.executable, bench_real.__file__, "--only", "layout", "--models", *a.models]
    cmd += ["--seeds", *map(str, a.seeds), "--profile", a.profile, "--work", str(a.work / "real")]
    cmd += ["--set", f"gnn.init_from={model}", "--out", str(real)]
    subprocess.run(cmd, check=True, cwd=ROOT)
    res = json.loads(real.read_text())
    real.unlink()
    res["pretraining"] = {
        "scale": a.scale,
        "steps": a.pretrain_steps,
        "seed": 0,
        "seconds": round(seconds, 1),
        "zero_shot": alone,
    }
    res["provenance"] = provenance.stamp()
    res["command"] = res["provenance"]["command"]
    a.out.write_text(json.dumps(res, indent=2) + "\n")
    print(f"saved {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
