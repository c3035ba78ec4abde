"""The message passing on node-major states (`nets/adjacency.py`) computes what torch_geometric's
SAGEConv computed on (C, N, H) states, values and gradients, on random graphs with padding slots,
isolated nodes, one-node graphs and duplicate edges, in both edge directions, on the CPU's sparse
product and on the index path other devices take; and a network's weights of the former layout
score the same through the whole model (the same parameter names and shapes: a checkpoint written
before loads and scores as it did)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import prepared_graph
from torch_geometric.nn import global_add_pool, global_mean_pool

from tpurank.gnn.data import from_prepared, make_batch
from tpurank.gnn.nets.adjacency import Adjacency
from tpurank.gnn.nets.batch import Batch
from tpurank.gnn.nets.gnn_ranker import GnnRanker, GnnRankerArgs
from tpurank.gnn.nets.layers import BiSAGE

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def random_graph(seed: int) -> tuple[torch.Tensor, int]:
    """A disjoint union of random graphs: one of a single node, one with isolated nodes, duplicate
    edges and self loops; (2, M) [operand, user] edges and the node count."""
    rng = np.random.default_rng(seed)
    sizes = [1, int(rng.integers(2, 9)), int(rng.integers(5, 30))]
    edges, offset = [], 0
    for n in sizes:
        m = int(rng.integers(0, 3 * n)) if n > 1 else 0
        e = rng.integers(0, max(1, n // 2 + 1), size=(2, m)) if n > 1 else np.zeros((2, 0), dtype=np.int64)
        if m:
            e = np.concatenate([e, e[:, :1]], axis=1)  # a duplicate edge
        edges.append(e + offset)
        offset += n
    return torch.from_numpy(np.concatenate(edges, axis=1)).long(), offset


def former_bisage(layer: BiSAGE, x: torch.Tensor, edge_index: torch.Tensor) -> torch.Tensor:
    """The layer as it ran before, on (C, N, H) states with torch_geometric's SAGEConv."""
    y = layer.from_operands(x, edge_index) + layer.from_users(x, edge_index.flip(0))
    return x + layer.drop(torch.nn.functional.gelu(layer.norm(y)))


