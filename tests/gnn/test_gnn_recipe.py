"""The top solutions' recipe in the GNN: warm-up, seed averaging, train-only feature
standardisation, cross-config attention inside message passing, tile on all configs."""

from __future__ import annotations

import json
import math
from dataclasses import replace

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_cfg, small_gnn
from scipy.stats import rankdata

from tpurank.core.metrics import graph_metrics, order_from_costs
from tpurank.core.paths import Paths
from tpurank.gnn import seeds as seeds_mod
from tpurank.gnn.data import batch_rows, from_prepared, load_split, make_batch
from tpurank.gnn.device import Runtime
from tpurank.gnn.entry import GNN
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.nets.gnn_ranker import GnnRanker
from tpurank.gnn.nets.layers import CrossConfigAttention
from tpurank.gnn.nets.standardize import feature_stats
from tpurank.gnn.predict import predict_collection
from tpurank.gnn.seeds import SUMMARY, average_costs, member_paths, predict_seeds, train_seeds
from tpurank.gnn.training.checkpoints import CHECKPOINT, load_model
from tpurank.gnn.training.loop import fit
from tpurank.gnn.training.losses import ranking_loss
from tpurank.gnn.training.lr_schedule import lr_factor, make_scheduler

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py


# ------------------------------------------------------------------------------------------ warm-up


@pytest.mark.parametrize(
    ("step", "warmup", "want"),
    [
        (0, 10, 0.1),  # linear from 1/warmup
        (4, 10, 0.5),
        (9, 10, 1.0),  # full rate at the end of the warm-up
        (10, 10, 1.0),  # the cosine starts there ...
        (55, 10, 0.5),  # ... is half-way at the middle of the remaining 90 steps ...
        (100, 10, 0.0),  # ... and ends at 0
        (50, 0, 0.5),  # no warm-up: the plain cosine over max_steps
    ],
)
def test_warmup_then_cosine_values(step: int, warmup: int, want: float) -> None:
    assert lr_factor(step, 100, warmup) == pytest.approx(want, abs=1e-12)


def test_scheduler_without_warmup_matches_the_former_cosine() -> None:
    r = gnn_model.SPEC.recipe(small_cfg(max_steps=20, warmup_steps=0), "layout")
    mine = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    ref = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.01)
    s_mine, s_ref = make_scheduler(mine, r), torch.optim.lr_scheduler.CosineAnnealingLR(ref, T_max=20)
    for _ in range(20):
        assert mine.param_groups[0]["lr"] == pytest.approx(ref.param_groups[0]["lr"], abs=1e-12)
        mine.step(), ref.step(), s_mine.step(), s_ref.step()


def test_warmup_reaches_the_optimizer() -> None:
    r = gnn_model.SPEC.recipe(small_cfg(max_steps=20, warmup_steps=4, lr=0.01), "layout")
    assert r.warmup_steps == 4
    opt = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=r.lr)
    sched = make_scheduler(opt, r)
    lrs = []
    for _ in range(5):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step(), sched.step()
    assert lrs == pytest.approx([0.0025, 0.005, 0.0075, 0.01, 0.01])


# ------------------------------------------------------------------------------------- seed averaging


@pytest.mark.parametrize("how", ["rank", "zscore"])
def test_average_costs_is_the_mean_of_normalized_costs(how: str) -> None:
    a = np.array([3.0, 1.0, 2.0, 10.0])
    b = np.array([100.0, 400.0, 200.0, 300.0])  # another scale: normalisation keeps it from dominating
    if how == "rank":
        want = ((rankdata(a) - 1) / 3 + (rankdata(b) - 1) / 3) / 2
    else:
        want = ((a - a.mean()) / a.std() + (b - b.mean()) / b.std()) / 2
    np.testing.assert_allclose(average_costs([a, b], how), want)
    assert how != "rank" or average_costs([a, b], how).tolist() == pytest.approx([1 / 3, 1 / 2, 1 / 3, 5 / 6])


def assert_rank_average(
    averaged: dict, members: list[dict], reported: float, paths: Paths, collection: str
) -> None:
    """The seed average is the mean of the members' normalised ranks, and the score reported for it
    is that of the averaged predictions (tiny graphs: all configs)."""
    assert any(not np.allclose(members[0][g], members[1][g]) for g in averaged)  # the seeds differ
    for gid, cost in averaged.items():
        want = ((rankdata(members[0][gid]) - 1) + (rankdata(members[1][gid]) - 1)) / (2 * (len(cost) - 1))
        np.testing.assert_allclose(cost, want)
    valid = {g.id: g for g in load_split(paths, collection, "valid", progress=False)}
    scores = [
        graph_metrics(collection, order_from_costs(c), valid[g].config_runtime)["score"]
        for g, c in averaged.items()
    ]
    assert reported == pytest.approx(np.nanmean(scores), abs=1e-9)


