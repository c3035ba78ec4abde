"""The attention across configs of a scoring pass, with a padding mask that masks nothing and without one.

A scoring pass (validation, prediction) holds the configs of one graph, none of them padding, so on
the CPU `CrossConfigAttention` passes no padding mask. This times torch's attention alone
(`nn.MultiheadAttention`, not the layer norm around it nor a whole scoring pass) both ways on the
(configurable nodes, configs, width) sequences of a pass, in alternating pairs, without gradients as
scoring runs, and checks that both give the same numbers.

    .venv/bin/python bench/runs/bench_attention.py [--nodes 100 400] [--configs 32 256] [--hidden 32 64]
        [--pairs 5] [--threads 1] [--out bench/results/attention.json]
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch import nn

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench" / "lib"))  # the shared helpers (bench/README.md, "Rooms")
import provenance  # noqa: E402

HEADS = 4  # gnn.heads' default


def timed(
    attn: nn.MultiheadAttention, x: torch.Tensor, mask: torch.Tensor | None
) -> tuple[float, torch.Tensor]:
    """Seconds of one attention pass over `x` (after a warm-up pass), and its output."""
    attn(x, x, x, key_padding_mask=mask, need_weights=False)
    t = time.perf_counter()
    out, _ = attn(x, x, x, key_padding_mask=mask, need_weights=False)
    return time.perf_counter() - t, out


def measure(nodes: int, configs: int, hidden: int, pairs: int) -> dict:
    """Median seconds with the mask and without, over `pairs` alternating pairs, and the largest
    difference between the two outputs."""
    torch.manual_seed(0)
    attn = nn.MultiheadAttention(hidden, HEADS, batch_first=True).eval()
    x = torch.randn(nodes, configs, hidden)
    hides_nothing = torch.zeros(nodes, configs, dtype=torch.bool)
    masked, plain, diff = [], [], 0.0
    for _ in range(pairs):
        s, a = timed(attn, x, hides_nothing)
        masked.append(s)
        s, b = timed(attn, x, None)
        plain.append(s)
        diff = max(diff, float((a - b).abs().max()))
    m, p = statistics.median(masked), statistics.median(plain)
    return {
        "nodes": nodes,
        "configs": configs,
        "hidden": hidden,
        "masked_s": m,
        "plain_s": p,
        "ratio": m / p,
        "max_abs_diff": diff,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--nodes", type=int, nargs="+", default=[100, 400], help="configurable nodes of a pass")
    p.add_argument("--configs", type=int, nargs="+", default=[32, 256], help="configs of a pass")
    p.add_argument("--hidden", type=int, nargs="+", default=[32, 64], help="widths")
    p.add_argument("--pairs", type=int, default=5, help="masked/unmasked pairs timed per shape")
    p.add_argument("--threads", type=int, default=1, help="torch threads (a pass beside another process)")
    p.add_argument("--out", type=Path, help="write the results here (JSON)")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    rows = []
    with torch.no_grad():
        for nodes, configs, hidden in itertools.product(a.nodes, a.configs, a.hidden):
            r = measure(nodes, configs, hidden, a.pairs)
            rows.append(r)
            print(
                f"{nodes:>4} nodes x {configs:>3} configs, width {hidden}: with the mask {r['masked_s'] * 1e3:7.1f} ms, "
                f"without {r['plain_s'] * 1e3:7.1f} ms ({r['ratio']:.2f}x), outputs differ by {r['max_abs_diff']:.1e}",
                flush=True,
            )
    if a.out:
        out = {"provenance": provenance.stamp(), "heads": HEADS, "threads": a.threads, "rows": rows}
        a.out.write_text(json.dumps(out, indent=1) + "\n")
        print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
