"""The tpurank GNN network (`GnnRanker`; its family: `gnn/families/gnn.py`).

Layout: node features + an opcode embedding give config-independent node states, computed once per
graph; each sampled config's 18 values are embedded per position and added at the configurable
nodes, giving node-major (N, C, H) states that residual GraphSAGE layers update in both edge directions
over the pruned graph (one sparse product per direction: `adjacency.py`) (optionally with attention across the configs at every configurable node after each
layer, `gnn.layer_attention`). Mean pools over all nodes and over the configurable nodes make one embedding per
config; optional attention across the configs of a graph; an MLP gives one cost per config, to which
a per-node cost summed over the graph is added (runtime is a sum over the program's ops).
Tile: the same node encoder and layers run once per graph (configs do not touch nodes); the 24 tile
values are embedded and fused with the pooled graph embedding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint
from torch_geometric.nn import global_max_pool, global_mean_pool
from torch_geometric.utils import scatter

from tpurank.gnn.nets.adjacency import Adjacency
from tpurank.gnn.nets.batch import Batch
from tpurank.gnn.nets.layers import (
    TILE_CONFIG_DIM,
    BiSAGE,
    ConfigEmbedding,
    CrossConfigAttention,
    mlp,
    signed_log,
)
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.nets.tile_inputs import TILE_INPUTS


@dataclass(frozen=True)
class GnnRankerArgs:
    """`GnnRanker`'s constructor arguments, saved in each checkpoint (`gnn/families/gnn.py` builds
    them from the `gnn` config section, where every default and its reason is).

    Args:
        kind: "layout" or "tile".
        node_feat_dim: width of the prepared node features.
        hidden: width of node and graph embeddings.
        layers: message-passing layers.
        aggr: neighbour aggregation of the layers, "sum" or "mean".
        opcode_dim: opcode embedding width.
        config_dim: embedding width per layout config position.
        dropout: dropout inside layers and the head.
        cross_config_attention: attend across the configs of one graph before scoring.
        heads: attention heads.
        checkpoint_layers: recompute each message-passing layer's activations (and its attention
            across configs) in the backward pass instead of keeping them (layout: (configs, nodes,
            hidden) per layer; heads x configurable nodes x configs^2 attention scores), at ~1/3 more compute.
        checkpoint_min_states: with `checkpoint_layers`, recompute only a pass whose (configs, nodes,
            hidden) states hold at least this many values: a small pass's activations cost little
            memory, so it skips the recomputation's time.
        standardize: centre and scale node features with train statistics (buffers set by
            `standardize.fit_train_stats`, saved with the weights).
        layer_attention: layout: attention across the configs at every configurable node after
            every message-passing layer (each config's node state sees its competitors').
        tile_features: layout: add the tile-aware inputs of each config at each configurable node
            (`tile_inputs.py`; batches then come from `make_batch(..., tile=True)`).
    """

    kind: str
    node_feat_dim: int
    hidden: int
    layers: int
    aggr: str
    opcode_dim: int
    config_dim: int
    dropout: float
    cross_config_attention: bool
    heads: int
    checkpoint_layers: bool
    checkpoint_min_states: int
    standardize: bool
    layer_attention: bool
    tile_features: bool


class GnnRanker(RankerNet):
    """Scores every config slot of a `Batch`: returns (B, C) costs, lower = predicted faster.

    Args:
        args: its constructor arguments (`GnnRankerArgs`).
    """

    Args = GnnRankerArgs
    ADDED_LATER: ClassVar[dict[str, Any]] = {
        "checkpoint_layers": False,
        "checkpoint_min_states": 0,
        "standardize": False,
        "layer_attention": False,
    }

    def __init__(self, args: GnnRankerArgs) -> None:
        super().__init__(args, args.opcode_dim)
        hidden, kind = args.hidden, args.kind
        self.checkpoint_layers = args.checkpoint_layers
        self.checkpoint_min_states = args.checkpoint_min_states
        self.node_in = mlp([args.node_feat_dim + args.opcode_dim, hidden, hidden])
        self.layers = nn.ModuleList(BiSAGE(hidden, args.dropout, args.aggr) for _ in range(args.layers))
        if kind == "layout":
            self.config_in = ConfigEmbedding(args.config_dim, hidden)
        else:
            self.config_in = mlp([TILE_CONFIG_DIM, hidden, hidden])
        # the configured layout against the TPU's (8, 128) tile, added to each config's embedding
        self.tile_in = nn.Linear(TILE_INPUTS, hidden) if args.tile_features and kind == "layout" else None
        self.fuse = mlp([3 * hidden if kind == "tile" else 2 * hidden, hidden, hidden])
        self.attention = CrossConfigAttention(hidden, args.heads) if args.cross_config_attention else None
        self.head = mlp([hidden, hidden, 1], args.dropout)
        # layout runtime is a sum of per-node costs: score each node, add them up (next to the pooled head)
        self.node_cost = mlp([hidden, hidden, 1]) if kind == "layout" else None
        # None buffers are left out of the state dict: checkpoints without standardisation load as before
        dim = args.node_feat_dim
        self.register_buffer("feat_mean", torch.zeros(dim) if args.standardize else None)
        self.register_buffer("feat_std", torch.ones(dim) if args.standardize else None)
        self.layer_attention = (
            nn.ModuleList(CrossConfigAttention(hidden, args.heads) for _ in range(args.layers))
            if args.layer_attention and kind == "layout"
            else None
        )

    def encode_nodes(self, batch: Batch) -> torch.Tensor:
        """(N, H) config-independent node states (standardised features + opcode embedding)."""
        feat = batch.node_feat
        if self.feat_mean is not None:
            feat = (feat - self.feat_mean) / self.feat_std
        return self.node_in(torch.cat([feat, self.opcode(batch.opcode)], dim=-1))

    def layout_states(self, batch: Batch, h: torch.Tensor) -> torch.Tensor:
        """(C, N, H) node states per config slot after every message-passing layer (layout): a view
        of `node_states`. Graph Segment Training (`gnn/gst/sums.py`) runs the same stack on each segment."""
        return self.node_states(batch, h).transpose(0, 1)

    def node_states(self, batch: Batch, h: torch.Tensor) -> torch.Tensor:
        """(N, C, H) node-major states per config slot after every message-passing layer (layout)."""
        c = batch.configs.shape[0]
        e = self.config_in(batch.configs.transpose(0, 1))  # (K, C, H)
        if self.tile_in is not None:
            if batch.config_tile is None:
                raise ValueError("a model with tile_features needs make_batch(..., tile=True)")
            e = e + self.tile_in(batch.config_tile.transpose(0, 1).to(e.dtype))
        e = e.to(h.dtype)
        x = h.unsqueeze(1).expand(-1, c, -1).index_add(0, batch.config_nodes, e)  # (N, C, H), no graph copy
        adj = self.adjacency(batch)
        recompute = self.recomputes(x)
        for i in range(len(self.layers)):
            if recompute:  # same numbers, a fraction of the memory (see the constructor)
                x = checkpoint(self._layer, i, x, batch, adj, use_reentrant=False)
            else:
                x = self._layer(i, x, batch, adj)
        return x

    def adjacency(self, batch: Batch) -> Adjacency:
        """The batch's normalised adjacency, built once for all layers."""
        return Adjacency.build(batch.edge_index, len(batch.opcode), self.layers[0].aggr)

    def recomputes(self, x: torch.Tensor) -> bool:
        """Whether a training pass over the (C, N, H) states `x` recomputes its layers in backward."""
        big = x.numel() >= self.checkpoint_min_states
        return self.checkpoint_layers and big and self.training and torch.is_grad_enabled()

    def _layer(self, i: int, x: torch.Tensor, batch: Batch, adj: Adjacency) -> torch.Tensor:
        """Message-passing layer `i` and its attention across configs (checkpointed as one)."""
        x = self.layers[i](x, adj)
        if self.layer_attention is not None:
            x = self._attend_at_config_nodes(self.layer_attention[i], x, batch)
        return x

    def forward(self, batch: Batch) -> torch.Tensor:
        h = self.encode_nodes(batch)  # (N, H)
        extra = None
        if self.kind == "layout":
            g, extra = self._layout(batch, h)  # (B, C, H), (B, C)
        else:
            g = self._tile(batch, h)
        if self.attention is not None:
            g = self.attention(g, batch.mask)
        cost = self.head(g).squeeze(-1)
        return cost if extra is None else cost + extra

    def _layout(self, batch: Batch, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = self.node_states(batch, h)  # (N, C, H)
        b = batch.num_graphs
        pooled = scatter(x, batch.node_graph, dim=0, dim_size=b, reduce="mean")  # (B, C, H)
        at_configs = scatter(x[batch.config_nodes], batch.config_graph, dim=0, dim_size=b, reduce="mean")
        node_costs = scatter(
            self.node_cost(x), batch.node_graph, dim=0, dim_size=b, reduce="sum"
        )  # (B, C, 1)
        g = self.fuse(torch.cat([pooled, at_configs], dim=-1))
        return g, node_costs.squeeze(-1)

    @staticmethod
    def _attend_at_config_nodes(attn: CrossConfigAttention, x: torch.Tensor, batch: Batch) -> torch.Tensor:
        """x (N, C, H) with each configurable node's C states updated by attention across configs."""
        at = x[batch.config_nodes]  # (K, C, H): one sequence of configs per node
        mask = batch.mask[batch.config_graph]  # (K, C): the real configs of that node's graph
        return x.index_add(0, batch.config_nodes, attn.update(at, mask).to(x.dtype))

    def _tile(self, batch: Batch, h: torch.Tensor) -> torch.Tensor:
        adj = self.adjacency(batch)
        for layer in self.layers:
            h = layer(h, adj)
        b = batch.num_graphs
        graph = torch.cat(
            [global_mean_pool(h, batch.node_graph, size=b), global_max_pool(h, batch.node_graph, size=b)], -1
        )  # (B, 2H)
        cfg = self.config_in(signed_log(batch.configs))  # (B, C, H)
        graph = graph.unsqueeze(1).expand(-1, cfg.shape[1], -1)
        return self.fuse(torch.cat([graph, cfg.to(graph.dtype)], dim=-1))
