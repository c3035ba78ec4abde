"""Parse a raw tuning protobuf and turn it into dataset graphs (TileGraph / LayoutGraph).

A file is a `ModuleTuningData` (one layout graph) or a `TuningData` (many tile kernels); the kind
is detected from the content. Anything else, or a truncated file, is a one-line DataError.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
from google.protobuf.message import DecodeError

from tpurank.core.errors import DataError
from tpurank.core.progress import tqdm
from tpurank.data.npz import LAYOUT_CONFIG_DIM, TILE_CONFIG_DIM, LayoutGraph, TileGraph
from tpurank.pb.configs import (
    ConfigError,
    layout_config_features,
    layout_runs,
    tile_config_features,
    tile_module_usable,
    tile_runs,
)
from tpurank.pb.graph import ModuleError, encode_module
from tpurank.pb.hlo_features import DEFAULT_LAYOUT_PAD
from tpurank.pb.schema import ModuleTuningData, TuningData


class PbWarning(UserWarning):
    """A raw file holds runs the dataset would drop, or none at all (where the official encoder
    would abort or silently empty the graph, this warns and writes what it can)."""


def _parse(data: bytes, cls: type) -> Any | None:
    """The parsed message, or None when the bytes are not a valid encoding of it."""
    msg = cls()
    try:
        msg.ParseFromString(data)
    except (DecodeError, RuntimeError, ValueError):
        return None
    return msg


def _is_module(m: Any) -> bool:
    return len(m.computations) > 0 and all(len(c.instructions) > 0 for c in m.computations)


def _is_layout(msg: Any) -> bool:
    # config_index_to_node is required by the format; a TuningData never has field 4.
    return msg is not None and _is_module(msg.module) and len(msg.config_index_to_node) > 0


def _is_tile(msg: Any) -> bool:
    # The official reader skips entries without a module; every module present must be real.
    if msg is None or not any(m.HasField("module") for m in msg.modules):
        return False
    return all(_is_module(m.module) for m in msg.modules if m.HasField("module"))


def read_bytes(path: str | Path) -> bytes:
    """The whole file; a missing, unreadable or empty file is a DataError."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise DataError(path, "no such file") from None
    except OSError as e:
        raise DataError(path, f"cannot read: {e.strerror}") from None
    if not data:
        raise DataError(path, "empty file")
    return data


def parse_pb(path: str | Path, data: bytes, kind: str | None = None) -> tuple[str, Any]:
    """Parse a raw file's bytes into ("layout", ModuleTuningData) or ("tile", TuningData).

    Args:
        path: the file (named in errors).
        data: its bytes (read_bytes).
        kind: "layout" or "tile" to insist on one message type; None detects it.

    Raises:
        DataError: truncated or corrupt bytes, or neither message type.
    """
    if kind in (None, "layout"):
        msg = _parse(data, ModuleTuningData)
        if _is_layout(msg):
            return "layout", msg
    if kind in (None, "tile"):
        msg = _parse(data, TuningData)
        if _is_tile(msg):
            return "tile", msg
    want = {"layout": "a ModuleTuningData (layout)", "tile": "a TuningData (tile)"}.get(
        kind or "", "a ModuleTuningData (layout) or TuningData (tile)"
    )
    raise DataError(path, f"truncated, corrupt, or not {want} protobuf ({len(data)} bytes)")


def read_pb(path: str | Path, kind: str | None = None) -> tuple[str, Any]:
    """Read and parse a raw file: ("layout", ModuleTuningData) or ("tile", TuningData).

    Args:
        path: the .pb file.
        kind: "layout" or "tile" to insist on one message type; None detects it.

    Raises:
        DataError: missing, empty, truncated, corrupt, or neither message type.
    """
    return parse_pb(path, read_bytes(path), kind)


def layout_graph(path: Path, msg: Any, layout_pad: int = DEFAULT_LAYOUT_PAD) -> LayoutGraph:
    """The layout npz arrays of a ModuleTuningData: one row per kept run, in file order.

    Args:
        path: the source file (named in errors).
        msg: the parsed ModuleTuningData.
        layout_pad: padding of the node-layout columns 134-139 (the dataset uses 0).

    Raises:
        DataError: an inconsistent module or config.
    """
    runs, zero_time = layout_runs(msg.runs)
    if zero_time:
        warnings.warn(f"{path}: left out {zero_time} valid run(s) timed at 0 ns", PbWarning, stacklevel=2)
    if runs and not any(r.is_default for r in runs):
        warnings.warn(
            f"{path}: no kept run is marked default (the official encoder would drop every run)",
            PbWarning,
            stacklevel=2,
        )
    if not runs:
        warnings.warn(
            f"{path}: no valid runs ({len(msg.runs)} in file): writing zero configs", PbWarning, stacklevel=2
        )
    return layout_arrays(path, msg, runs, layout_pad)


