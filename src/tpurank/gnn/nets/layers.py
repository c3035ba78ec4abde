"""Building blocks shared by the GNN rankers.

Layout activations carry a config axis: node states are node-major, (N, C, H), one row of C x H
values per node of the small pruned graph, so all C configs share one adjacency and a layer's
neighbour sums are one sparse product over the rows (`adjacency.py`); the attention across the
configs at the configurable nodes reads its (K, C, H) sequences as rows of the same tensor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.nn import SAGEConv

from tpurank.core.errors import TpurankError
from tpurank.gnn.nets.adjacency import Adjacency
from tpurank.prepare.cache import SUMMARY_OPCODE

OPCODE_VOCAB = SUMMARY_OPCODE + 1  # HLO opcodes 0..120 plus the summary node of pruned runs
CONFIG_POSITIONS = 18  # output, input, kernel layout: 6 minor-to-major dims each
CONFIG_VALUES = 8  # layout values -1..6 shifted to 0..7 (the data holds -1..5)
TILE_CONFIG_DIM = 24  # kernel/output/input tile bounds: 3 x (6 dims, sum, product)


def signed_log(x: torch.Tensor) -> torch.Tensor:
    """sign(x) * log1p(|x|): tile sizes span 1..1e9, so the model sees their magnitude."""
    return torch.sign(x) * torch.log1p(torch.abs(x))


class ConfigEmbedding(nn.Module):
    """Embeds an 18-value layout config of one node: each (position, value) is its own category.

    Args:
        dim: embedding width per position.
        hidden: output width.
    """

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.table = nn.Embedding(CONFIG_POSITIONS * CONFIG_VALUES, dim)
        self.proj = nn.Sequential(
            nn.Linear(CONFIG_POSITIONS * dim, hidden), nn.GELU(), nn.Linear(hidden, hidden)
        )
        self.register_buffer("offset", torch.arange(CONFIG_POSITIONS) * CONFIG_VALUES, persistent=False)

    def forward(self, configs: torch.Tensor) -> torch.Tensor:
        """(..., 18) int config values -> (..., hidden)."""
        idx = (configs.long() + 1).clamp(0, CONFIG_VALUES - 1) + self.offset
        e = self.table(idx)  # (..., 18, dim)
        return self.proj(e.flatten(-2))


AGGREGATIONS = ("sum", "mean")


class BiSAGE(nn.Module):
    """One residual GraphSAGE layer with messages in both edge directions (operand->user, user->operand).

    Args:
        hidden: node state width.
        dropout: dropout on the layer's update.
        aggr: how neighbour messages combine, "sum" or "mean".
    """

    def __init__(self, hidden: int, dropout: float, aggr: str = "sum") -> None:
        super().__init__()
        if aggr not in AGGREGATIONS:
            raise TpurankError(f"config: gnn.aggr must be one of {', '.join(AGGREGATIONS)}, got {aggr!r}")
        self.aggr = aggr
        # SAGEConv's parameters (lin_l: the neighbours', lin_r: the node's own), kept under their
        # names so checkpoints load; the aggregation is `adjacency.py`'s, the same sums
        self.from_operands = SAGEConv(hidden, hidden, aggr=aggr)  # also holds the root (self) weight
        self.from_users = SAGEConv(hidden, hidden, aggr=aggr, root_weight=False)
        self.norm = nn.LayerNorm(hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor, adj: Adjacency | torch.Tensor) -> torch.Tensor:
        """x: (N, ..., H) node-major states; adj: the batch's `Adjacency` (built once for all layers)
        or its (2, M) edge_index, rows [operand, user] (data flow direction)."""
        if isinstance(adj, torch.Tensor):
            adj = Adjacency.build(adj, x.shape[0], self.aggr)
        ops, users = self.from_operands, self.from_users
        y = F.linear(adj.from_operands(x), ops.lin_l.weight, ops.lin_l.bias)
        y = (
            y
            + F.linear(x, ops.lin_r.weight)
            + F.linear(adj.from_users(x), users.lin_l.weight, users.lin_l.bias)
        )
        return x + self.drop(F.gelu(self.norm(y)))


class CrossConfigAttention(nn.Module):
    """Self-attention across the configs of one graph: a config is scored knowing its competitors.

    Args:
        hidden: embedding width.
        heads: attention heads (must divide hidden).
    """

    def __init__(self, hidden: int, heads: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.attn = nn.MultiheadAttention(hidden, heads, batch_first=True)

    def forward(self, g: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """g: (B, C, H) per-config graph embeddings; mask: (B, C) True for real configs."""
        return g + self.update(g, mask)

    def update(self, g: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """What `forward` adds to `g`: the attention's output over the normalised embeddings.

        On the CPU it is computed here with `scaled_dot_product_attention` from the same weights:
        `nn.MultiheadAttention` without gradients takes torch's fused "fast path", which on the CPU
        materialises every score (heads x C^2 per sequence) and runs at half the speed of the
        scaled-dot-product kernel its training path already uses (docs/scale.md)."""
        h = self.norm(g)
        if h.device.type != "cpu":
            return self.attn(h, h, h, key_padding_mask=self.padding(mask), need_weights=False)[0]
        a = self.attn
        *lead, c, width = h.shape
        qkv = F.linear(h, a.in_proj_weight, a.in_proj_bias).view(
            *lead, c, 3, a.num_heads, width // a.num_heads
        )
        q, k, v = (t.transpose(-3, -2) for t in qkv.unbind(-3))  # (..., heads, C, d)
        pad = self.padding(mask)
        keep = None if pad is None else ~pad[..., None, None, :]  # (..., 1, 1, C): the keys to attend to
        drop = a.dropout if self.training else 0.0
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=keep, dropout_p=drop)
        return a.out_proj(out.transpose(-3, -2).reshape(*lead, c, width))

    @staticmethod
    def padding(mask: torch.Tensor) -> torch.Tensor | None:
        """The keys to ignore (padding slots), or None on the CPU where no slot is padding (a scoring
        pass: one graph's configs): the same attention, which torch's CPU kernel computes faster
        without a mask (docs/scale.md). Elsewhere the check would make the host wait for the device."""
        if mask.device.type == "cpu" and bool(mask.all()):
            return None
        return ~mask


def mlp(sizes: list[int], dropout: float = 0.0) -> nn.Sequential:
    """Linear layers with GELU between them (none after the last).

    Args:
        sizes: widths, input first.
        dropout: dropout after each hidden activation.
    """
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.GELU())
            if dropout:
                layers.append(nn.Dropout(dropout))
    return nn.Sequential(*layers)
