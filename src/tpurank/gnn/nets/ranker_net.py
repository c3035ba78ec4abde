"""What every ranker network shares (PyG's `BasicGNN` is the model: one base, the networks differ
only where they differ): typed constructor arguments, saved whole in each checkpoint so a
`model.pt` alone rebuilds its network; the opcode embedding every node starts from; and one cost
per config slot of a `Batch`. Which config section builds which arguments is the family's
(`gnn/families/`): nothing here reads the config.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import torch
from torch import nn

from tpurank.core.collections import KINDS
from tpurank.gnn.nets.batch import Batch
from tpurank.gnn.nets.layers import OPCODE_VOCAB


class RankerNet(nn.Module):
    """Scores every config slot of a `Batch`: `forward` returns (B, C) costs, lower = predicted faster.

    Args:
        args: the network's constructor arguments, an instance of its `Args` dataclass (with at
            least `kind`, `node_feat_dim` and `hidden`).
        opcode_dim: width of the opcode embedding.
    """

    Args: ClassVar[type[Any]]  # the frozen dataclass of the network's constructor arguments
    # arguments added after checkpoints were first written, and what a network was built with
    # before each existed: a checkpoint without one loads as it was trained
    ADDED_LATER: ClassVar[dict[str, Any]] = {}
    # arguments renamed since checkpoints were first written, old name -> new: a checkpoint with an
    # old name loads under the new one (the same argument, the same weights)
    RENAMED: ClassVar[dict[str, str]] = {}

    def __init__(self, args: Any, opcode_dim: int) -> None:
        super().__init__()
        if args.kind not in KINDS:
            raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {args.kind!r}")
        self.args = args
        self.kind: str = args.kind
        self.hidden: int = args.hidden  # the width of node embeddings (GST's table sizes its entries by it)
        self.opcode = nn.Embedding(OPCODE_VOCAB, opcode_dim)

    @classmethod
    def from_saved(cls, saved: dict[str, Any]) -> Self:
        """The network a checkpoint's `model_args` describe.

        Raises:
            TypeError: an argument the network does not have, or one it needs and the file lacks.
        """
        return cls(cls.Args(**{**cls.ADDED_LATER, **cls.with_new_names(saved)}))

    @classmethod
    def with_new_names(cls, saved: dict[str, Any]) -> dict[str, Any]:
        """A checkpoint's `model_args` with each argument `RENAMED` replaced under its new name."""
        return {cls.RENAMED.get(k, k): v for k, v in saved.items()}

    def saved_args(self) -> dict[str, Any]:
        """The constructor arguments as saved in a checkpoint (`from_saved` reads them back)."""
        return dataclasses.asdict(self.args)

    def forward(self, batch: Batch) -> torch.Tensor:
        """(B, C) costs of the batch's config slots."""
        raise NotImplementedError
