"""Network values: files, networkx conversion and the paper's generator."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest
from hypothesis import given

from inferplan import Network, load_network, save_network, tiered
from inferplan.network.io import network_from_dict
from tests.strategies import small_dags


@given(small_dags(delays=True))
def test_networkx_round_trip(network):
    back = Network.from_networkx(network.to_networkx())
    assert back == network and back.links == network.links


def test_link_delays_round_trip_and_default_to_zero(tmp_path):
    data = tiered(seed=4).to_dict()
    assert all("delay_s" not in link for link in data["links"])  # none given: none written
    data["links"][2]["delay_s"] = 0.004
    data["links"][3]["delay_s"] = 2  # an int is a number of seconds too
    net = network_from_dict(data)
    assert net.link_delay[:4].tolist() == [0.0, 0.0, 0.004, 2.0]
    assert net.links[2].delay_s == 0.004 and net != tiered(seed=4)
    for suffix in (".json", ".yaml"):
        save_network(net, tmp_path / f"n{suffix}")
        assert load_network(tmp_path / f"n{suffix}").links == net.links
    graph = net.to_networkx()
    assert graph.edges[net.links[2].source, net.links[2].target]["delay_s"] == 0.004
    del graph.edges[net.links[2].source, net.links[2].target]["delay_s"]
    assert Network.from_networkx(graph).link_delay[2] == 0.0


@pytest.mark.parametrize("suffix", [".json", ".yaml"])
def test_file_round_trip(tmp_path, suffix):
    net = tiered(seed=4)
    save_network(net, tmp_path / f"n{suffix}")
    assert load_network(tmp_path / f"n{suffix}") == net


@pytest.mark.parametrize("seed", range(40))
def test_tiered_matches_the_paper_set_up(seed):
    net = tiered(seed=seed)
    ids = [n.id for n in net.nodes]
    tiers = {p: [v for v in ids if v[0] == p] for p in "amr"}
    assert 8 <= len(ids) <= 11
    assert all(2 <= len(t) <= 3 for t in tiers.values())
    g = net.to_networkx()
    assert nx.is_directed_acyclic_graph(g) and nx.has_path(g, "s", "t")
    for u in ["s", *tiers["a"], *tiers["m"]]:
        assert 1 <= g.out_degree(u) <= 3
    assert all(g.has_edge(r, "t") for r in tiers["r"])
    gflops = {n.id: n.capacity / 1e9 for n in net.nodes}
    assert all(6 <= gflops[v] <= 30 for v in ["s", *tiers["a"]])
    assert all(30 <= gflops[v] <= 90 for v in tiers["m"])
    assert all(90 <= gflops[v] <= 180 for v in [*tiers["r"], "t"])
    for e in net.links:
        mbps = e.capacity / 1e6
        low, high = {"a": (30, 100), "m": (100, 300)}.get(e.target[0], (300, 1000))
        assert low <= mbps <= high
        assert 0.01 <= e.price * 1e6 <= 1
    assert all(0.1 <= n.price * 1e9 <= 10 for n in net.nodes)


def test_tiered_is_reproducible_and_prices_look_log_uniform():
    assert tiered(seed=9) == tiered(seed=9)
    prices = np.array([n.price * 1e9 for s in range(300) for n in tiered(seed=s).nodes])
    # Log-uniform on [0.1, 10]: log10 is uniform on [-1, 1], so about half lie below 1.
    assert abs(np.mean(prices < 1.0) - 0.5) < 0.05
    assert abs(np.mean(np.log10(prices))) < 0.05
