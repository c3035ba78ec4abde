"""GNN rankers: losses, invariances, training on tiny data, checkpoints, prediction and errors."""

from __future__ import annotations

import math
import zipfile
from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_cfg, small_gnn

from tpurank.core.collections import kind_of
from tpurank.core.config import Config
from tpurank.core.errors import TpurankError
from tpurank.core.metrics import graph_metrics, mean_score, order_from_costs
from tpurank.core.paths import Paths
from tpurank.gnn.data import batch_rows, from_prepared, load_split, make_batch
from tpurank.gnn.device import Runtime
from tpurank.gnn.entry import GNN
from tpurank.gnn.families import baseline
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.nets.early_join import EarlyJoinArgs, EarlyJoinSAGE
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.scoring import score_rows
from tpurank.gnn.training import loop
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_model
from tpurank.gnn.training.collection import train_collection
from tpurank.gnn.training.loop import fit
from tpurank.gnn.training.losses import listmle, pairwise_hinge, ranking_loss, resolve_loss

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


def models(kind: str) -> list[torch.nn.Module]:
    torch.manual_seed(0)
    out = [
        small_gnn(kind, FEAT, hidden=16, layers=2),
        small_gnn(kind, FEAT, hidden=16, layers=2, cross_config_attention=True),
        EarlyJoinSAGE(EarlyJoinArgs(kind, FEAT, hidden=16, layers=2, opcode_dim=8)),
    ]
    return [m.eval() for m in out]


# ------------------------------------------------------------------------------------------- losses


def test_pairwise_hinge_equals_hand_computed() -> None:
    cost = torch.tensor([[0.0, 0.5, 0.2], [1.0, 0.0, 9.0]])
    runtime = torch.tensor([[1.0, 2.0, 3.0], [2.0, 1.0, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True], [True, True, False]])
    # graph 0, margin 1: pairs (0<1) 1-0.5=0.5, (0<2) 1-0.2=0.8, (1<2) 1-(0.2-0.5)=1.3 -> mean 2.6/3
    # graph 1: only pair (1 faster than 0): max(0, 1 - (1 - 0)) = 0; the masked slot is ignored
    got = pairwise_hinge(cost, runtime, mask, margin=1.0)
    assert got.item() == pytest.approx((2.6 / 3 + 0.0) / 2, abs=1e-6)
    # margin 0.1: graph 0 -> only pair (1<2) contributes 0.1 + 0.3 = 0.4 -> 0.4/3; graph 1 -> 0
    assert pairwise_hinge(cost, runtime, mask, margin=0.1).item() == pytest.approx(0.4 / 3 / 2, abs=1e-6)


def test_weighted_hinge_counts_duplicates_like_the_expanded_list() -> None:
    cost = torch.tensor([[0.0, 0.5, 0.2]])
    runtime = torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    weight = torch.tensor([[2.0, 1.0, 1.0]])  # config 0 stands for two original configs
    # pairs (0<1) 0.5 x2, (0<2) 0.8 x2, (1<2) 1.3 x1 -> 3.9 / 5
    assert pairwise_hinge(cost, runtime, mask, 1.0, weight).item() == pytest.approx(3.9 / 5, abs=1e-6)
    g = torch.Generator().manual_seed(0)
    cost, runtime = torch.randn(1, 6, generator=g), torch.rand(1, 6, generator=g).double()
    counts = torch.tensor([3, 1, 2, 1, 4, 1])
    expanded = torch.repeat_interleave(torch.arange(6), counts)
    want = pairwise_hinge(
        cost[:, expanded], runtime[:, expanded], torch.ones(1, len(expanded), dtype=torch.bool), 0.3
    )
    got = pairwise_hinge(cost, runtime, torch.ones(1, 6, dtype=torch.bool), 0.3, counts[None].float())
    assert got.item() == pytest.approx(want.item(), rel=1e-6)


