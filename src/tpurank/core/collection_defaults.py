"""Per-collection defaults: the GPU profile's training scale of each collection, and what differs by kind.

They sit between the global defaults of `core/config.py` and everything a user sets: a key set at top
level by a preset, `--config` or `--set` (`gnn.max_steps = 240`) beats the per-collection default of
the same key, and a user's own `[collections."<c>".<section>]` table beats both. So the CPU and demo
presets, which set the keys they care about at top level, are not overridden by the GPU scale below.

The scale follows the 1st place (thanhhau097/google_fast_or_slow, train_*.sh): one graph per step
for 750 epochs on xla, 1000 on nlp, 100k steps on tile, i.e. about 46k (xla:default, 61 graphs),
52k (xla:random, 69), 198k and 207k (nlp:default, nlp:random) and 100k (tile) graph-steps. tpurank takes `gnn.graphs_per_batch = 4`
graphs per step, so the same graphs and configs seen take a quarter of those steps. Warm-up: 5% of
the steps (their `warmup_ratio=0.05`); validation every 2000 (xla) or 6000 (nlp) of their steps.
"""

from __future__ import annotations

import copy
from typing import Any

DEFAULT_COLLECTIONS: dict[str, dict[str, Any]] = {
    "tile:xla": {
        # 1st place: 100k steps of 1 graph (train_tile.sh), here 4 graphs a step
        "gnn": {"max_steps": 25_000, "warmup_steps": 1_250, "eval_every": 1_250},
        # tile scores a graph by its 5 top-ranked configs: z-scores keep how far ahead a member puts its
        # favourites, ranks flatten it (docs/models.md, "The ensemble": better on the real kernels and on demo)
        "ensemble": {"normalize": "zscore"},
    },
    "layout:xla:default": {
        "gnn": {
            "max_steps": 11_500,  # 1st place: 750 epochs x ~61 graphs = ~46k graph-steps, 4 graphs a step
            "warmup_steps": 575,  # 1st place: warmup_ratio 0.05
            "eval_every": 500,  # 1st place: eval_steps 2000 graph-steps
            # attention across configs at the configurable nodes, every layer: it raised the GNN's tau on demo
            # xla:default and on the real unet_3d graph (docs/models.md, "The recipe of the top solutions")
            "layer_attention": True,
        },
    },
    "layout:xla:random": {
        "gnn": {
            "max_steps": 13_000,  # 1st place: 750 epochs x ~69 graphs = ~52k graph-steps, 4 graphs a step
            "warmup_steps": 650,  # 1st place: warmup_ratio 0.05
            "eval_every": 500,  # 1st place: eval_steps 2000 graph-steps
            "configs_per_graph": 128,  # 1st place: max_configs 128 on the random collections (64 on default)
        },
    },
    "layout:nlp:default": {
        "gnn": {
            "max_steps": 50_000,  # 1st place: 1000 epochs x ~198 graphs = ~200k graph-steps, 4 graphs a step
            "warmup_steps": 2_500,  # 1st place: warmup_ratio 0.05
            "eval_every": 1_500,  # 1st place: eval_steps 6000 graph-steps
            "layer_attention": True,  # 1st place: use_cross_attn on the default collections
        },
    },
    "layout:nlp:random": {
        "gnn": {
            "max_steps": 52_000,  # 1st place: 1000 epochs x ~207 graphs = ~207k graph-steps, 4 graphs a step
            "warmup_steps": 2_600,  # 1st place: warmup_ratio 0.05
            "eval_every": 1_500,  # 1st place: eval_steps 6000 graph-steps
            "configs_per_graph": 128,  # 1st place: max_configs 128 on the random collections
        },
    },
}


def collection_defaults(explicit: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """DEFAULT_COLLECTIONS without the keys `explicit` (the merged preset, file and `--set`) sets at top level.

    Args:
        explicit: the user's config table before validation, e.g. `{"gnn": {"max_steps": 240}}`.
    """
    out: dict[str, dict[str, Any]] = {}
    for collection, sections in DEFAULT_COLLECTIONS.items():
        kept: dict[str, Any] = {}
        for section, keys in sections.items():
            top = explicit.get(section)
            set_here = top if isinstance(top, dict) else {}
            left = {k: copy.deepcopy(v) for k, v in keys.items() if k not in set_here}
            if left:
                kept[section] = left
        out[collection] = kept
    return out
