"""The MILP against PSG on DAGs and against the brute force on networks with cycles."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import (
    compile_instance,
    reference_psg,
    solve_milp,
    solve_psg,
    throughput_optimal,
)
from inferplan.errors import Infeasible, InvalidArgument, NetworkHasCycle
from inferplan.network.costs import FunctionCost, TieredCost
from tests.oracles import brute_force_cost, brute_force_interval, evaluate
from tests.strategies import small_dags, small_networks, small_profiles

alphas = st.floats(min_value=0.05, max_value=1.5)
MILP_KINDS = ("linear", "capped", "modules")


def _milp_takes(inst) -> bool:
    """Whether every cost on the way from source to target has a linear form."""
    return all(
        not isinstance(c, TieredCost) or c.convex for c in (*inst.node_costs, *inst.link_costs)
    )


@settings(max_examples=60)
@given(data=st.data(), alpha=alphas, kinds=st.sampled_from([MILP_KINDS, ("tiers",)]))
def test_milp_equals_psg_on_dags(data, alpha, kinds):
    network = data.draw(small_dags(max_nodes=5, cost_kinds=kinds))
    profile = data.draw(small_profiles(max_blocks=4))
    inst = compile_instance(network, profile)
    beta = alpha * brute_force_interval(network, profile)
    if not _milp_takes(inst):
        with pytest.raises(InvalidArgument, match="convex tiered"):
            solve_milp(inst, beta)
        return
    try:
        expected = solve_psg(inst, beta).cost
    except Infeasible:
        with pytest.raises(Infeasible):
            solve_milp(inst, beta)
        return
    plan = solve_milp(inst, beta)
    assert plan.cost == pytest.approx(expected, rel=1e-6, abs=1e-9)
    assert plan.feasible


@settings(max_examples=80)
@given(
    network=small_networks(max_nodes=5, cost_kinds=MILP_KINDS),
    profile=small_profiles(max_blocks=3),
    alpha=alphas,
)
def test_milp_equals_brute_force_on_networks_with_cycles(network, profile, alpha):
    beta = alpha * brute_force_interval(network, profile)
    best = brute_force_cost(network, profile, beta)
    if math.isinf(best):
        with pytest.raises(Infeasible):
            inferplan.provision(network, profile, interval=beta, method="milp")
        return
    plan = inferplan.provision(network, profile, interval=beta, method="milp")
    assert plan.cost == pytest.approx(best, rel=1e-6, abs=1e-9)
    assert len(set(plan.path)) == len(plan.path)  # simple
    assert plan.path[0] == network.source and plan.path[-1] == network.target
    assert plan.cost == pytest.approx(
        evaluate(network, profile, plan.path, plan.partition, beta).cost, rel=1e-9, abs=1e-12
    )
    assert plan.feasible


def _ring() -> inferplan.Network:
    """s -> a <-> b -> t with a direct s -> b: a cycle on the way from s to t."""
    node = inferplan.Node
    link = inferplan.Link
    return inferplan.Network(
        nodes=(node("s", 1e9, 1e-9), node("a", 5e9, 1e-10), node("b", 2e9, 1e-9),
               node("t", 1e10, 1e-10)),
        links=(link("s", "a", 1e8, 1e-8), link("a", "b", 1e8, 1e-8), link("b", "a", 1e8, 1e-8),
               link("s", "b", 1e7, 1e-8), link("b", "t", 1e8, 1e-8)),
        source="s", target="t",
    )  # fmt: skip


def test_cyclic_networks_go_to_the_milp():
    net, vgg = _ring(), inferplan.vgg16()
    with pytest.raises(NetworkHasCycle, match="method 'milp'"):
        inferplan.provision(net, vgg, throughput=10.0)
    inst = compile_instance(net, vgg, require_acyclic=False)
    for solver in (solve_psg, reference_psg, lambda i, b: throughput_optimal(i)):
        with pytest.raises(NetworkHasCycle, match="use the MILP"):
            solver(inst, 0.1)
    plan = inferplan.provision(net, vgg, throughput=10.0, method="milp")
    assert plan.cost == pytest.approx(brute_force_cost(net, vgg, 0.1), rel=1e-6)
    assert plan.path in {("s", "a", "b", "t"), ("s", "b", "t")}


def test_milp_names_the_element_whose_cost_it_cannot_take():
    base = _ring()
    nodes = tuple(
        inferplan.Node(n.id, n.capacity, n.price, FunctionCost(lambda x: x**0.5, name="root"))
        if n.id == "b" else n
        for n in base.nodes
    )  # fmt: skip
    net = inferplan.Network(nodes, base.links, base.source, base.target)
    with pytest.raises(InvalidArgument, match=r"node 'b': .*not 'function'"):
        inferplan.provision(net, inferplan.vgg16(), throughput=10.0, method="milp")