def test_listmle_equals_hand_computed() -> None:
    cost = torch.tensor([[0.0, 0.5, 0.2, 7.0]])
    runtime = torch.tensor([[3.0, 1.0, 2.0, 0.5]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, False]])
    s = [-0.5, -0.2, 0.0]  # scores (-cost) in true order: config 1, 2, 0 (config 3 is padding)
    want = sum(math.log(sum(math.exp(v) for v in s[i:])) - s[i] for i in range(3)) / 3
    assert listmle(cost, runtime, mask).item() == pytest.approx(want, abs=1e-6)
    assert ranking_loss("listmle", cost, runtime, mask).item() == pytest.approx(want, abs=1e-6)
    with pytest.raises(TpurankError, match="unknown gnn.loss"):
        ranking_loss("mse", cost, runtime, mask)


def test_auto_loss_is_listmle_for_layout_and_hinge_for_tile() -> None:
    assert resolve_loss("auto", "layout") == "listmle" and resolve_loss("auto", "tile") == "hinge"
    assert resolve_loss("hinge", "layout") == "hinge"
    assert gnn_model.SPEC.recipe(Config(), "tile").loss == "hinge"
    with pytest.raises(TpurankError, match="unknown loss"):
        resolve_loss("ranknet", "layout")


def test_losses_reward_the_right_order() -> None:
    runtime = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    good, bad = runtime.float() * 10, -runtime.float() * 10
    assert pairwise_hinge(good, runtime, mask, 0.1).item() == 0.0
    assert pairwise_hinge(bad, runtime, mask, 0.1).item() > 10
    assert listmle(good, runtime, mask).item() < 0.01 < listmle(bad, runtime, mask).item()


# -------------------------------------------------------------------------------------- invariances


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_scores_follow_configs_not_their_order(kind: str) -> None:
    g = from_prepared(prepared_graph(kind, seed=1))
    rows = np.arange(12)
    perm = np.random.default_rng(0).permutation(12)
    for m in models(kind):
        with torch.no_grad():
            a = m(make_batch([g], [rows]))[0]
            b = m(make_batch([g], [rows[perm]]))[0]
        assert torch.allclose(a[perm], b, atol=1e-5), type(m).__name__
        assert a.std() > 0  # configs get different scores


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_configs_do_not_interact_without_attention(kind: str) -> None:
    """Scored together in one pass or one at a time: the same costs (the pass shares only the graph)."""
    g = from_prepared(prepared_graph(kind, seed=2))
    rows = np.arange(6)
    for m in (models(kind)[0], models(kind)[2]):
        together = score_rows(m, g, rows, chunk=6, device=torch.device("cpu"), precision="fp32")
        alone = score_rows(m, g, rows, chunk=1, device=torch.device("cpu"), precision="fp32")
        np.testing.assert_allclose(together, alone, atol=1e-5)


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_scores_invariant_to_node_reindexing(kind: str) -> None:
    p = prepared_graph(kind, seed=3)
    n = len(p.node_opcode)
    perm = np.random.default_rng(1).permutation(n)  # new node j is old node perm[j]
    new_of_old = np.empty(n, dtype=np.int64)
    new_of_old[perm] = np.arange(n)
    q = replace(
        p,
        node_feat=p.node_feat[perm],
        node_opcode=p.node_opcode[perm],
        edge_index=new_of_old[p.edge_index].astype(np.int32),
        config_nodes=new_of_old[p.config_nodes].astype(np.int32),
    )
    a, b = from_prepared(p), from_prepared(q)
    rows = np.arange(10)
    for m in models(kind):
        with torch.no_grad():
            assert torch.allclose(m(make_batch([a], [rows])), m(make_batch([b], [rows])), atol=1e-5)


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_graph_without_edges_is_scored(kind: str) -> None:
    g = from_prepared(replace(prepared_graph(kind, seed=4), edge_index=np.zeros((0, 2), np.int32)))
    assert g.edge_index.shape == (2, 0)
    for m in models(kind):
        cost = score_rows(m, g, np.arange(5), chunk=5, device=torch.device("cpu"), precision="fp32")
        assert np.isfinite(cost).all() and np.ptp(cost) > 0


