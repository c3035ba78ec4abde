"""An HloModuleProto -> the dataset's graph arrays: node order, opcodes, features, edges, splits.

Rules of the tpu_graphs encoder (`process_data/xla/hlo_encoder.cc`): nodes are the instructions of
every computation, computations and instructions in proto order. Each instruction gets an edge to
each distinct operand and one to the root of each computation it calls; edges are rows
[user, operand] sorted ascending. node_splits is 0, the running node count after each computation
whose name contains "cluster", "while" or "cond", then the node count.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tpurank.pb.hlo_features import DEFAULT_LAYOUT_PAD, instruction_features, to_float32
from tpurank.pb.opcodes import opcode_id

SPLIT_MARKERS = ("cluster", "while", "cond")  # computation names that end a node_splits segment


class ModuleError(ValueError):
    """The module's structure is inconsistent (an unknown operand, a duplicate id)."""


@dataclass
class ModuleGraph:
    """The config-independent arrays of one HLO module, in the npz's dtypes."""

    node_feat: np.ndarray  # float32 (n, 140)
    node_opcode: np.ndarray  # uint8 (n,)
    edge_index: np.ndarray  # int64 (m, 2), rows [user, operand]
    node_splits: np.ndarray  # int64 (1, k)


def encode_module(module: Any, layout_pad: int = DEFAULT_LAYOUT_PAD) -> ModuleGraph:
    """Encode one module exactly as the dataset does.

    Args:
        module: an HloModuleProto.
        layout_pad: value for the node-layout columns beyond a layout's rank (dataset: 0).

    Raises:
        ModuleError: an operand or called computation that is not in the module, or a repeated id.
    """
    index: dict[int, int] = {}
    for comp in module.computations:
        for inst in comp.instructions:
            if inst.id in index:
                raise ModuleError(f"instruction id {inst.id} appears twice")
            index[inst.id] = len(index)
    roots = {comp.id: comp.root_id for comp in module.computations}

    opcodes: list[int] = []
    rows: list[list[int]] = []
    edges: set[tuple[int, int]] = set()
    splits = [0]
    for comp in module.computations:
        for inst in comp.instructions:
            opcodes.append(opcode_id(inst.opcode))
            rows.append(instruction_features(inst, comp.root_id, layout_pad))
            user = index[inst.id]
            targets = list(inst.operand_ids)
            for called in inst.called_computation_ids:
                if called not in roots:
                    raise ModuleError(f"instruction {inst.name!r} calls unknown computation {called}")
                targets.append(roots[called])
            for t in targets:
                if t not in index:
                    raise ModuleError(f"instruction {inst.name!r} refers to unknown instruction {t}")
                edges.add((user, index[t]))
        if any(marker in comp.name for marker in SPLIT_MARKERS):
            splits.append(len(opcodes))
    if splits[-1] < len(opcodes):
        splits.append(len(opcodes))

    edge_index = np.array(sorted(edges), dtype=np.int64).reshape(-1, 2)
    return ModuleGraph(
        node_feat=to_float32(rows),
        node_opcode=np.array(opcodes, dtype=np.uint8),
        edge_index=edge_index,
        node_splits=np.array([splits], dtype=np.int64),
    )
