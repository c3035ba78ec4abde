"""Write a whole synthetic dataset tree: every graph file, then sample_submission.csv.

Every file is a pure function of (seed, collection, split, index), so runs are deterministic and
resumable: files that already exist are skipped (writes are atomic, so an existing file is
complete). Like the real data, the `default` and `random` collections of one family share graphs
and stems (index by index), so the two layout test sets hold the same graphs with other configs.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tpurank.atomic import write_json, write_text
from tpurank.config import Config
from tpurank.dataset import COLLECTIONS, SPLITS, check_collection, collection_dir
from tpurank.errors import DataError, TpurankError
from tpurank.npz import LAYOUT_KEYS, LayoutGraph, TileGraph, member_shapes, read_header, save_graph
from tpurank.paths import NPZ_SUBDIR, SAMPLE_SUBMISSION
from tpurank.progress import tqdm
from tpurank.provenance import write_sidecar
from tpurank.synth import configs as cfgs
from tpurank.synth.cost_model import measure, tile_cost
from tpurank.synth.hlo import HloGraph, layout_graph, tile_graph
from tpurank.synth.scales import Scale, get_scale, log_uniform
from tpurank.synth.stems import test_stems, unique_stems
from tpurank.synth.writer import write_npz_streaming
from tpurank.workers import die_with_parent

IN_MEMORY_BYTES = 256 << 20  # node_config_feat (float32) above this is streamed to disk in chunks
STREAM_CHUNK_ITEMS = 4 << 20  # config values per streamed block (16 MB as float32)
PLAN_FILE = "synth.json"
TEST_UNIQUE_SHARE = 0.995  # test files hold (almost) distinct configs, like the real ones


@dataclass(frozen=True)
class FileSpec:
    """One file to generate: where it goes and the index that seeds it."""

    collection: str
    split: str
    stem: str
    index: int

    @property
    def family(self) -> str:
        return "tile" if self.collection == "tile:xla" else self.collection.split(":")[1]

    def path(self, root: Path) -> Path:
        return root / NPZ_SUBDIR / collection_dir(self.collection) / self.split / f"{self.stem}.npz"


def _rng(seed: int, *keys: str | int) -> np.random.Generator:
    """A generator seeded by the run seed and string/int keys (stable across runs and platforms)."""
    return np.random.default_rng([seed, *(_word(k) if isinstance(k, str) else k for k in keys)])


def _word(key: str) -> int:
    """A 64-bit number naming a string key (sha256: stable, no collisions between our keys)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "little")


def plan(scale: Scale, seed: int) -> list[FileSpec]:
    """Every file of the scale, in collection then split order (stems drawn per family and split)."""
    specs: list[FileSpec] = []
    for collection in COLLECTIONS:
        family = "tile" if collection == "tile:xla" else collection.split(":")[1]
        for split in SPLITS:
            n = scale.count(collection, split)
            partner = _partner(collection)
            longest = max(n, scale.count(partner, split)) if partner else n
            rng = _rng(seed, "stems", family, split)
            stems = test_stems(rng, longest) if split == "test" else unique_stems(rng, family, longest)
            specs.extend(FileSpec(collection, split, stems[i], i) for i in range(n))
    return specs


def _partner(collection: str) -> str | None:
    """The collection sharing graphs with this one (xla:default <-> xla:random, ...)."""
    if collection == "tile:xla":
        return None
    kind, family, search = collection.split(":")
    return f"{kind}:{family}:{'random' if search == 'default' else 'default'}"


# ----------------------------------------------------------------------------- one file


def build_tile(spec: FileSpec, scale: Scale, seed: int) -> TileGraph:
    g_rng = _rng(seed, "graph", spec.collection, spec.split, spec.index)
    graph = tile_graph(g_rng, log_uniform(g_rng, *scale.tile_nodes))
    c_rng = _rng(seed, "configs", spec.collection, spec.split, spec.index)
    count = max(2, log_uniform(c_rng, *scale.tile_configs))
    tiles = cfgs.sample_tiles(graph.root_shape, c_rng, count, graph.root_etype_bytes)
    if spec.split == "test":
        runtime = np.zeros(len(tiles), dtype=np.int64)
        norm = np.ones(len(tiles), dtype=np.int64)
    else:
        runtime = measure(tile_cost(graph, tiles), c_rng)
        norm = np.full(len(tiles), runtime[0], dtype=np.int64)  # row 0 is the default tile
    return TileGraph(
        node_feat=graph.node_feat,
        node_opcode=graph.node_opcode,
        edge_index=graph.edge_index,
        config_feat=cfgs.tile_config_feat(tiles),
        config_runtime=runtime,
        config_runtime_normalizers=norm,
    )