def layout_arrays(path: Path, msg: Any, runs: list[Any], layout_pad: int = DEFAULT_LAYOUT_PAD) -> LayoutGraph:
    """The layout npz arrays of a ModuleTuningData's module with the configs of `runs`, in order.

    Args:
        path: the source file (named in errors).
        msg: the parsed ModuleTuningData.
        runs: the runs whose configs become rows (featurize-pb: the measured ones; rank: candidates).
        layout_pad: padding of the node-layout columns 134-139 (the dataset uses 0).

    Raises:
        DataError: an inconsistent module or config.
    """
    g = encoded(path, msg.module, layout_pad)
    n = len(g.node_opcode)
    ids = np.array(msg.config_index_to_node, dtype=np.int64)
    if ids.size and (ids.max() >= n or (np.diff(ids) <= 0).any()):
        raise DataError(path, f"config_index_to_node must be ascending node indices below {n}")
    feats = np.empty((len(runs), len(ids), LAYOUT_CONFIG_DIM), dtype=np.float32)
    seen: dict[bytes, int] = {}  # random-search files repeat configs: decode each distinct one once
    bar = tqdm(runs, desc="layout runs", unit="run", disable=len(runs) < 1000, leave=False)
    for i, run in enumerate(bar):
        key = run.module_config.layout_config.SerializeToString(deterministic=True)
        if key in seen:
            feats[i] = feats[seen[key]]
            continue
        try:
            feats[i] = layout_config_features(run, len(ids))
        except ConfigError as e:
            raise DataError(path, f"run {i}: {e}") from None
        seen[key] = i
    return LayoutGraph(
        node_feat=g.node_feat,
        node_opcode=g.node_opcode,
        edge_index=g.edge_index,
        node_config_feat=feats,
        node_config_ids=ids,
        config_runtime=np.array([r.profile.compute_time_ns for r in runs], dtype=np.int64),
        node_splits=g.node_splits,
    )


def encoded(path: Path, module: Any, layout_pad: int, what: str = "") -> Any:
    """`encode_module`, its error as one DataError naming the file (and `what`, e.g. the module)."""
    try:
        return encode_module(module, layout_pad)
    except ModuleError as e:
        raise DataError(path, f"{what}{e}") from None


def tile_name(source: Path, module_data: Any) -> str:
    """File stem of a tile kernel as the dataset names them: `<pb stem>_<fingerprint>`.

    The fingerprint is written as signed int64 hex, e.g. `retinanet.2x2.fp32_-342c949e14733d96`.
    """
    fp = module_data.fingerprint
    signed = fp - (1 << 64) if fp >= 1 << 63 else fp
    return f"{source.stem}_{signed:x}"


def tile_arrays(path: Path, md: Any, runs: list[Any], normalizer: int, layout_pad: int) -> TileGraph:
    """The tile npz arrays of one TuningData module with the configs of `runs`, in order.

    Args:
        path: the source file (named in errors).
        md: the module's ModuleTuningData-like entry of the TuningData.
        runs: the runs whose tile configs become rows.
        normalizer: every row's runtime normalizer (the default config's runtime).
        layout_pad: padding of the node-layout columns 134-139.

    Raises:
        DataError: an inconsistent module.
    """
    g = encoded(path, md.module, layout_pad, f"module {md.module.name}: ")
    config_feat = np.array(
        [tile_config_features(r.op_config.tile_size_config) for r in runs], dtype=np.int64
    ).reshape(-1, TILE_CONFIG_DIM)
    return TileGraph(
        node_feat=g.node_feat,
        node_opcode=g.node_opcode,
        edge_index=g.edge_index,
        config_feat=config_feat.astype(np.float32),
        config_runtime=np.array([r.profile.compute_time_ns for r in runs], dtype=np.int64),
        config_runtime_normalizers=np.full(len(runs), normalizer, dtype=np.int64),
    )


def tile_graphs(path: Path, msg: Any, layout_pad: int = DEFAULT_LAYOUT_PAD) -> dict[str, TileGraph]:
    """One TileGraph per usable module of a TuningData, keyed by file stem, in file order.

    Args:
        path: the source file (named in errors and warnings).
        msg: the parsed TuningData.
        layout_pad: padding of the node-layout columns 134-139 (the dataset uses 0).

    Raises:
        DataError: an inconsistent module, or two modules with the same stem.
    """
    out: dict[str, TileGraph] = {}
    skipped = 0
    for md in tqdm(
        msg.modules, desc="tile modules", unit="module", disable=len(msg.modules) < 50, leave=False
    ):
        if not tile_module_usable(md):
            skipped += 1
            continue
        stem = tile_name(path, md)
        if stem in out:
            raise DataError(path, f"two modules share the fingerprint of {stem}")
        runs, normalizer = tile_runs(md.runs)
        if runs and normalizer is None:
            warnings.warn(
                f"{path}: module {stem}: no kept run is marked default, so no normalizer: zero configs written",
                PbWarning,
                stacklevel=2,
            )
            runs = []
        elif not runs:
            warnings.warn(
                f"{path}: module {stem}: no valid runs: writing zero configs", PbWarning, stacklevel=2
            )
        out[stem] = tile_arrays(path, md, runs, normalizer or 1, layout_pad)
    if skipped:
        warnings.warn(
            f"{path}: skipped {skipped} of {len(msg.modules)} modules (fewer than 2 runs or a run without a tile config, as the dataset does)",
            PbWarning,
            stacklevel=2,
        )
    return out
