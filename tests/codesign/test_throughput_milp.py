"""T* by the MILP (``throughput(..., method="milp")``) against the brute force over simple
paths on networks with cycles, and against the state graph on acyclic ones."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import throughput_optimal
from inferplan.codesign.milp.throughput import throughput_milp
from inferplan.errors import InvalidArgument, NetworkHasCycle
from tests.codesign.test_milp import wide_range_instances
from tests.oracles import CYCLIC_NETWORK, brute_force_interval, evaluate
from tests.strategies import small_dags, small_networks, small_profiles


@settings(max_examples=80)
@given(network=small_networks(max_nodes=5), profile=small_profiles(max_blocks=4))
def test_milp_t_star_equals_brute_force_on_networks_with_cycles(network, profile):
    best = inferplan.throughput(network, profile, method="milp")
    assert best.interval == pytest.approx(brute_force_interval(network, profile), rel=1e-6)
    assert len(set(best.path)) == len(best.path)  # a simple path
    assert best.path[0] == network.source and best.path[-1] == network.target
    assert list(best.partition) == sorted(best.partition)
    assert best.partition[-1] == profile.n_blocks
    # the interval is the deployment's own, from the definitions
    assert best.interval == pytest.approx(
        evaluate(network, profile, best.path, best.partition, 1.0).interval, rel=1e-12
    )


@settings(max_examples=40)
@given(network=small_dags(), profile=small_profiles(max_blocks=4))
def test_milp_t_star_equals_the_state_graph_on_dags(network, profile):
    milp = inferplan.throughput(network, profile, method="milp")
    psg = inferplan.throughput(network, profile)
    assert milp.interval == pytest.approx(psg.interval, rel=1e-6)


def test_only_methods_with_a_t_star_are_taken():
    net = inferplan.tiered(seed=1)
    with pytest.raises(InvalidArgument, match="does not compute T") as info:
        inferplan.throughput(net, inferplan.vgg16(), method="pwf")
    assert info.value.field == "method"
    with pytest.raises(InvalidArgument, match="unknown method"):
        inferplan.throughput(net, inferplan.vgg16(), method="nope")


def test_psg_t_star_on_a_cycle_points_at_the_milp():
    net = inferplan.network_from_dict(CYCLIC_NETWORK)
    with pytest.raises(NetworkHasCycle, match="method 'milp'"):
        inferplan.throughput(net, inferplan.vgg16())
    assert inferplan.throughput(net, inferplan.vgg16(), method="milp").interval > 0


@pytest.mark.parametrize("spread", [0, 60], ids=["realistic", "spread-60-decades"])
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_milp_t_star_equals_the_state_graph_on_wide_ranges(spread, data):
    """Capacities, bandwidths and prices over real-world ranges and 60 decades wider: delays
    are compared, never scaled, so T* is the state graph's to the bit (the earlier
    formulation, scaled to one unit, refused 55 of 60 such instances)."""
    inst, _ = data.draw(wide_range_instances(spread))
    assert throughput_milp(inst).interval == throughput_optimal(inst).interval