def index_path(adj: Adjacency) -> Adjacency:
    """The same adjacency without its CSR matrices: the index path a CUDA device takes."""
    return Adjacency(
        dataclasses.replace(adj.from_operands, csr=None, csr_t=None),
        dataclasses.replace(adj.from_users, csr=None, csr_t=None),
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("aggr", ["mean", "sum"])
@pytest.mark.parametrize("path", ["csr", "index"])
def test_a_layer_equals_sageconv_in_values_and_gradients(seed: int, aggr: str, path: str) -> None:
    torch.manual_seed(seed)
    edge_index, n = random_graph(seed)
    layer = BiSAGE(8, dropout=0.0, aggr=aggr)
    adj = Adjacency.build(edge_index, n, aggr)
    if path == "index":
        adj = index_path(adj)
    assert (adj.from_operands.csr is not None) is (path == "csr")
    states = torch.randn(5, n, 8)  # (C, N, H)
    old_x = states.clone().requires_grad_(True)
    new_x = states.transpose(0, 1).contiguous().requires_grad_(True)  # (N, C, H)
    old = former_bisage(layer, old_x, edge_index)
    old_grads = torch.autograd.grad((old * old).sum(), [old_x, *layer.parameters()])
    new = layer(new_x, adj)
    new_grads = torch.autograd.grad((new * new).sum(), [new_x, *layer.parameters()])
    torch.testing.assert_close(new.transpose(0, 1), old, atol=2e-6, rtol=1e-5)
    torch.testing.assert_close(new_grads[0].transpose(0, 1), old_grads[0], atol=1e-5, rtol=1e-5)
    for a, b in zip(new_grads[1:], old_grads[1:], strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-5)


def test_an_isolated_node_gets_no_neighbour_sum_and_a_one_node_graph_works() -> None:
    adj = Adjacency.build(torch.zeros(2, 0, dtype=torch.long), 1, "mean")
    x = torch.randn(1, 3, 4)
    for direction in (adj.from_operands, adj.from_users, index_path(adj).from_operands):
        assert torch.equal(direction(x), torch.zeros_like(x))


def test_the_two_directions_are_the_operands_and_the_users() -> None:
    """Edge 0 -> 1 (0 is the operand of 1): node 1 receives 0's state from its operands, node 0
    receives 1's from its users; with mean, node 2 (two operands) gets their mean."""
    edge_index = torch.tensor([[0, 0, 1], [1, 2, 2]])
    x = torch.tensor([[1.0], [10.0], [100.0]])
    adj = Adjacency.build(edge_index, 3, "mean")
    assert adj.from_operands(x).flatten().tolist() == [0.0, 1.0, 5.5]
    assert adj.from_users(x).flatten().tolist() == [55.0, 100.0, 0.0]


def test_off_the_cpu_the_index_path_is_taken() -> None:
    """On another device (a meta tensor stands in for a GPU) no CSR matrix is built."""
    edge_index = torch.tensor([[0, 1], [1, 2]], device="meta")
    adj = Adjacency.build(edge_index, 3, "mean")
    assert adj.from_operands.csr is None and adj.from_users.csr is None
    out = adj.from_operands(torch.empty(3, 2, 4, device="meta"))
    assert out.shape == (3, 2, 4) and out.device.type == "meta"


def args(**kw: object) -> GnnRankerArgs:
    base = {
        "kind": "layout",
        "node_feat_dim": 0,
        "hidden": 16,
        "layers": 2,
        "aggr": "mean",
        "opcode_dim": 4,
        "config_dim": 4,
        "dropout": 0.0,
        "cross_config_attention": True,
        "heads": 2,
        "checkpoint_layers": False,
        "checkpoint_min_states": 0,
        "standardize": False,
        "layer_attention": True,
        "tile_features": False,
    }
    return GnnRankerArgs(**{**base, **kw})


def former_layout(m: GnnRanker, batch: Batch) -> torch.Tensor:
    """The layout forward as it ran before, on (C, N, H) states with torch_geometric's layers,
    pooling and torch's MultiheadAttention module: what a checkpoint of then scored."""
    h = m.encode_nodes(batch)
    c, b = batch.configs.shape[0], batch.num_graphs
    e = m.config_in(batch.configs).to(h.dtype)
    x = h.unsqueeze(0).expand(c, -1, -1).index_add(1, batch.config_nodes, e)
    for i, layer in enumerate(m.layers):
        x = former_bisage(layer, x, batch.edge_index)
        if m.layer_attention is not None:
            attn = m.layer_attention[i]
            at = x[:, batch.config_nodes].transpose(0, 1)
            mask = batch.mask[batch.config_graph]
            hn = attn.norm(at)
            delta = attn.attn(hn, hn, hn, key_padding_mask=~mask, need_weights=False)[0].transpose(0, 1)
            x = x.index_add(1, batch.config_nodes, delta)
    pooled = global_mean_pool(x, batch.node_graph, size=b)
    at_configs = global_mean_pool(x[:, batch.config_nodes], batch.config_graph, size=b)
    node_costs = global_add_pool(m.node_cost(x), batch.node_graph, size=b).squeeze(-1).transpose(0, 1)
    g = m.fuse(torch.cat([pooled, at_configs], dim=-1).transpose(0, 1))
    if m.attention is not None:
        hn = m.attention.norm(g)
        g = g + m.attention.attn(hn, hn, hn, key_padding_mask=~batch.mask, need_weights=False)[0]
    return m.head(g).squeeze(-1) + node_costs


@pytest.mark.parametrize("aggr", ["mean", "sum"])
@pytest.mark.parametrize("training", [False, True])
def test_weights_of_the_former_layout_score_the_same(aggr: str, training: bool) -> None:
    """Two graphs with 7 and 4 configs (padding slots in the second), scored by the model and by
    the former forward from one state dict, which loads strictly into a fresh model."""
    graphs = [from_prepared(prepared_graph("layout", seed=s)) for s in (1, 2)]
    torch.manual_seed(0)
    m = GnnRanker(args(node_feat_dim=int(graphs[0].node_feat.shape[1]), aggr=aggr))
    fresh = GnnRanker(m.args)
    fresh.load_state_dict(m.state_dict(), strict=True)  # the parameter names and shapes of before
    fresh.train(training)
    batch = make_batch(graphs, [np.arange(7), np.arange(4)])
    assert not bool(batch.mask.all())
    with torch.set_grad_enabled(training):
        new, old = fresh(batch), former_layout(fresh, batch)
    torch.testing.assert_close(new[batch.mask], old[batch.mask], atol=1e-5, rtol=1e-5)
    if training:
        mine = torch.autograd.grad(new[batch.mask].sum(), list(fresh.parameters()), allow_unused=True)
        ref = torch.autograd.grad(old[batch.mask].sum(), list(fresh.parameters()), allow_unused=True)
        for a, b in zip(mine, ref, strict=True):
            if a is not None and b is not None:
                torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