def test_batching_graphs_matches_scoring_alone() -> None:
    gs = [from_prepared(prepared_graph("layout", seed=s, n=20 + 5 * s, k=3 + s)) for s in range(3)]
    rows = [np.arange(8), np.arange(5), np.arange(8)]
    m = models("layout")[0]
    with torch.no_grad():
        together = m(make_batch(gs, rows))
        for b, g in enumerate(gs):
            alone = m(make_batch([g], [rows[b]]))[0]
            assert torch.allclose(together[b, : len(rows[b])], alone, atol=1e-5)
    assert make_batch(gs, rows).mask.sum().item() == 21


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_micro_batches_give_the_gradient_of_the_whole_step(kind: str) -> None:
    graphs = [from_prepared(prepared_graph(kind, seed=s, n=20 + 4 * s)) for s in range(3)]
    rows = [np.arange(10), np.arange(7), np.arange(10)]
    r = gnn_model.SPEC.recipe(small_cfg(), kind)
    after = []
    for max_nodes in (0, 30):  # one batch; then three micro-batches (each graph alone)
        torch.manual_seed(0)
        m = small_gnn(kind, FEAT, hidden=16, layers=2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        batches = loop.micro_batches(graphs, rows, max_nodes)
        assert len(batches) == (1 if max_nodes == 0 else 3)
        loop.train_step(m, opt, batches, r, torch.device("cpu"))
        after.append(m.state_dict())
    for k in after[0]:
        assert torch.allclose(after[0][k], after[1][k], atol=1e-6), k


# --------------------------------------------------------------------------------- tiny-data training


TRAINED = [
    (gnn_model.SPEC, "layout:xla:random"),
    (gnn_model.SPEC, "tile:xla"),
    (baseline.SPEC, "layout:nlp:default"),
]


@pytest.mark.parametrize(("spec", "collection"), TRAINED)
def test_training_steps_reduce_the_loss_on_tiny(tiny_paths: Paths, spec, collection: str) -> None:
    cfg = small_cfg()
    r = spec.recipe(cfg, kind_of(collection))
    graphs = [g for g in load_split(tiny_paths, collection, "train", progress=False) if g.rankable]
    rng = np.random.default_rng(0)
    batches = [make_batch(graphs, [batch_rows(g, 32, rng) for g in graphs]) for _ in range(2)]
    torch.manual_seed(0)
    model = spec.new_network(cfg, graphs[0].kind, graphs[0].node_feat.shape[1])
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)  # a few steps only: a brisk learning rate

    def loss_of(b) -> torch.Tensor:
        return ranking_loss(r.loss, model(b), b.runtime, b.mask, r.margin)

    model.eval()
    with torch.no_grad():
        before = float(sum(loss_of(b) for b in batches))
    model.train()
    for step in range(20):
        opt.zero_grad()
        loss_of(batches[step % 2]).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        after = float(sum(loss_of(b) for b in batches))
    assert after < 0.95 * before, (before, after)