def _layout_graph(spec: FileSpec, scale: Scale, seed: int) -> HloGraph:
    # seeded by family (not collection): default and random share the graph of each index
    g_rng = _rng(seed, "graph", spec.family, spec.split, spec.index)
    nodes = log_uniform(g_rng, *scale.layout_nodes[spec.family])
    per = g_rng.uniform(*scale.nodes_per_configurable)
    configurable = int(np.clip(round(nodes / per), 5, scale.max_configurable))
    return layout_graph(g_rng, spec.family, nodes, configurable)


def layout_config_stream(
    graph: HloGraph,
    collection: str,
    split: str,
    total: int,
    rng: np.random.Generator,
    dup_share: tuple[float, float],
    chunk: int,
):
    """Iterator of (int8 configs, noise-free cost) blocks for one layout file."""
    unique = TEST_UNIQUE_SHARE if split == "test" else 1.0 - rng.uniform(*dup_share)
    if collection.endswith(":default"):
        # a search re-measures less on purpose, but also revisits configs by itself
        unique = unique if split == "test" else 1.0 - 0.2 * (1.0 - unique)
        return cfgs.default_search_configs(graph, rng, total, unique, chunk)
    return cfgs.random_configs(graph, rng, total, unique, chunk)


def write_layout(path: Path, spec: FileSpec, scale: Scale, seed: int) -> None:
    graph = _layout_graph(spec, scale, seed)
    c_rng = _rng(seed, "configs", spec.collection, spec.split, spec.index)
    total = scale.test_layout_configs if (spec.split == "test" and scale.test_layout_configs) else None
    total = total or log_uniform(c_rng, *scale.layout_configs)
    write_layout_file(path, graph, spec.collection, spec.split, total, c_rng, scale.dup_share)


