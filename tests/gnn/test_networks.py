"""The networks and their config: each argument comes from its family's config section, by name,
with no default of the network's own; both networks share one base; checkpoints written before
the arguments were typed still load."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_gnn

from tpurank.core.config import Config
from tpurank.core.config_build import from_dict
from tpurank.core.errors import TpurankError
from tpurank.gnn.data import from_prepared, make_batch
from tpurank.gnn.families import baseline
from tpurank.gnn.families import gnn as gnn_model
from tpurank.gnn.nets.gnn_ranker import GnnRanker
from tpurank.gnn.nets.ranker_net import RankerNet
from tpurank.gnn.recipe import ModelSpec
from tpurank.gnn.train.checkpoints import CHECKPOINT, CHECKPOINT_FORMAT, load_model, save_checkpoint

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
    names = [f.name for f in dataclasses.fields(spec.network.Args) if f.name not in FIXED]
    assert names and all(hasattr(section, n) for n in names)
    for name in names:
        changed = other_value(getattr(section, name))
        cfg = from_dict({spec.section: {name: changed}})
        net = spec.new_network(cfg, "layout", FEAT)
        assert getattr(net.args, name) == changed, name
        assert (net.kind, net.args.node_feat_dim) == ("layout", FEAT)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.name)
def test_a_network_has_no_defaults_of_its_own(spec: ModelSpec) -> None:
    assert issubclass(spec.network, RankerNet)
    for f in dataclasses.fields(spec.network.Args):
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


def test_a_checkpoint_with_an_argument_the_network_lacks_is_one_line(tmp_path) -> None:
    net = small_gnn("layout", FEAT)
    path = tmp_path / CHECKPOINT
    save(path, net, {**net.saved_args(), "final_mlp_layers": 2})
    with pytest.raises(TpurankError, match=r"does not fit its model \(.*final_mlp_layers.*\); retrain"):
        load_model(gnn_model.SPEC, path, "layout:xla:random")