def test_train_predict_checkpoint_roundtrip(tiny_paths: Paths, tmp_path) -> None:
    paths = Paths(data=tiny_paths.data, out=tmp_path)
    # the prepared cache stays in the fixture's out folder: read it from there
    collection = "layout:xla:default"
    train = load_split(tiny_paths, collection, "train", progress=False)
    valid = load_split(tiny_paths, collection, "valid", progress=False)
    cfg = small_cfg(max_steps=4, eval_every=2, graphs_per_batch=2, configs_per_graph=16)
    rt = Runtime(device=torch.device("cpu"))
    model, summary = fit(gnn_model.SPEC, paths, cfg, collection, train, valid, rt, progress=False)
    assert summary["steps_run"] == 4 and [h["step"] for h in summary["history"]] == [2, 4]
    assert summary["stopped_by"] == "max_steps"
    assert summary["history"][0]["configs_per_s"] > 0
    out = paths.model_dir("gnn", collection)
    assert (out / CHECKPOINT).exists() and (out / "model.json").exists() and not (out / "last.pt").exists()

    reloaded, ckpt = load_model(gnn_model.SPEC, out / CHECKPOINT)
    assert ckpt["complete"] and ckpt["config"]["gnn"]["hidden"] == 16  # the resolved config is inside
    preds = predict_collection(gnn_model.SPEC, paths, cfg, collection, "valid", graphs=valid, progress=False)
    best_step = max(summary["history"], key=lambda h: h["valid_score"])["step"]
    # early stopping watched the very score the validation report computes (tiny graphs: < 1000 configs)
    report = [
        graph_metrics(collection, order_from_costs(preds[g.id]), g.config_runtime)["score"] for g in valid
    ]
    assert summary["best_valid_score"] == pytest.approx(mean_score(report)[0], abs=1e-6)
    for g in valid:
        assert preds[g.id].shape == (len(g.inverse),)
        again = score_rows(
            reloaded, g, np.arange(g.num_unique), cfg.gnn.predict_chunk, torch.device("cpu"), "fp32"
        )
        np.testing.assert_array_equal(preds[g.id], again[g.inverse])  # reloads to identical scores
        if best_step == 4:  # the last weights are the best ones: the in-memory model scores the same
            mine = score_rows(model.eval(), g, np.arange(g.num_unique), 256, torch.device("cpu"), "fp32")
            np.testing.assert_allclose(preds[g.id], mine[g.inverse], atol=1e-6)

    # a second run with the same config and data is skipped; new prepared data or config retrains
    mtime = (out / CHECKPOINT).stat().st_mtime_ns
    train_collection(gnn_model.SPEC, paths, cfg, collection, train, valid, progress=False)
    assert (out / CHECKPOINT).stat().st_mtime_ns == mtime
    changed = paths.prepared / "layout/xla/default/train/new.tpg"
    changed.parent.mkdir(parents=True)
    with zipfile.ZipFile(changed, "w") as z:  # a cache file is a zip: named by its members' CRCs
        z.writestr("meta.json", "a rebuilt cache file")
    train_collection(gnn_model.SPEC, paths, cfg, collection, train, valid, progress=False)
    assert (out / CHECKPOINT).stat().st_mtime_ns != mtime
    mtime = (out / CHECKPOINT).stat().st_mtime_ns
    train_collection(gnn_model.SPEC, paths, small_cfg(max_steps=1), collection, train, valid, progress=False)
    assert (out / CHECKPOINT).stat().st_mtime_ns != mtime


def test_interrupted_training_resumes_to_the_same_weights(tiny_paths: Paths, tmp_path, monkeypatch) -> None:
    collection = "layout:nlp:random"
    train = load_split(tiny_paths, collection, "train", progress=False)
    valid = load_split(tiny_paths, collection, "valid", progress=False)
    cfg = small_cfg(max_steps=4, eval_every=2, graphs_per_batch=2, configs_per_graph=8, dropout=0.1)
    rt = Runtime(device=torch.device("cpu"))
    straight, _ = fit(
        gnn_model.SPEC, Paths(tmp_path, tmp_path / "a"), cfg, collection, train, valid, rt, False
    )

    paths = Paths(tmp_path, tmp_path / "b")
    real_step, calls = loop.train_step, []

    def dies_at_step_three(*args, **kwargs):
        calls.append(1)
        if len(calls) == 3:  # step 3: after the first validation (every 2 steps)
            raise KeyboardInterrupt
        return real_step(*args, **kwargs)

    monkeypatch.setattr(loop, "train_step", dies_at_step_three)
    with pytest.raises(KeyboardInterrupt):
        fit(gnn_model.SPEC, paths, cfg, collection, train, valid, rt, False)
    assert (paths.model_dir("gnn", collection) / "last.pt").exists()
    calls.clear()
    monkeypatch.setattr(loop, "train_step", lambda *a, **k: calls.append(1) or real_step(*a, **k))
    resumed, summary = fit(gnn_model.SPEC, paths, cfg, collection, train, valid, rt, False)
    assert len(calls) == 2  # only steps 3 and 4 ran again
    assert [h["step"] for h in summary["history"]] == [2, 4]
    a, b = straight.state_dict(), resumed.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)  # sampling, dropout, optimizer and schedule all resumed


