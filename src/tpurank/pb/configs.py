"""Which measured runs the dataset keeps, and their config features, runtimes and normalizers.

Rules of the tpu_graphs iterators (`process_data/xla/tuning_data_iterator.cc`):
- layout (ModuleTuningData): keep runs with a module config, no error and a profile; each run gives
  (configurable nodes, 18) values: output, input, kernel layout, 6 dims each, padded with -1.
- tile (TuningData): a module is used only with more than one run, all with a tile-size config;
  keep runs with no error and compute time > 1 ns; the normalizer of every run is the runtime of
  the first kept run marked default; config features are kernel, output, input bounds, each
  6 values + sum + product (product 0 when empty).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tpurank.data.npz import LAYOUT_CONFIG_DIM, TILE_CONFIG_DIM
from tpurank.pb.hlo_features import sequence_features

LAYOUT_MAX_TENSORS = 3  # output, input, kernel
LAYOUT_MAX_DIMS = 6  # minor-to-major dims kept per tensor
LAYOUT_PAD = -1  # unused tensor slots and dims (and "compiler default" when a whole tensor is -1)
MIN_TILE_RUNTIME_NS = 1  # tile runs at or below this are measurement failures
MIN_TILE_MODULE_RUNS = 2  # the dataset skips tile modules with fewer runs


class ConfigError(ValueError):
    """A run's config does not fit the format (too many tensors, wrong node count)."""


def layout_runs(runs: Sequence[Any]) -> tuple[list[Any], int]:
    """The layout runs the dataset keeps (a module config, no error, a profile), and how many of
    those were left out for a zero time: a run measured at 0 ns is a failed measurement, and a
    train file of zeros would read as a test file.

    Args:
        runs: the ConfigProfile messages of a ModuleTuningData, in file order.
    """
    valid = [r for r in runs if r.HasField("module_config") and not r.error and r.HasField("profile")]
    kept = [r for r in valid if r.profile.compute_time_ns > 0]
    return kept, len(valid) - len(kept)


def _layout_rows(nodes: Any) -> np.ndarray:
    pad = [LAYOUT_PAD] * LAYOUT_CONFIG_DIM
    rows = []
    for i, node in enumerate(nodes):  # plain lists: this runs for every node of every distinct run
        if len(node.tensors) > LAYOUT_MAX_TENSORS:
            raise ConfigError(f"configurable node {i} has {len(node.tensors)} tensors (at most 3)")
        row: list[int] = []
        for tensor in node.tensors:
            dims = tensor.dims[:LAYOUT_MAX_DIMS]
            row += dims
            row += pad[: LAYOUT_MAX_DIMS - len(dims)]
        rows.append(row + pad[len(row) :])
    return np.array(rows, dtype=np.int64).reshape(len(rows), LAYOUT_CONFIG_DIM)


def layout_config_features(run: Any, num_nodes: int) -> np.ndarray:
    """The (num_nodes, 18) layout values of one run, -1 where a tensor or dimension is absent.

    Args:
        run: a kept ConfigProfile with a module_config.layout_config.
        num_nodes: the module's number of configurable nodes (len(config_index_to_node)).

    Raises:
        ConfigError: a node count other than num_nodes, or a node with more than 3 tensors.
    """
    layout = run.module_config.layout_config
    if len(layout.nodes) != num_nodes:
        raise ConfigError(
            f"a run configures {len(layout.nodes)} nodes, config_index_to_node lists {num_nodes}"
        )
    return _layout_rows(layout.nodes)


def tile_module_usable(module_data: Any) -> bool:
    """Whether the dataset uses a TuningData module at all: an HLO module, > 1 run, all tiled."""
    runs = module_data.runs
    return (
        module_data.HasField("module")
        and len(runs) >= MIN_TILE_MODULE_RUNS
        and all(r.op_config.HasField("tile_size_config") for r in runs)
    )


def tile_runs(runs: Sequence[Any]) -> tuple[list[Any], int | None]:
    """The kept tile runs and their normalizer: the runtime of the first kept default run.

    The normalizer is None when no kept run is marked default (the official encoder then fails).

    Args:
        runs: the ConfigProfile messages of one module, in file order.
    """
    kept = [r for r in runs if not r.error and r.profile.compute_time_ns > MIN_TILE_RUNTIME_NS]
    default = next((r for r in kept if r.is_default), None)
    return kept, (default.profile.compute_time_ns if default is not None else None)


def tile_config_features(tile: Any) -> list[int]:
    """The 24 config values of a TileSizeConfig: kernel, output, input bounds, each 6 + sum + product.

    Args:
        tile: a tpu_graphs.TileSizeConfig.
    """
    out: list[int] = []
    for bounds in (tile.kernel_bounds, tile.output_bounds, tile.input_bounds):
        out += sequence_features(list(bounds), 6, zero_product_on_empty=True)
    assert len(out) == TILE_CONFIG_DIM
    return out