def test_seed_members_train_resumably_and_average(tiny_paths: Paths, tmp_path) -> None:
    collection = "layout:xla:default"
    paths = Paths(data=tiny_paths.data, out=tmp_path)
    (tmp_path / "features").mkdir()
    (tmp_path / "features" / "prepared").symlink_to(tiny_paths.prepared, target_is_directory=True)
    cfg = small_cfg(max_steps=3, eval_every=3, graphs_per_batch=2, configs_per_graph=8, seeds=2)
    cfg = cfg.for_collection(collection)  # as the train stage hands it on
    summary = train_seeds(gnn_model.SPEC, paths, cfg, collection, progress=False)
    top = paths.model_dir("gnn", collection)
    assert (top / CHECKPOINT).exists() and (top / "seed-1" / CHECKPOINT).exists()
    assert json.loads((top / SUMMARY).read_text())["averaged_valid_score"] == summary["averaged_valid_score"]
    assert summary["seeds"] == [0, 1] and len(summary["member_valid_scores"]) == 2
    # member k trained with seed + k and one seed: member 0 is what a one-seed run trains
    assert [
        load_model(gnn_model.SPEC, p)[1]["config"]["seed"]
        for p in (top / CHECKPOINT, top / "seed-1" / CHECKPOINT)
    ] == [0, 1]

    members = [
        predict_collection(
            gnn_model.SPEC,
            member_paths(paths, k),
            replace(cfg, seed=k, gnn=replace(cfg.gnn, seeds=1)),
            collection,
            "valid",
            progress=False,
        )
        for k in range(2)
    ]
    averaged = predict_seeds(gnn_model.SPEC, paths, cfg, collection, "valid", progress=False)
    # predict follows the trained seeds (seeds.json), whatever the predicting config says
    one = replace(cfg, gnn=replace(cfg.gnn, seeds=1))
    again = GNN.predict(paths, one, collection, "valid")
    assert all(np.array_equal(again[g], averaged[g]) for g in averaged)
    assert_rank_average(averaged, members, summary["averaged_valid_score"], paths, collection)
    # up to date: a rerun, or a one-seed run of member 0, retrains nothing
    mtimes = [(top / CHECKPOINT).stat().st_mtime_ns, (top / "seed-1" / CHECKPOINT).stat().st_mtime_ns]
    train_seeds(gnn_model.SPEC, paths, cfg, collection, progress=False)
    GNN.train(paths, one, collection)
    assert [(top / CHECKPOINT).stat().st_mtime_ns, (top / "seed-1" / CHECKPOINT).stat().st_mtime_ns] == mtimes
    # ... and a one-seed run drops seeds.json: predict uses member 0 alone
    assert not (top / SUMMARY).exists()
    # a seed run drops seeds.json before it trains: interrupted, it leaves no stale members to average
    (top / SUMMARY).write_text("{}")
    real_train = seeds_mod.train_collection

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    seeds_mod.train_collection = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            train_seeds(gnn_model.SPEC, paths, cfg, collection, progress=False)
    finally:
        seeds_mod.train_collection = real_train
    assert not (top / SUMMARY).exists()
    alone = GNN.predict(paths, one, collection, "valid")
    assert all(np.array_equal(alone[g], members[0][g]) for g in alone)


# --------------------------------------------------------------------------------- standardisation


def test_feature_stats_are_the_train_nodes_mean_and_std() -> None:
    graphs = [from_prepared(prepared_graph("layout", seed=s, n=10 + 5 * s)) for s in range(3)]
    graphs[0].node_feat[:, 2] = 5.0
    graphs[1].node_feat[:, 2] = 5.0
    graphs[2].node_feat[:, 2] = 5.0  # a constant column: centred, scaled by 1
    mean, std = feature_stats(graphs)
    x = torch.cat([g.node_feat for g in graphs]).double()
    torch.testing.assert_close(mean.double(), x.mean(0), atol=1e-6, rtol=0)
    want_std = x.std(0, unbiased=False)
    want_std[2] = 1.0
    torch.testing.assert_close(std.double(), want_std, atol=1e-5, rtol=0)