def test_errors_are_one_line(tmp_path) -> None:
    paths = Paths(data=tmp_path / "data", out=tmp_path / "out")
    with pytest.raises(TpurankError, match="no trained model"):
        GNN.predict(paths, Config(), "layout:xla:random", "valid")
    with pytest.raises(TpurankError, match="no prepared train graphs"):
        GNN.train(paths, Config(), "tile:xla")
    # a config built in code skips from_dict's checks: the trainer checks again
    for change, message in [
        ({"configs_per_graph": 1}, "configs_per_graph"),
        ({"loss": "ranknet"}, "unknown loss"),
    ]:
        cfg = small_cfg()
        cfg.gnn = replace(cfg.gnn, **change)
        with pytest.raises(TpurankError, match=message):
            train_collection(gnn_model.SPEC, paths, cfg, "tile:xla")
    with pytest.raises(TpurankError, match="gnn.aggr"):
        small_gnn("layout", FEAT, aggr="max")
    bad = paths.model_dir("gnn", "tile:xla") / CHECKPOINT
    bad.parent.mkdir(parents=True)
    bad.write_bytes(b"not a checkpoint")
    with pytest.raises(TpurankError, match="unreadable checkpoint"):
        GNN.predict(paths, Config(), "tile:xla", "valid")


def test_training_stops_at_its_time_budget(tiny_paths: Paths, tmp_path) -> None:
    collection = "layout:xla:random"
    train = load_split(tiny_paths, collection, "train", progress=False)
    valid = load_split(tiny_paths, collection, "valid", progress=False)
    cfg = small_cfg(max_steps=1000, eval_every=500, time_budget_min=1e-9, configs_per_graph=8)
    rt = Runtime(device=torch.device("cpu"))
    _, summary = fit(gnn_model.SPEC, Paths(tmp_path, tmp_path), cfg, collection, train, valid, rt, False)
    # the budget is spent after the first step: validated once, then stopped
    assert summary["stopped_by"] == "time budget" and summary["steps_run"] == 1
    assert [h["step"] for h in summary["history"]] == [1]


def test_graphs_stream_configs_from_the_cache(tiny_paths: Paths) -> None:
    from tpurank.prepare.store import ConfigStore

    train = load_split(tiny_paths, "layout:nlp:default", "train", progress=False)
    g = max(train, key=lambda g: g.num_unique)
    assert isinstance(g.configs, ConfigStore)  # nothing decoded until a batch indexes it
    rng = np.random.default_rng(0)
    for _ in range(20):
        rows = batch_rows(g, 4, rng)
        assert len(set(rows.tolist())) == 4 and rows.max() < g.num_unique
        # a window of at most 4 x 4 consecutive stored rows (wrapping): one or two chunks per step
        assert g.num_unique > 16 and any(((rows - s) % g.num_unique < 16).all() for s in rows)
    np.testing.assert_array_equal(g.configs[rows], np.asarray(g.configs)[rows])


def test_validation_uses_the_official_subset(tiny_paths: Paths) -> None:
    from tpurank.gnn.data import eval_configs

    valid = load_split(tiny_paths, "layout:xla:random", "valid", progress=False)
    g = valid[0]
    assert len(eval_configs(g, 1000)) == len(g.inverse)  # no subset in the cache: every config
    g.eval_rows = np.array([3, 1, 2])
    np.testing.assert_array_equal(eval_configs(g, 1000), [3, 1, 2])