def write_layout_file(
    path: Path,
    graph: HloGraph,
    collection: str,
    split: str,
    total: int,
    rng: np.random.Generator,
    dup_share: tuple[float, float],
) -> None:
    """Sample `total` configs of `graph`, measure them, and write the file (streamed when big)."""
    nc = len(graph.configurable)
    chunk = max(8, min(1024, STREAM_CHUNK_ITEMS // max(1, nc * 18)))
    blocks = layout_config_stream(graph, collection, split, total, rng, dup_share, chunk)
    is_test = split == "test"
    if total * nc * 18 * 4 <= IN_MEMORY_BYTES:
        parts = list(blocks)
        cfg = np.concatenate([p[0] for p in parts]).astype(np.float32)
        cost = np.concatenate([p[1] for p in parts])
        runtime = np.zeros(total, dtype=np.int64) if is_test else measure(cost, rng)
        save_graph(path, _layout_record(graph, cfg, runtime))
        return
    runtimes: list[np.ndarray] = []

    def config_rows():
        for cfg, cost in blocks:
            runtimes.append(np.zeros(len(cost), dtype=np.int64) if is_test else measure(cost, rng))
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


def write_file(root: Path, spec: FileSpec, scale: Scale, seed: int) -> Path:
    """Generate one file (kept when a readable one exists); returns its path.

    Files are written atomically, so an existing file is complete unless something else damaged
    it: one whose arrays cannot be read (a truncated zip loses its directory) is generated again.
    """
    path = spec.path(root)
    if path.exists():
        try:
            read_header(path, "tile" if spec.collection == "tile:xla" else "layout")
            return path
        except DataError as e:
            print(f"synth: regenerating {path}: {e.problem}", file=sys.stderr)
    if spec.collection == "tile:xla":
        save_graph(path, build_tile(spec, scale, seed))
    else:
        write_layout(path, spec, scale, seed)
    return path


# ----------------------------------------------------------------------------- the tree


def _placeholder(collection: str, configs: int) -> str:
    k = min(configs, 5) if collection == "tile:xla" else min(configs, 1000)
    return ";".join(str(i) for i in range(k))


def sample_submission_rows(specs: list[FileSpec], root: Path, seed: int) -> list[str]:
    """`ID,TopConfigs` rows for the test files of `specs` that exist under `root`: collections in
    the real order, files shuffled within each (the real file is not sorted either). As in the real
    file, a source's default and random collections list their shared test graphs in one order."""
    rows = ["ID,TopConfigs"]
    for collection in COLLECTIONS:
        tests = sorted(
            (s for s in specs if s.collection == collection and s.split == "test" and s.path(root).exists()),
            key=lambda s: s.stem,
        )
        source = collection.rsplit(":", 1)[0] if collection.startswith("layout:") else collection
        order = _rng(seed, "submission", source).permutation(len(tests))
        for i in order:
            s = tests[i]
            configs = member_shapes(s.path(root))["config_runtime"][0][0]
            rows.append(f"{collection}:{s.stem},{_placeholder(collection, configs)}")
    return rows


def _check_plan(root: Path, record: dict) -> None:
    """Refuse to write into a real dataset or into a synthetic one of another scale or seed."""
    path = root / PLAN_FILE
    if not path.exists():
        if (root / NPZ_SUBDIR).is_dir():
            raise TpurankError(
                f"{root}: holds a dataset that `tpurank synth` did not write (no {PLAN_FILE}); "
                "refusing to mix synthetic files into it: use another --out"
            )
        return
    try:
        old = json.loads(path.read_text())
    except (OSError, ValueError):
        return
    if (old.get("scale"), old.get("synth_seed")) != (record["scale"], record["synth_seed"]):
        raise TpurankError(
            f"{root}: already holds a synthetic dataset of scale {old.get('scale')} seed {old.get('synth_seed')}; "
            "use another --out (files are reused only for the same scale and seed)"
        )


def generate(
    out: Path,
    scale: str = "tiny",
    seed: int = 0,
    collections: list[str] | None = None,
    splits: list[str] | None = None,
    progress: bool = False,
    cfg: Config | None = None,
    jobs: int = 1,
) -> None:
    """Write a synthetic TpuGraphs tree (`npz_all/npz/...` and `sample_submission.csv`) under `out`.

    Args:
        out: the data root to create (or complete: existing files are kept).
        scale: "tiny" (seconds, for tests), "demo" (for `./run.sh all`) or "full" (real sizes).
        seed: every random choice derives from it; same seed, same bytes.
        collections: restrict to these collections (default: all five).
        splits: restrict to these splits (default: train, valid, test).
        progress: show a progress bar on stderr.
        cfg: the run's resolved config, recorded in the provenance sidecar (`synth.json`).
        jobs: worker processes (files are independent; each is seeded by its own spec).

    Raises:
        TpurankError: unknown scale, collection or split, a negative seed, or `out` holds another
            scale/seed.
    """
    out = Path(out)
    sc = get_scale(scale)
    if seed < 0:
        raise TpurankError(f"seed must be a non-negative integer, got {seed}")
    collections = [check_collection(c) for c in (collections or COLLECTIONS)]
    splits = list(splits or SPLITS)
    for s in splits:
        if s not in SPLITS:
            raise TpurankError(f"unknown split {s!r}; expected one of {', '.join(SPLITS)}")
    record = {"scale": sc.name, "synth_seed": seed}
    _check_plan(out, record)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / PLAN_FILE, record)
    specs = [s for s in plan(sc, seed) if s.collection in collections and s.split in splits]
    bar = tqdm(total=len(specs), desc=f"synth {scale}", unit="file", disable=not progress, file=sys.stderr)
    if jobs <= 1:
        for spec in specs:
            write_file(out, spec, sc, seed)
            bar.update()
    else:
        ctx = multiprocessing.get_context("spawn")
        pool_args = {"initializer": die_with_parent, "initargs": (os.getpid(),)}  # no orphans when killed
        with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, **pool_args) as pool:
            for fut in as_completed([pool.submit(write_file, out, spec, sc, seed) for spec in specs]):
                fut.result()
                bar.update()
    bar.close()
    if "test" in splits:  # every test file of the tree so far, also those of earlier partial runs
        rows = sample_submission_rows(plan(sc, seed), out, seed)
        write_text(out / SAMPLE_SUBMISSION, "\n".join(rows) + "\n")
    write_sidecar(
        out / PLAN_FILE,
        cfg,
        out,
        **record,
        collections=collections,
        splits=splits,
        files=len(specs),
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
    rng = _rng(seed, "big", collection, nodes, configurable, configs)
    graph = layout_graph(rng, collection.split(":")[1], nodes, configurable)
    write_layout_file(Path(path), graph, collection, split, configs, rng, (dup_share, dup_share))
