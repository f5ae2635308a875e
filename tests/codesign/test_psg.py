"""PSG and T* against the brute-force oracle, on many small random DAGs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import compile_instance, reference_psg, solve_psg, throughput_optimal
from tests.oracles import brute_force_cost, brute_force_interval, evaluate
from tests.strategies import small_dags, small_profiles

alphas = st.floats(min_value=0.05, max_value=1.5)


def _check_plan_is_honest(network, profile, plan, beta):
    """The plan meets the interval and costs what it reports, judged by the oracle."""
    assert plan.interval <= beta * (1 + 1e-9)
    priced = evaluate(network, profile, plan.path, plan.partition, beta)
    assert plan.cost == pytest.approx(priced.cost, rel=1e-9, abs=1e-12)
    nodes = {n.id: n for n in network.nodes}
    bought = sum(nodes[v].price * x for v, x in plan.node_upgrades.items())
    links = {(e.source, e.target): e for e in network.links}
    bought += sum(links[(u.source, u.target)].price * u.amount for u in plan.link_upgrades)
    assert plan.cost == pytest.approx(bought, rel=1e-9, abs=1e-12)
    assert all(x > 0 for x in plan.node_upgrades.values())
    assert all(u.amount > 0 for u in plan.link_upgrades)


@given(network=small_dags(), profile=small_profiles(), alpha=alphas)
def test_psg_equals_brute_force(network, profile, alpha):
    beta = alpha * brute_force_interval(network, profile)
    plan = inferplan.provision(network, profile, interval=beta)
    assert plan.cost == pytest.approx(brute_force_cost(network, profile, beta), rel=1e-9, abs=1e-12)
    _check_plan_is_honest(network, profile, plan, beta)


@given(network=small_dags(max_nodes=5), profile=small_profiles(max_blocks=4), alpha=alphas)
def test_reference_algorithm_equals_fast_psg(network, profile, alpha):
    inst = compile_instance(network, profile)
    beta = alpha * throughput_optimal(inst).interval
    assert reference_psg(inst, beta).cost == pytest.approx(
        solve_psg(inst, beta).cost, rel=1e-9, abs=1e-12
    )


@given(network=small_dags(), profile=small_profiles())
def test_throughput_equals_brute_force(network, profile):
    best = inferplan.throughput(network, profile)
    assert best.interval == pytest.approx(brute_force_interval(network, profile), rel=1e-12)
    priced = evaluate(network, profile, best.path, best.partition, math.inf)
    assert priced.interval == pytest.approx(best.interval, rel=1e-12)
    assert best.path[0] == network.source and best.path[-1] == network.target
    assert best.partition[-1] == profile.n_blocks
    assert list(best.partition) == sorted(best.partition)


@given(network=small_dags(), profile=small_profiles(), method=st.sampled_from(["pfp", "pwf"]),
       tie_break=st.sampled_from(["solver", "keep", "random"]), alpha=alphas)  # fmt: skip
def test_baselines_are_feasible_and_never_cheaper(network, profile, method, tie_break, alpha):
    beta = alpha * brute_force_interval(network, profile)
    plan = inferplan.provision(network, profile, interval=beta, method=method,
                               tie_break=tie_break)  # fmt: skip
    assert plan.interval <= beta * (1 + 1e-9)
    assert plan.cost >= brute_force_cost(network, profile, beta) * (1 - 1e-9) - 1e-12
    # Capacity is only ever added, and the plan pays exactly for what it lists.
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    bought = sum(nodes[v].price * x for v, x in plan.node_upgrades.items())
    bought += sum(links[(u.source, u.target)].price * u.amount for u in plan.link_upgrades)
    assert plan.cost == pytest.approx(bought, rel=1e-9, abs=1e-12)


@given(network=small_dags(), profile=small_profiles())
def test_no_cost_when_the_network_is_already_fast_enough(network, profile):
    beta = 1.01 * brute_force_interval(network, profile)
    all_priced = all(n.price > 0 for n in network.nodes) and all(e.price > 0 for e in network.links)
    for method in ("psg", "pfp", "pwf"):
        plan = inferplan.provision(network, profile, interval=beta, method=method)
        assert plan.cost == 0.0
        if all_priced or method != "psg":  # PSG may take capacity that costs nothing
            assert not plan.node_upgrades and not plan.link_upgrades


def test_pfp_buys_exactly_the_stage_shortfalls_of_the_throughput_optimal_deployment():
    net = inferplan.tiered(seed=11)
    vgg = inferplan.vgg16()
    best = inferplan.throughput(net, vgg)
    beta = 0.5 * best.interval
    plan = inferplan.provision(net, vgg, interval=beta, method="pfp")
    assert (plan.path, plan.partition) == (best.path, best.partition)
    assert plan.cost == pytest.approx(evaluate(net, vgg, best.path, best.partition, beta).cost)


def test_pwf_terminates_with_a_tiny_round_budget():
    net = inferplan.tiered(seed=5)
    res = inferplan.resnet50()
    inst = compile_instance(net, res)
    beta = 0.25 * throughput_optimal(inst).interval
    from inferplan.codesign import solve_pwf

    plan = solve_pwf(inst, beta, max_rounds=0)
    assert plan.interval <= beta * (1 + 1e-9)


@pytest.mark.parametrize("seed", range(6))
def test_paper_instances_psg_is_cheapest(seed):
    net = inferplan.tiered(seed=seed)
    for profile in (inferplan.vgg16(), inferplan.resnet50()):
        inst = compile_instance(net, profile)
        beta = 0.4 * throughput_optimal(inst).interval
        costs = {m: inferplan.provision(net, profile, interval=beta, method=m).cost
                 for m in ("psg", "pfp", "pwf")}  # fmt: skip
        assert costs["psg"] == pytest.approx(reference_psg(inst, beta).cost, rel=1e-9)
        assert costs["psg"] <= min(costs["pfp"], costs["pwf"]) * (1 + 1e-9)
        assert np.isfinite(list(costs.values())).all()
