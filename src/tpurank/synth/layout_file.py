"""Write one synthetic layout file: sample configs of a graph, measure them, save the npz.

A small file is built in memory; a big one (node_config_feat above IN_MEMORY_BYTES as float32) is
generated, measured and compressed in blocks of about 16 MB, so peak memory stays at a few hundred MB.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from tpurank.core.collections import check_collection
from tpurank.core.errors import TpurankError
from tpurank.data.npz import LAYOUT_KEYS, LayoutGraph, save_graph
from tpurank.synth import layout_configs as cfgs
from tpurank.synth.graph_families import layout_graph
from tpurank.synth.hlo import HloGraph
from tpurank.synth.noise import measure
from tpurank.synth.physics import Physics, draw_physics
from tpurank.synth.spec import keyed_rng
from tpurank.synth.writer import write_npz_streaming

IN_MEMORY_BYTES = 256 << 20  # node_config_feat (float32) above this is streamed to disk in chunks
STREAM_CHUNK_ITEMS = 4 << 20  # config values per streamed block (16 MB as float32)
TEST_UNIQUE_SHARE = 0.995  # test files hold (almost) distinct configs, like the real ones


def layout_config_stream(
    graph: HloGraph,
    collection: str,
    split: str,
    total: int,
    rng: np.random.Generator,
    dup_share: tuple[float, float],
    chunk: int,
    physics: Physics | None = None,
):
    """Iterator of (int8 configs, noise-free cost) blocks for one layout file."""
    unique = TEST_UNIQUE_SHARE if split == "test" else 1.0 - rng.uniform(*dup_share)
    kw = {"unique_share": unique, "chunk": chunk, "physics": physics}
    if collection.endswith(":default"):
        # a search re-measures less on purpose, but also revisits configs by itself
        kw["unique_share"] = unique if split == "test" else 1.0 - 0.2 * (1.0 - unique)
        return cfgs.default_search_configs(graph, rng, total, **kw)
    return cfgs.random_configs(graph, rng, total, **kw)


def write_layout_file(
    path: Path,
    graph: HloGraph,
    collection: str,
    split: str,
    total: int,
    rng: np.random.Generator,
    dup_share: tuple[float, float],
    physics: Physics | None = None,
) -> None:
    """Sample `total` configs of `graph`, measure them under `physics` (default: the reference
    physics), and write the file (streamed when big)."""
    nc = len(graph.configurable)
    chunk = max(8, min(1024, STREAM_CHUNK_ITEMS // max(1, nc * 18)))
    blocks = layout_config_stream(
        graph, collection, split, total=total, rng=rng, dup_share=dup_share, chunk=chunk, physics=physics
    )
    is_test = split == "test"
    if total * nc * 18 * 4 <= IN_MEMORY_BYTES:
        parts = list(blocks)
        cfg = np.concatenate([p[0] for p in parts]).astype(np.float32)
        cost = np.concatenate([p[1] for p in parts])
        if collection.endswith(":default") and total > 2:  # no trend across chunks either (row 0 stays)
            order = np.concatenate([[0], 1 + rng.permutation(total - 1)])
            cfg, cost = cfg[order], cost[order]
        runtime = np.zeros(total, dtype=np.int64) if is_test else measure(cost, rng, physics=physics)
        save_graph(path, _layout_record(graph, cfg, runtime))
        return
    runtimes: list[np.ndarray] = []

    def config_rows():
        for cfg, cost in blocks:
            runtimes.append(
                np.zeros(len(cost), dtype=np.int64) if is_test else measure(cost, rng, physics=physics)
            )
            yield cfg.astype(np.float32)

    arrays = {
        "node_feat": graph.node_feat,
        "node_opcode": graph.node_opcode,
        "edge_index": graph.edge_index,
        "node_config_feat": config_rows(),
        "node_config_ids": graph.node_config_ids,
        "config_runtime": lambda: np.concatenate(runtimes),
        "node_splits": graph.node_splits,
    }
    shapes = {"node_config_feat": (total, nc, 18), "config_runtime": (total,)}
    members = [(k, shapes.get(k) or arrays[k].shape, dt, arrays[k]) for k, dt in LAYOUT_KEYS.items()]
    write_npz_streaming(path, members)


def _layout_record(graph: HloGraph, cfg: np.ndarray, runtime: np.ndarray) -> LayoutGraph:
    return LayoutGraph(
        node_feat=graph.node_feat,
        node_opcode=graph.node_opcode,
        edge_index=graph.edge_index,
        node_config_feat=cfg,
        node_config_ids=graph.node_config_ids,
        config_runtime=runtime,
        node_splits=graph.node_splits,
    )


def write_big_layout_graph(
    path: str | Path,
    collection: str = "layout:nlp:random",
    nodes: int = 20_000,
    configurable: int = 700,
    configs: int = 30_000,
    seed: int = 0,
    split: str = "train",
    dup_share: float = 0.5,
) -> None:
    """Write one big layout file with bounded memory (for the prepare benchmark).

    30,000 configs x 700 configurable nodes gives a 1.5 GB float32 node_config_feat; it is
    generated and compressed in blocks of about 16 MB, so peak memory stays at a few hundred MB.

    Args:
        path: the .npz to write (atomically).
        collection: a layout collection (its family picks the graph kind, its search the configs).
        nodes: about this many nodes.
        configurable: about this many configurable nodes.
        configs: exactly this many configs.
        seed: random seed.
        split: "test" writes zero runtimes.
        dup_share: share of duplicate config rows.
    """
    if check_collection(collection) == "tile:xla":
        raise TpurankError("write_big_layout_graph writes layout files; got tile:xla")
    rng = keyed_rng(seed, "big", collection, nodes, configurable, configs)
    graph = layout_graph(rng, collection.split(":")[1], nodes, configurable)
    write_layout_file(
        Path(path),
        graph,
        collection,
        split=split,
        total=configs,
        rng=rng,
        dup_share=(dup_share, dup_share),
        physics=draw_physics(seed),
    )