def test_standardisation_is_fitted_on_train_only_and_applied_at_predict(tmp_path) -> None:
    train = [from_prepared(prepared_graph("layout", seed=s)) for s in range(3)]
    valid = [from_prepared(prepared_graph("layout", seed=10 + s, split="valid")) for s in range(2)]
    shifted = [replace(g, node_feat=g.node_feat * 100 + 7) for g in valid]  # other valid graphs
    cfg = small_cfg(max_steps=2, eval_every=2, graphs_per_batch=2, configs_per_graph=8, standardize=True)
    rt = Runtime(device=torch.device("cpu"))
    saved = []
    for i, v in enumerate((valid, shifted)):
        paths = Paths(data=tmp_path, out=tmp_path / f"run{i}")
        fit(gnn_model.SPEC, paths, cfg, "layout:xla:random", train, v, rt, progress=False)
        _, ckpt = load_model(gnn_model.SPEC, paths.model_dir("gnn", "layout:xla:random") / CHECKPOINT)
        saved.append((ckpt["state_dict"]["feat_mean"], ckpt["state_dict"]["feat_std"]))
    mean, std = feature_stats(train)
    for m, s in saved:  # the valid graphs changed; the statistics did not, and they are the train ones
        torch.testing.assert_close(m, mean)
        torch.testing.assert_close(s, std)
    assert not torch.allclose(mean, feature_stats(valid)[0])

    # the model applies them: standardising by hand and scoring without the option gives the same costs
    torch.manual_seed(0)
    on = small_gnn("layout", FEAT, hidden=16, layers=2, standardize=True).eval()
    on.feat_mean.copy_(mean)
    on.feat_std.copy_(std)
    off = small_gnn("layout", FEAT, hidden=16, layers=2).eval()
    off.load_state_dict({k: v for k, v in on.state_dict().items() if not k.startswith("feat_")})
    g = valid[0]
    by_hand = replace(g, node_feat=(g.node_feat - mean) / std)
    with torch.no_grad():
        a = on(make_batch([g], [np.arange(10)]))
        b = off(make_batch([by_hand], [np.arange(10)]))
    torch.testing.assert_close(a, b)


# ------------------------------------------------------------------------ attention in message passing


def attention_model(**kw: object) -> GnnRanker:
    torch.manual_seed(0)
    return small_gnn("layout", FEAT, hidden=16, layers=2, heads=2, layer_attention=True, **kw)


def test_layer_attention_shape_and_permutation_equivariance() -> None:
    gs = [from_prepared(prepared_graph("layout", seed=s, n=20 + 5 * s, k=3 + s)) for s in range(2)]
    rows = [np.arange(9), np.arange(6)]  # the second graph padded to 9 slots
    m = attention_model().eval()
    assert len(m.layer_attention) == 2  # one per message-passing layer
    perm = np.random.default_rng(0).permutation(9)
    with torch.no_grad():
        a = m(make_batch(gs, rows))
        b = m(make_batch([gs[0]], [rows[0][perm]]))
        alone = m(make_batch([gs[1]], [rows[1]]))
    assert a.shape == (2, 9)
    torch.testing.assert_close(a[0][perm], b[0], atol=1e-5, rtol=0)  # permuting configs permutes costs
    torch.testing.assert_close(a[1, :6], alone[0], atol=1e-5, rtol=0)  # padding slots are not attended to


@pytest.mark.parametrize("training", [False, True])
def test_the_cpu_attention_is_torchs_multihead_attention_with_and_without_padding(training: bool) -> None:
    """On the CPU the attention runs on torch's scaled-dot-product kernel from the layer's own
    weights: it gives what `nn.MultiheadAttention` gives with its key padding mask, in values and
    gradients, with no padding (no mask passed) and with padding slots (which are not attended to)."""
    torch.manual_seed(0)
    attn = CrossConfigAttention(16, 2).train(training)
    g = torch.randn(5, 12, 16, requires_grad=True)
    full = torch.ones(5, 12, dtype=torch.bool)
    padded = full.clone()
    padded[1, 7:] = False
    assert CrossConfigAttention.padding(full) is None and torch.equal(
        CrossConfigAttention.padding(padded), ~padded
    )
    for mask in (full, padded):
        ours = attn(g, mask)
        h = attn.norm(g)
        theirs = g + attn.attn(h, h, h, key_padding_mask=~mask, need_weights=False)[0]
        torch.testing.assert_close(ours, theirs, atol=1e-5, rtol=0)
        grad = torch.randn_like(ours)
        mine = torch.autograd.grad(ours, [g, attn.attn.in_proj_weight], grad)
        ref = torch.autograd.grad(theirs, [g, attn.attn.in_proj_weight], grad)
        for a, b in zip(mine, ref, strict=True):
            torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-4)


def test_off_the_cpu_the_padding_mask_is_kept_without_asking_the_device() -> None:
    """On a GPU the all-padding check would make the host wait for the device at every layer: the
    mask is passed on as it is (a meta tensor stands in for the device: reading its values fails)."""
    mask = torch.ones(3, 4, dtype=torch.bool, device="meta")
    kept = CrossConfigAttention.padding(mask)
    assert kept is not None and kept.shape == (3, 4) and kept.device.type == "meta"


