"""The networks and their config: each argument comes from its family's config section, by name,
with no default of the network's own; both networks share one base; checkpoints written before
the arguments were typed still load; the recomputed layers (`checkpoint_layers`) change no number."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_gnn

from tpurank.core.config import Config
from tpurank.core.config_build import from_dict
from tpurank.core.config_files import load_config
from tpurank.core.errors import TpurankError
from tpurank.gnn.data import from_prepared, make_batch
from tpurank.gnn.families import baseline
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.nets.gnn_ranker import GnnRanker
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.recipe import ModelSpec
from tpurank.gnn.training.checkpoints import CHECKPOINT, CHECKPOINT_FORMAT, load_model, save_checkpoint
from tpurank.gnn.training.losses import ranking_loss

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py

SPECS = [gnn_model.SPEC, baseline.SPEC]
FIXED = ("kind", "node_feat_dim")  # what the collection and its data decide, not the config


def other_value(value: object) -> object:
    """A valid value of the config field unlike `value` (a width that 4 attention heads divide)."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, str):
        return {"sum": "mean", "mean": "sum"}[value]
    if isinstance(value, float):
        return 0.5 if value != 0.5 else 0.25
    assert isinstance(value, int)
    return value * 2 if value else 7


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_every_network_argument_comes_from_its_config_section(spec: ModelSpec) -> None:
    section = spec.settings(Config())
    names = [f.name for f in dataclasses.fields(spec.network_class.Args) if f.name not in FIXED]
    assert names and all(hasattr(section, n) for n in names)
    for name in names:
        changed = other_value(getattr(section, name))
        cfg = from_dict({spec.section: {name: changed}})
        net = spec.new_network(cfg, "layout", FEAT)
        assert getattr(net.args, name) == changed, name
        assert (net.kind, net.args.node_feat_dim) == ("layout", FEAT)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_network_has_no_defaults_of_its_own(spec: ModelSpec) -> None:
    assert issubclass(spec.network_class, RankerNet)
    for f in dataclasses.fields(spec.network_class.Args):
        assert f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING, f.name


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_saved_arguments_rebuild_the_same_network(spec: ModelSpec, kind: str) -> None:
    torch.manual_seed(0)
    net = spec.new_network(from_dict({spec.section: {"hidden": 16}}), kind, FEAT)
    again = spec.load_network(net.saved_args())
    assert again.args == net.args
    assert {k: v.shape for k, v in again.state_dict().items()} == {
        k: v.shape for k, v in net.state_dict().items()
    }


def save(path, net: RankerNet, model_args: dict) -> None:
    save_checkpoint(
        path,
        {
            "format": CHECKPOINT_FORMAT,
            "model": "gnn",
            "collection": "layout:xla:random",
            "model_args": model_args,
            "state_dict": net.state_dict(),
        },
    )


def test_a_checkpoint_without_the_arguments_added_later_loads_as_it_was_trained(tmp_path) -> None:
    """A checkpoint saved before checkpoint_layers, standardize and layer_attention existed was
    built with them off: it loads so, and scores as the network that wrote it."""
    torch.manual_seed(0)
    net = small_gnn("layout", FEAT).eval()
    before = {k: v for k, v in net.saved_args().items() if k not in GnnRanker.ADDED_LATER}
    assert len(before) == len(net.saved_args()) - len(GnnRanker.ADDED_LATER)
    path = tmp_path / CHECKPOINT
    save(path, net, before)
    loaded = load_model(gnn_model.SPEC, path, "layout:xla:random").model
    assert loaded.args == net.args
    g = from_prepared(prepared_graph("layout", seed=1, n=20))
    batch = make_batch([g], [np.arange(6)])
    with torch.no_grad():
        assert torch.equal(loaded(batch), net(batch))


