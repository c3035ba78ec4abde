"""Graph Segment Training: segments, the one-segment reduction, the historical table, training and scoring."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_cfg, small_gnn

from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.core.paths import Paths
from tpurank.gnn.data import from_prepared, load_split, make_batch
from tpurank.gnn.device import Runtime
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.gst.embedding_table import EmbeddingTable, segment_keys
from tpurank.gnn.gst.segments import cut_edges, segment_bounds, split_graph
from tpurank.gnn.gst.state import GstState
from tpurank.gnn.gst.sums import segment_sums
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.scoring import score_rows
from tpurank.gnn.training.loop import fit
from tpurank.gnn.training.losses import ranking_loss
from tpurank.gnn.training.segment_step import graph_loss

CPU = torch.device("cpu")


pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


@pytest.mark.parametrize(("n", "most"), [(1, 1), (10, 3), (100, 7), (1000, 1000), (999, 250), (37, 0)])
def test_segments_cover_every_node_exactly_once(n: int, most: int) -> None:
    bounds = segment_bounds(n, most)
    sizes = np.diff(bounds)
    assert bounds[0] == 0 and bounds[-1] == n and (sizes > 0).all()
    assert most == 0 or sizes.max() <= most
    assert len(sizes) == (1 if most == 0 else -(-n // most))


def test_split_graph_partitions_nodes_configurable_nodes_and_edges() -> None:
    g = from_prepared(prepared_graph("layout", seed=4, n=50, k=9))
    segs = split_graph(g, 12)
    assert [s.num_nodes for s in segs] == [10] * 5  # ceil(50 / 12) = 5 equal runs
    owner = np.concatenate([np.full(s.num_nodes, i) for i, s in enumerate(segs)])
    assert len(owner) == 50  # every node once, in order
    cols = np.concatenate([s.config_cols for s in segs])
    assert sorted(cols.tolist()) == list(range(9))
    for s in segs:
        np.testing.assert_array_equal(s.config_pos.numpy() + s.start, g.config_nodes.numpy()[s.config_cols])
        if s.edge_index.numel():
            assert s.edge_index.min() >= 0 and s.edge_index.max() < s.num_nodes
    e = g.edge_index.numpy()
    crossing = int((owner[e[0]] != owner[e[1]]).sum())
    assert cut_edges(g, segs) == crossing > 0


MODEL_OPTIONS = [
    {},
    {"cross_config_attention": True},
    {"layer_attention": True},  # the recipe's attention inside message passing
    {"standardize": True},
]


@pytest.mark.parametrize("options", MODEL_OPTIONS, ids=lambda o: ",".join(o) or "plain")
def test_one_segment_per_graph_is_ordinary_training(options: dict) -> None:
    """With one segment, GST's loss and gradients on a batch are the whole-graph model's, with
    every model option (GST runs the model's own node encoder and layer stack per segment)."""
    g = from_prepared(prepared_graph("layout", seed=5, n=40, k=6))
    rows = np.arange(12)
    r = gnn_model.SPEC.recipe(small_cfg(segment_nodes=0, stale_dropout=0.5), "layout")
    torch.manual_seed(0)
    m = small_gnn("layout", FEAT, hidden=16, layers=2, **options)
    if options.get("standardize"):  # statistics that change the features
        m.feat_mean.copy_(torch.linspace(-1, 1, FEAT))
        m.feat_std.copy_(torch.linspace(0.5, 2, FEAT))
    b = make_batch([g], [rows])
    want = ranking_loss(r.loss, m(b), b.runtime, b.mask, r.margin)
    want.backward()
    grads = {k: p.grad.clone() for k, p in m.named_parameters() if p.grad is not None}
    m.zero_grad()
    state = GstState(r, 16)
    got = graph_loss(m, state, g, rows, r, CPU, "fp32", np.random.default_rng(0))
    assert got == pytest.approx(want.item(), rel=1e-5)
    for k, p in m.named_parameters():
        if k in grads:
            assert torch.allclose(p.grad, grads[k], atol=1e-5), k
    # scoring segment by segment with one segment: the whole-graph scores
    m.eval()
    whole = score_rows(m, g, rows, 5, CPU)
    np.testing.assert_allclose(score_rows(m, g, rows, 5, CPU, "fp32", segment_nodes=1000), whole, atol=1e-5)


def test_segment_sums_add_up_to_the_graph_when_no_edge_is_cut() -> None:
    """Two disconnected halves, cut between them: the segment-wise scores are the whole-graph scores."""
    p = prepared_graph("layout", seed=6, n=40, k=6)
    e = p.edge_index
    p.edge_index = e[(e < 20).all(1) | (e >= 20).all(1)]  # [user, operand] within one half each
    g = from_prepared(p)
    m = small_gnn("layout", FEAT, hidden=16, layers=2).eval()
    rows = np.arange(10)
    whole = score_rows(m, g, rows, 10, CPU)
    assert cut_edges(g, split_graph(g, 20)) == 0
    np.testing.assert_allclose(score_rows(m, g, rows, 10, CPU, "fp32", segment_nodes=20), whole, atol=1e-5)


def test_history_table_is_updated_and_used() -> None:
    g = from_prepared(prepared_graph("layout", seed=7, n=60, k=8, u=30))
    r = gnn_model.SPEC.recipe(small_cfg(segment_nodes=15, segments_per_step=1, stale_dropout=0.0), "layout")
    torch.manual_seed(0)
    m = small_gnn("layout", FEAT, hidden=16, layers=2)
    state = GstState(r, 16)
    rows = np.arange(8)
    rng = np.random.default_rng(0)
    first = graph_loss(m, state, g, rows, r, CPU, "fp32", rng)
    # one segment written (8 configs and its mean entry), nothing to read yet
    assert state.table.writes == 9 and state.table.hits == 0
    for _ in range(12):  # the same configs: every segment gets trained and written
        graph_loss(m, state, g, rows, r, CPU, "fp32", rng)
    assert len(state.table) == 4 * (8 + 1) and state.table.hits > 0
    # with every other segment in the table and no dropout, a step sees the whole graph: the loss of
    # unchanged weights equals the segment-wise scoring of the whole graph
    m.zero_grad()
    loss = graph_loss(m, state, g, rows, r, CPU, "fp32", rng, update=False)
    b = make_batch([g], [rows])
    cost = torch.from_numpy(score_rows(m, g, rows, 8, CPU, "fp32", segment_nodes=15)).float()[None]
    want = float(ranking_loss(r.loss, cost, b.runtime, b.mask, r.margin))
    assert loss == pytest.approx(want, rel=1e-5) and loss != pytest.approx(first, rel=1e-2)
    # stale dropout 1 - tiny: every historical entry left out -> only the trained segment counts
    r_drop = gnn_model.SPEC.recipe(small_cfg(segment_nodes=15, stale_dropout=0.999999), "layout")
    alone = graph_loss(m, state, g, rows, r_drop, CPU, "fp32", np.random.default_rng(1), update=False)
    assert alone != pytest.approx(loss, rel=1e-4)


def test_history_keys_follow_the_segments_own_configs() -> None:
    cfg = np.zeros((3, 2, 18), np.int8)
    cfg[1, 0, 0] = 1  # row 1 differs from row 0 at this segment's configurable node
    keys = segment_keys("g", (0, 10), cfg)
    assert keys[0] == keys[2] != keys[1]
    assert segment_keys("g", (10, 20), cfg)[0] != keys[0]  # another segment: another key
    empty = segment_keys("g", (0, 10), np.zeros((4, 0, 18), np.int8))
    assert len(set(empty.tolist())) == 1  # no configurable node: one entry for every config


def test_history_table_memory_is_bounded() -> None:
    t = EmbeddingTable(dim=33, budget_mb=0.01)
    assert t.nbytes <= 0.01 * 2**20 and t.capacity == int(0.01 * 2**20) // (4 * 33 + 160)
    keys = np.arange(3 * t.capacity, dtype=np.int64)
    t.put(keys, torch.arange(len(keys), dtype=torch.float32)[:, None].expand(-1, 33))
    assert len(t) == t.capacity and t.evicted == 2 * t.capacity
    values, found = t.get(keys)
    assert found.sum() == t.capacity and found[-t.capacity :].all()  # the newest kept
    assert values[-1, 0].item() == len(keys) - 1 and values[0].abs().sum() == 0


def test_gst_settings_are_validated() -> None:
    cfg = load_config(overrides=["gnn.segment_nodes=4000", "gnn.finetune_steps=20", "prepare.hops=-1"])
    assert cfg.gnn.segment_nodes == 4000 and cfg.prepare.hops == -1
    for bad in (
        "gnn.segment_nodes=-1",
        "gnn.segments_per_step=0",
        "gnn.stale_dropout=1.0",
        "prepare.hops=-2",
    ):
        with pytest.raises(TpurankError, match="must be"):
            load_config(overrides=[bad])


def test_gst_trains_fine_tunes_and_predicts_on_tiny(tiny_paths: Paths, tmp_path) -> None:
    paths = Paths(data=tiny_paths.data, out=tmp_path)
    collection = "layout:xla:random"
    train = load_split(tiny_paths, collection, "train", progress=False)
    valid = load_split(tiny_paths, collection, "valid", progress=False)
    most = max(len(g.opcode) for g in train) // 3 + 1  # about three segments per big graph
    cfg = small_cfg(
        max_steps=6,
        eval_every=3,
        graphs_per_batch=2,
        configs_per_graph=8,
        segment_nodes=most,
        finetune_steps=3,
    )
    _, summary = fit(
        gnn_model.SPEC, paths, cfg, collection, train, valid, Runtime(device=CPU), progress=False
    )
    assert summary["steps_run"] == 6 and "finetune_loss" in summary["history"][-1]
    assert summary["history_table"]["writes"] > 0 and summary["history_table"]["lookups"] > 0
    preds = predict_collection(gnn_model.SPEC, paths, cfg, collection, "valid", graphs=valid, progress=False)
    assert {g.id for g in valid} == set(preds) and all(np.isfinite(v).all() for v in preds.values())


def test_whole_graph_setting_keeps_every_node_in_order() -> None:
    """prepare.hops=-1 (what GST is for): no node pruned, node order (program order) kept."""
    from tpurank.prepare.prune import prune

    r = np.random.default_rng(0)
    edges = r.integers(0, 500, size=(900, 2))
    edges = edges[edges[:, 0] != edges[:, 1]]
    p = prune(500, edges, np.array([3, 77]), hops=-1)
    np.testing.assert_array_equal(p.node_map, np.arange(500))
    assert len(p.edge_index) == len(edges) and p.num_summary == 0


def test_several_segments_per_step_with_per_node_attention_masks() -> None:
    """A batch of several segments of one graph gives each segment its row of the config mask
    (the per-node attention indexes the mask by segment)."""
    g = from_prepared(prepared_graph("layout", seed=7, n=40, k=6))
    full = make_batch([g], [np.arange(5)])
    segs = split_graph(g, 10)
    from tpurank.gnn.gst.segments import segment_batch

    b = segment_batch(full, segs[:2])
    assert b.mask.shape == (2, 5) and bool(b.mask.all())
    m = small_gnn("layout", FEAT, hidden=16, layers=2, layer_attention=True).eval()
    assert segment_sums(m, b).shape == (5, 2, 2 * 16 + 1)


def test_gst_refuses_layer_attention(tiny_paths: Paths, tmp_path) -> None:
    """GST keys a segment's embedding by its own configs only; attention across the step's configs
    would make it depend on the others, so the two settings are refused together."""
    collection = "layout:xla:random"
    train = load_split(tiny_paths, collection, "train", progress=False)
    cfg = small_cfg(max_steps=2, segment_nodes=50, layer_attention=True)
    with pytest.raises(TpurankError, match="layer_attention"):
        fit(
            gnn_model.SPEC,
            Paths(tiny_paths.data, tmp_path),
            cfg,
            collection,
            train,
            train,
            Runtime(device=CPU),
            False,
        )
