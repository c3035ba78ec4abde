"""The official TpuGraphs baseline network, reimplemented: early-join GraphSAGE (its family, with the
pairwise hinge loss and the official recipe: `gnn/families/baseline.py`).

Facts taken from the dataset paper and `google-research-datasets/tpu_graphs` (tpu_graphs/baselines),
code written here: every node gets [opcode embedding (64), config features, node features], with the
config features joined *before* message passing ("early join": tile configs broadcast to every
node, layout configs at their configurable nodes, zeros elsewhere), copied for each config. Each of
3 layers concatenates the sum over neighbours in both edge directions with the node's own state,
applies Dense(64) + leaky ReLU and L2-normalises; a sum pool and an MLP [64, 64, 1] give the
score. Trained with TF-Ranking's pairwise hinge (margin 1), Adam lr 1e-3, each gradient tensor
clipped to norm 0.01, 16 configs per graph, 8 graphs per batch.

Differences, on purpose: inputs come from tpurank's prepared cache (pruned graphs, log-scaled node
features; tile config values log-scaled the same way), so the comparison with the tpurank GNN is
about the model, not the data; early stopping uses the same validation metric as every tpurank model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch_geometric.nn import SAGEConv, global_add_pool

from tpurank.gnn.nets.batch import Batch
from tpurank.gnn.nets.layers import CONFIG_POSITIONS, TILE_CONFIG_DIM, signed_log
from tpurank.gnn.nets.ranker_net import RankerNet

OFFICIAL_MLP_LAYERS = 2  # hidden layers of the official scoring MLP (Dense(h), act, Dense(h), act, Dense(1))


@dataclass(frozen=True)
class EarlyJoinArgs:
    """`EarlyJoinSAGE`'s constructor arguments, saved in each checkpoint (`gnn/families/baseline.py`
    builds them from the `baseline` config section, where the official values are the defaults).

    Args:
        kind: "layout" or "tile".
        node_feat_dim: width of the prepared node features.
        hidden: layer width (official: 64).
        layers: GraphSAGE layers (official: 3).
        opcode_dim: opcode embedding width (official: 64); `op_dim` in checkpoints written before
            it took the GNN's name (`RENAMED`).
    """

    kind: str
    node_feat_dim: int
    hidden: int
    layers: int
    opcode_dim: int


class EarlyJoinSAGE(RankerNet):
    """The official early-join GraphSAGE: returns (B, C) costs for a `Batch`.

    Args:
        args: its constructor arguments (`EarlyJoinArgs`).
    """

    Args = EarlyJoinArgs
    RENAMED = {"op_dim": "opcode_dim"}

    def __init__(self, args: EarlyJoinArgs) -> None:
        super().__init__(args, args.opcode_dim)
        hidden = args.hidden
        width = (
            args.opcode_dim
            + (CONFIG_POSITIONS if args.kind == "layout" else TILE_CONFIG_DIM)
            + args.node_feat_dim
        )
        # SAGEConv(sum) = lin_l(sum of neighbours) + lin_r(self) = Dense(concat[neighbours, self])
        self.convs = nn.ModuleList(
            SAGEConv(width if i == 0 else hidden, hidden, aggr="sum") for i in range(args.layers)
        )
        post: list[nn.Module] = []
        for _ in range(OFFICIAL_MLP_LAYERS):  # as Keras _mlp builds it
            post += [nn.Linear(hidden, hidden), nn.LeakyReLU(0.2)]
        post.append(nn.Linear(hidden, 1))
        self.post = nn.Sequential(*post)

    def _config_features(self, batch: Batch, n: int) -> torch.Tensor:
        """(C, N, 18 or 24) config features joined at the nodes."""
        if self.kind == "tile":
            per_graph = signed_log(batch.configs).transpose(0, 1)  # (C, B, 24)
            return per_graph[:, batch.node_graph]
        c = batch.configs.shape[0]
        feats = batch.node_feat.new_zeros(c, n, CONFIG_POSITIONS)
        return feats.index_copy(1, batch.config_nodes, batch.configs.float())

    def forward(self, batch: Batch) -> torch.Tensor:
        n = batch.node_feat.shape[0]
        cfg = self._config_features(batch, n)
        c = cfg.shape[0]
        node = torch.cat([self.opcode(batch.opcode), batch.node_feat], dim=-1)  # (N, op + F)
        x = torch.cat(
            [cfg, node.unsqueeze(0).expand(c, -1, -1)], dim=-1
        )  # (C, N, width): one copy per config
        both = torch.cat([batch.edge_index, batch.edge_index.flip(0)], dim=1)  # A + A^T
        for conv in self.convs:
            x = nn.functional.normalize(nn.functional.leaky_relu(conv(x, both), 0.2), dim=-1)
        pooled = global_add_pool(x, batch.node_graph, size=batch.num_graphs)  # (C, B, H)
        return self.post(pooled.transpose(0, 1)).squeeze(-1)