def test_a_baseline_checkpoint_saying_op_dim_loads_and_scores_as_it_was_trained(tmp_path) -> None:
    """Baseline checkpoints written before the opcode embedding's width took the GNN's name
    (`opcode_dim`) hold `op_dim` in their `model_args`: they load under the new name and score as
    the network that wrote them."""
    torch.manual_seed(0)
    cfg = from_dict({"baseline": {"hidden": 16, "layers": 2, "opcode_dim": 8}})
    net = baseline.SPEC.new_network(cfg, "layout", FEAT).eval()
    old = {("op_dim" if k == "opcode_dim" else k): v for k, v in net.saved_args().items()}
    assert old["op_dim"] == 8 and "opcode_dim" not in old
    path = tmp_path / CHECKPOINT
    checkpoint = {
        "format": CHECKPOINT_FORMAT,
        "model": "baseline",
        "collection": "layout:xla:random",
        "model_args": old,
        "state_dict": net.state_dict(),
    }
    save_checkpoint(path, checkpoint)
    loaded = load_model(baseline.SPEC, path, "layout:xla:random").model
    assert loaded.args == net.args and loaded.opcode.embedding_dim == 8
    g = from_prepared(prepared_graph("layout", seed=1, n=20))
    batch = make_batch([g], [np.arange(6)])
    with torch.no_grad():
        assert torch.equal(loaded(batch), net(batch))
    # a checkpoint written now says opcode_dim, as the config key does
    assert "opcode_dim" in net.saved_args() and "op_dim" not in net.saved_args()


def test_a_checkpoint_with_an_argument_the_network_lacks_is_one_line(tmp_path) -> None:
    net = small_gnn("layout", FEAT)
    path = tmp_path / CHECKPOINT
    save(path, net, {**net.saved_args(), "final_mlp_layers": 2})
    with pytest.raises(TpurankError, match=r"does not fit its model \(.*final_mlp_layers.*\); retrain"):
        load_model(gnn_model.SPEC, path, "layout:xla:random")


@pytest.mark.parametrize("layer_attention", [False, True])
def test_checkpointed_layers_give_the_same_loss_and_gradients(layer_attention: bool) -> None:
    g = from_prepared(prepared_graph("layout", seed=2, n=30))
    batch = make_batch([g], [np.arange(10)])
    grads, losses = [], []
    for ck in (False, True):
        torch.manual_seed(0)
        m = small_gnn(
            "layout", FEAT, hidden=16, layers=3, checkpoint_layers=ck, layer_attention=layer_attention
        )
        m.train()
        loss = ranking_loss("listmle", m(batch), batch.runtime, batch.mask, 0.1, batch.weight)
        loss.backward()
        losses.append(loss.item())
        grads.append({k: p.grad.clone() for k, p in m.named_parameters() if p.grad is not None})
    assert losses[0] == pytest.approx(losses[1], rel=1e-6)
    assert grads[0].keys() == grads[1].keys()
    for k in grads[0]:
        assert torch.allclose(grads[0][k], grads[1][k], atol=1e-6), k


@pytest.mark.parametrize(
    ("checkpoint_layers", "min_states", "recomputes"),
    [(True, 0, True), (True, 10 * 30 * 16, True), (True, 10 * 30 * 16 + 1, False), (False, 0, False)],
)
def test_only_passes_of_at_least_checkpoint_min_states_recompute(
    checkpoint_layers: bool, min_states: int, recomputes: bool
) -> None:
    """A pass of 10 configs x 30 nodes x width 16 recomputes its layers only from the threshold up,
    and only in training with gradients; the config's key reaches the network's arguments."""
    g = from_prepared(prepared_graph("layout", seed=2, n=30))
    batch = make_batch([g], [np.arange(10)])
    m = small_gnn(
        "layout", FEAT, hidden=16, checkpoint_layers=checkpoint_layers, checkpoint_min_states=min_states
    )
    states = m.encode_nodes(batch).unsqueeze(0).expand(10, -1, -1)
    assert states.numel() == 10 * 30 * 16
    assert m.train().recomputes(states) is recomputes
    assert not m.eval().recomputes(states)
    cfg = load_config(overrides=[f"gnn.checkpoint_min_states={min_states}"])
    assert gnn_model.SPEC.new_network(cfg, "layout", FEAT).args.checkpoint_min_states == min_states
