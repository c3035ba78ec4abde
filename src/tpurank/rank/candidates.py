"""A user's file as graphs to rank: an npz in the dataset's format, or a raw tuning protobuf.

A protobuf holds candidates the way an autotuner writes them: every run with a config is a
candidate, measured or not (the dataset's encoder keeps only measured runs; `featurize-pb` does
too). Each graph keeps the index, in the user's file, of every config it holds, so a ranking is
reported in the file's own config indices.
"""

from __future__ import annotations

import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from tpurank.core.errors import DataError, TpurankError
from tpurank.data.npz import LayoutGraph, TileGraph, read_header, save_graph
from tpurank.pb.configs import MIN_TILE_RUNTIME_NS
from tpurank.pb.convert import layout_arrays, parse_pb, read_bytes, tile_arrays, tile_name
from tpurank.pb.hlo_features import DEFAULT_LAYOUT_PAD


@dataclass
class Candidates:
    """One graph to rank and what ties it to the user's file.

    Args:
        name: its name (the npz's stem; a tile kernel of a protobuf: `<pb stem>_<fingerprint>`).
        kind: "layout" or "tile".
        source: the user's file.
        file_index: the user's config index of each config the graph holds, in its order.
        runtime: the measured runtime of each config (ns), 0 where it was not measured.
        graph: the arrays to write (None: `source` is an npz, copied as it is).
        normalizer: tile: each config's runtime normalizer (the default's runtime), which the
            competition's tile score divides by; None: 1.
        failed: the user's indices of the configs whose run failed (an error): not candidates,
            and no runtime can be measured for them.
    """

    name: str
    kind: str
    source: Path
    file_index: np.ndarray
    runtime: np.ndarray
    graph: LayoutGraph | TileGraph | None = None
    normalizer: np.ndarray | None = None
    failed: frozenset[int] = frozenset()

    @property
    def measured(self) -> np.ndarray:
        """Which configs have a measured runtime."""
        return self.runtime > 0

    def write(self, target: Path) -> None:
        """The graph as a dataset npz at `target` (the user's file is only read)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        if self.graph is None:
            shutil.copyfile(self.source, target)
        else:
            save_graph(target, self.graph)


def read_candidates(path: Path, kind: str | None = None) -> list[Candidates]:
    """The graphs of one file: an `.npz` (one graph) or a `.pb` (one layout graph, or one per tile
    kernel).

    Args:
        path: the user's file.
        kind: "layout" or "tile" to insist on one; None tells them apart by content.

    Raises:
        DataError: a file that is not a readable npz or protobuf of the expected kind.
        TpurankError: a file without configs to rank.
    """
    if path.suffix == ".npz":
        found = [_npz(path, kind)]
    elif path.suffix == ".pb":
        found = _pb(path, kind)
    else:
        raise DataError(path, "not a .npz or .pb file")
    found = [c for c in found if len(c.file_index)]  # a tile kernel without runs has nothing to rank
    if not found:
        raise TpurankError(f"{path}: no configs to rank (no run with a config and no error)")
    return found


def _npz(path: Path, kind: str | None) -> Candidates:
    """An npz in the dataset's format (keys, dtypes and shapes checked from its headers)."""
    found, shapes = read_header(path, kind)
    configs = shapes["config_feat" if found == "tile" else "node_config_feat"][0]
    runtime = _member(path, "config_runtime").astype(np.int64)
    normalizer = _member(path, "config_runtime_normalizers").astype(np.int64) if found == "tile" else None
    return Candidates(path.stem, found, path, np.arange(configs), runtime, normalizer=normalizer)


def _member(path: Path, key: str) -> np.ndarray:
    """One small array of an npz (its runtimes), read without loading the configs."""
    try:
        with zipfile.ZipFile(path) as z, z.open(f"{key}.npy") as f:
            return np.lib.format.read_array(f)
    except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:
        raise DataError(path, f"{key} unreadable ({e})") from None


def _pb(path: Path, kind: str | None) -> list[Candidates]:
    found, msg = parse_pb(path, read_bytes(path), kind)
    if found == "layout":
        return [_layout_pb(path, msg)]
    return [c for md in msg.modules if (c := _tile_kernel(path, md)) is not None]


def _layout_pb(path: Path, msg: Any) -> Candidates:
    """Every run with a layout config and no error: a candidate, measured or not."""
    index = [i for i, r in enumerate(msg.runs) if r.HasField("module_config") and not r.error]
    failed = frozenset(i for i, r in enumerate(msg.runs) if r.HasField("module_config") and r.error)
    graph = layout_arrays(path, msg, [msg.runs[i] for i in index], DEFAULT_LAYOUT_PAD)
    index_array = np.array(index, dtype=np.int64)
    return Candidates(path.stem, "layout", path, index_array, graph.config_runtime, graph, failed=failed)


def _tile_kernel(path: Path, md: Any) -> Candidates | None:
    """One kernel of a TuningData: every run with a tile config and no error (None: no module)."""
    if not md.HasField("module"):
        return None
    index = [i for i, r in enumerate(md.runs) if r.op_config.HasField("tile_size_config") and not r.error]
    if not index:  # a kernel whose every run failed: nothing to rank
        return None
    runs = [md.runs[i] for i in index]
    runtime = np.array([r.profile.compute_time_ns for r in runs], dtype=np.int64)
    runtime[runtime <= MIN_TILE_RUNTIME_NS] = 0  # the dataset's floor: below it, not a measurement
    default = next((int(t) for r, t in zip(runs, runtime, strict=True) if r.is_default and t > 0), 1)
    graph = tile_arrays(path, md, runs, default, DEFAULT_LAYOUT_PAD)
    normalizer = graph.config_runtime_normalizers
    index_array = np.array(index, dtype=np.int64)
    failed = frozenset(
        i for i, r in enumerate(md.runs) if r.op_config.HasField("tile_size_config") and r.error
    )
    return Candidates(tile_name(path, md), "tile", path, index_array, runtime, graph, normalizer, failed)
