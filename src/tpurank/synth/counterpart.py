"""Synthetic files of the same sizes as given real ones, for a like-for-like difficulty comparison.

A real layout file becomes a synthetic graph of its family with the same node count, (about) the
same number of configurable nodes and exactly as many configs, sampled the way its collection
samples them (a search around the compiler default, or random layouts), asked for the real
file's share of duplicate configs (the default search only approximates it). A real tile kernel becomes a synthetic kernel with the same node and
config counts.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np

from tpurank.core.paths import NPZ_SUBDIR
from tpurank.data.npz import TileGraph, load_graph, member_shapes, save_graph
from tpurank.pb.convert import read_pb, tile_graphs
from tpurank.synth import layout_configs as cfgs
from tpurank.synth.graph_families import layout_graph, tile_graph
from tpurank.synth.layout_file import write_layout_file
from tpurank.synth.noise import measure
from tpurank.synth.physics import Physics, draw_physics
from tpurank.synth.tile_cost import tile_cost

# default collections: the search revisits configs by itself (layout_file.layout_config_stream keeps
# only a fifth of the asked duplicate share); ask for more so the result is near the real share
DEFAULT_DUP_SCALE = 5.0


def _dup_share(path: Path) -> float:
    g = load_graph(path, config_dtype=np.int8)
    flat = np.ascontiguousarray(g.node_config_feat.reshape(g.num_configs, -1))
    unique = len(np.unique(flat.view(np.dtype((np.void, flat.shape[1] * flat.itemsize)))))
    return 1.0 - unique / max(1, g.num_configs)


def layout_counterpart(
    real: Path, out: Path, collection: str, split: str, seed: int, siblings: bool = True
) -> Path:
    """Write a synthetic counterpart of one real layout file.

    Args:
        real: the real npz.
        out: the synthetic data root (the file goes to its npz tree under the same names).
        collection: the real file's collection ("layout:xla:default", ...).
        split: its split.
        seed: random seed (the graph and configs are a pure function of it and the file's sizes).
        siblings: draw the graph from a generator seeded by `seed` alone, so the counterparts of
            one seed are one model at other sizes (the real pair, unet3d and unet_3d.4x4.bf16, are
            one architecture); False: an unrelated graph per file.
    """
    shapes = member_shapes(real)
    nodes = shapes["node_feat"][0][0]
    configurable, configs = shapes["node_config_feat"][0][1], shapes["node_config_feat"][0][0]
    family = collection.split(":")[1]
    rng = np.random.default_rng([seed, nodes, configurable, configs])
    g_rng = np.random.default_rng([seed, 99]) if siblings else rng
    graph = layout_graph(g_rng, family, nodes, configurable)
    dup = _dup_share(real)
    if collection.endswith(":default"):
        dup = min(0.95, dup * DEFAULT_DUP_SCALE)
    search = collection.split(":")[2]
    path = out / NPZ_SUBDIR / "layout" / family / search / split / real.name
    path.parent.mkdir(parents=True, exist_ok=True)
    write_layout_file(
        path,
        graph,
        collection,
        split=split,
        total=configs,
        rng=rng,
        dup_share=(dup, dup),
        physics=draw_physics(seed),
    )
    return path


def tile_counterpart(nodes: int, configs: int, path: Path, seed: int, physics: Physics | None = None) -> Path:
    """Write a synthetic tile kernel of `nodes` nodes measured under `configs` tile sizes (under
    `physics`; default: the physics drawn from `seed`)."""
    physics = physics or draw_physics(seed)
    rng = np.random.default_rng([seed, nodes, configs, 7])
    graph = tile_graph(rng, nodes)
    tiles = cfgs.sample_tiles(graph.root_shape, rng, max(2, configs), graph.root_etype_bytes)
    runtime = measure(tile_cost(graph, tiles, physics), rng, physics=physics)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_graph(
        path,
        TileGraph(
            node_feat=graph.node_feat,
            node_opcode=graph.node_opcode,
            edge_index=graph.edge_index,
            config_feat=cfgs.tile_config_feat(tiles),
            config_runtime=runtime,
            config_runtime_normalizers=np.full(len(tiles), runtime[0], dtype=np.int64),
        ),
    )
    return path


TILE_VALID_EVERY = 3  # tile kernels: every third (sorted by name) is a valid kernel, the rest train


def real_tile_root(pb: Path, out: Path) -> list[tuple[str, int, int]]:
    """Write the kernels of a raw TuningData (`pb/op_tuning_data.pb`) as tile train/valid files.

    Returns:
        (split, nodes, configs) per kernel, in the order written (for `synthetic_tile_root`).
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graphs = tile_graphs(pb, read_pb(pb, "tile")[1])
    sizes = []
    for i, (stem, g) in enumerate(sorted(graphs.items())):
        split = "valid" if i % TILE_VALID_EVERY == TILE_VALID_EVERY - 1 else "train"
        path = out / NPZ_SUBDIR / "tile" / "xla" / split / f"{stem}.npz"
        path.parent.mkdir(parents=True, exist_ok=True)
        save_graph(path, g)
        sizes.append((split, len(g.node_opcode), len(g.config_runtime)))
    return sizes


def synthetic_tile_root(sizes: list[tuple[str, int, int]], out: Path, seed: int) -> None:
    """Synthetic kernels of the given (split, nodes, configs) under `out`, one physics (of `seed`)."""
    physics = draw_physics(seed)
    for i, (split, nodes, configs) in enumerate(sizes):
        path = out / NPZ_SUBDIR / "tile" / "xla" / split / f"kernel{i:02d}.npz"
        tile_counterpart(nodes, configs, path, seed * 1000 + i, physics)
