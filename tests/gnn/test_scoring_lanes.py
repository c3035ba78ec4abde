"""A graph's scoring passes side by side (`score_rows`' lanes, `pass_lanes`): the same passes, so the
same bytes as one after another, within the node budget every pass in flight shares."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from helpers import FEAT, prepared_graph, small_gnn

from tpurank.gnn import scoring
from tpurank.gnn.data import from_prepared
from tpurank.gnn.scoring import pass_lanes, score_rows


def _models(kind: str) -> list[torch.nn.Module]:
    """A small GNN without and with attention across configs."""
    torch.manual_seed(0)
    plain = small_gnn(kind, FEAT, hidden=16, layers=2)
    return [plain.eval(), small_gnn(kind, FEAT, hidden=16, layers=2, cross_config_attention=True).eval()]


@pytest.mark.parametrize("kind", ["layout", "tile"])
def test_passes_side_by_side_score_the_same_bytes(kind: str, one_thread: None) -> None:
    """A graph's passes scored in lanes side by side: the same passes, so the same bytes as one after
    another (attention across configs included, whose scores depend on a pass's other configs)."""
    g = from_prepared(prepared_graph(kind, seed=3))
    rows = np.arange(g.num_unique)
    with_layer_attention = small_gnn(kind, FEAT, hidden=16, layers=2, layer_attention=True).eval()
    for m in [*_models(kind), with_layer_attention]:
        one = score_rows(m, g, rows, chunk=3, device=torch.device("cpu"), precision="fp32")
        assert len(one) == g.num_unique > 6
        for lanes in (2, 3):
            many = score_rows(m, g, rows, chunk=3, device=torch.device("cpu"), precision="fp32", lanes=lanes)
            np.testing.assert_array_equal(many, one)


def test_lanes_stay_within_the_node_budget_every_pass_in_flight_shares(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Passes side by side hold at most what the CPU's node budget allows all of them together: fewer
    lanes when the states of several passes would not fit; one on a GPU."""
    g = from_prepared(prepared_graph("layout", seed=3))
    m, cpu, nodes = _models("layout")[0], torch.device("cpu"), len(g.opcode)
    assert pass_lanes(m, 4, nodes, passes=10, most=3, device=cpu) == 3
    assert pass_lanes(m, 4, nodes, passes=2, most=3, device=cpu) == 2
    assert pass_lanes(m, 4, nodes, passes=10, most=3, device=torch.device("cuda")) == 1
    monkeypatch.setattr(scoring, "PASS_NODE_BUDGET", 2 * 4 * nodes)
    assert pass_lanes(m, 4, nodes, passes=10, most=3, device=cpu) == 2
    monkeypatch.setattr(scoring, "PASS_NODE_BUDGET", 4 * nodes)
    assert pass_lanes(m, 4, nodes, passes=10, most=3, device=cpu) == 1
