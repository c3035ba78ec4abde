"""Peak memory of scoring each valid graph of one collection with a fresh GNN (the 4 GB target of docs/scale.md).

Scores `--configs` configs of every valid graph (`scoring.score_rows`, as validation does) with an
untrained model of the given config, and prints per graph: nodes, configurable nodes, configs
scored, the peak resident set of that scoring (Linux VmHWM, reset before each graph) and seconds.
Shows what `scoring.pass_configs` bounds: the (C, N, H) states and, with `gnn.layer_attention`,
the heads x K x C^2 attention scores of one pass.

    .venv/bin/python bench/runs/bench_scoring_memory.py --data DIR --work WORK_DIR \\
        [--collection layout:nlp:default] [--config configs/profile-cpu.toml] [--configs 500]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")

from peak_rss import peak_rss_gb, reset_peak_rss  # noqa: E402

from tpurank.core.config_files import load_config  # noqa: E402
from tpurank.core.memory import release_free_memory  # noqa: E402
from tpurank.core.paths import Paths  # noqa: E402
from tpurank.gnn.data import eval_configs, load_split  # noqa: E402
from tpurank.gnn.families import gnn as gnn_model  # noqa: E402
from tpurank.gnn.scoring import score_rows  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--work", type=Path, required=True, help="the --work-dir holding features/prepared")
    p.add_argument("--collection", default="layout:nlp:default")
    p.add_argument("--config", type=Path, help="TOML config (default: the defaults)")
    p.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE")
    p.add_argument("--configs", type=int, default=500, help="configs scored per graph (eval_max_configs)")
    a = p.parse_args()
    cfg = load_config(a.config, a.set).for_collection(a.collection)
    paths = Paths(a.data, Path("/tmp") / "bench-scoring-memory", a.work)
    valid = load_split(paths, a.collection, "valid", False)
    torch.manual_seed(cfg.seed)
    model = gnn_model.SPEC.new_network(cfg, valid[0].kind, int(valid[0].node_feat.shape[1])).eval()
    print(
        f"{a.collection}: {len(valid)} valid graphs, {a.configs} configs each, {' '.join(a.set) or 'config as given'}"
    )
    peaks = []
    for g in valid:
        rows = np.unique(g.inverse[eval_configs(g, a.configs)])
        release_free_memory()
        reset_peak_rss()  # this graph's own peak
        t = time.perf_counter()
        score_rows(model, g, rows, cfg.gnn.predict_chunk, torch.device("cpu"))
        peaks.append(peak_rss_gb())
        print(
            f"  {g.id[-12:]}: {len(g.opcode):>6} nodes, {len(g.config_nodes):>5} configurable, "
            f"{len(rows):>4} configs: peak {peaks[-1]:.2f} GB, {time.perf_counter() - t:.1f} s",
            flush=True,
        )
    print(f"highest peak of one graph: {max(peaks):.2f} GB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