def test_layer_attention_lets_configs_see_each_other_and_gradients_flow() -> None:
    g = from_prepared(prepared_graph("layout", seed=1))
    m = attention_model()
    with torch.no_grad():
        together = m.eval()(make_batch([g], [np.arange(6)]))[0]
        fewer = m(make_batch([g], [np.arange(3)]))[0]
    assert not torch.allclose(together[:3], fewer, atol=1e-4)  # a config's cost depends on its competitors
    m.train()
    batch = make_batch([g], [np.arange(8)])
    loss = ranking_loss("listmle", m(batch).float(), batch.runtime, batch.mask, 0.1, batch.weight)
    loss.backward()
    for name, p in m.layer_attention.named_parameters():
        assert p.grad is not None and float(p.grad.abs().sum()) > 0, name


def test_scoring_passes_bound_the_attention_scores(monkeypatch: pytest.MonkeyPatch) -> None:
    """With attention at the configurable nodes, a scoring pass holds heads x K x C^2 scores: the
    configs per pass shrink to keep them within PASS_ATTENTION_BUDGET (1.6 GB on a real-size graph
    otherwise), and every config is still scored once."""
    from tpurank.gnn import scoring

    g = from_prepared(prepared_graph("layout", seed=1, n=30, k=5))
    m = attention_model().eval()
    plain = small_gnn("layout", FEAT, hidden=16, layers=2, heads=2).eval()
    k, heads = len(g.config_nodes), 2
    monkeypatch.setattr(scoring, "PASS_ATTENTION_BUDGET", heads * k * 3 * 3)  # 3 configs per pass
    assert scoring.pass_configs(m, g, 256, len(g.opcode)) == 3
    assert scoring.pass_configs(plain, g, 256, len(g.opcode)) == 256  # no attention: only the node bound
    sizes: list[int] = []
    forward = m.forward
    monkeypatch.setattr(m, "forward", lambda batch: sizes.append(batch.configs.shape[0]) or forward(batch))
    rows = np.arange(min(8, g.num_unique))
    cost = scoring.score_rows(m, g, rows, 256, torch.device("cpu"))
    assert max(sizes) <= 3 and sum(sizes) == len(rows) and np.isfinite(cost).all()


def test_layer_attention_is_a_layout_option() -> None:
    assert small_gnn("tile", FEAT, hidden=16, layers=2, heads=2, layer_attention=True).layer_attention is None
    network = gnn_model.SPEC.new_network(small_cfg(layer_attention=True), "layout", FEAT)
    assert network.args.layer_attention and network.layer_attention is not None


# --------------------------------------------------------------------------------- tile, all configs


@pytest.mark.parametrize(("kind", "all_configs"), [("tile", True), ("tile", False), ("layout", True)])
def test_tile_all_configs_samples_every_config(kind: str, all_configs: bool) -> None:
    r = gnn_model.SPEC.recipe(small_cfg(configs_per_graph=8, tile_all_configs=all_configs), kind)
    g = from_prepared(prepared_graph(kind, seed=0, u=50))
    rows = batch_rows(g, r.configs_per_graph, np.random.default_rng(0))
    every = kind == "tile" and all_configs
    assert sorted(rows.tolist()) == list(range(50)) if every else len(rows) == 8
    assert math.isfinite(r.lr)


@pytest.mark.parametrize(("free_gb", "hidden"), [(15.0, 64), (15.0, 256), (79.0, 256)])
def test_scoring_passes_grow_with_a_gpus_free_memory(
    monkeypatch: pytest.MonkeyPatch, free_gb: float, hidden: int
) -> None:
    """On a CUDA device (faked: no GPU here) the budgets follow its free memory and the model's
    width; the CPU keeps the fixed budgets its 4 GB target was measured with."""
    from tpurank.gnn import scoring

    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(free_gb * 1e9), int(80e9)))
    cuda = torch.device("cuda", 0)
    nodes, scores = scoring.pass_budgets(cuda, hidden)
    half = scoring.PASS_DEVICE_SHARE * free_gb * 1e9 / 2
    assert nodes == int(half // (4 * scoring.STATE_COPIES * hidden)) > scoring.PASS_NODE_BUDGET * 64 // hidden
    assert scores == int(half // (4 * scoring.SCORE_COPIES)) > scoring.PASS_ATTENTION_BUDGET
    assert scoring.pass_budgets(torch.device("cpu"), hidden) == (
        scoring.PASS_NODE_BUDGET,
        scoring.PASS_ATTENTION_BUDGET,
    )
    g = from_prepared(prepared_graph("layout", seed=1, n=30, k=5))
    m = attention_model().eval()
    big = 20_000  # nodes of a large nlp graph
    assert scoring.pass_configs(m, g, 4096, big, cuda) > scoring.pass_configs(m, g, 4096, big)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (int(0.1e9), int(80e9)))
    assert scoring.pass_budgets(cuda, 64) == (scoring.PASS_NODE_BUDGET, scoring.PASS_ATTENTION_BUDGET)
