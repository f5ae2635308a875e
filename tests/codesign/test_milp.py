"""The MILP against PSG on DAGs and against the brute force on networks with cycles."""

from __future__ import annotations

import math
from unittest import mock

import numpy as np
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
from inferplan.codesign.milp import cost as milp
from inferplan.codesign.milp.cost import CERTIFIED_GAP
from inferplan.errors import Infeasible, InvalidArgument, NetworkHasCycle
from inferplan.network.costs import FunctionCost
from tests.oracles import brute_force_cost, brute_force_interval, evaluate
from tests.strategies import COST_KINDS, small_dags, small_networks, small_profiles

alphas = st.floats(min_value=0.05, max_value=1.5)


@settings(max_examples=60)
@given(data=st.data(), alpha=alphas, kind=st.sampled_from(COST_KINDS))
def test_milp_equals_psg_on_dags(data, alpha, kind):
    """Every cost kind: the MILP prices each transition with the element's own cost."""
    network = data.draw(small_dags(max_nodes=5, cost_kinds=(kind,)))
    profile = data.draw(small_profiles(max_blocks=4))
    inst = compile_instance(network, profile)
    beta = alpha * brute_force_interval(network, profile)
    try:
        expected = solve_psg(inst, beta).cost
    except Infeasible:
        with pytest.raises(Infeasible):
            solve_milp(inst, beta)
        return
    plan = solve_milp(inst, beta)
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(expected, rel=CERTIFIED_GAP, abs=1e-12)
    assert plan.feasible


@settings(max_examples=80)
@given(
    network=small_networks(max_nodes=5, cost_kinds=COST_KINDS),
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
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(best, rel=CERTIFIED_GAP, abs=1e-12)
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
    with pytest.raises(NetworkHasCycle, match="method 'milp' solves cyclic ones"):
        inferplan.provision(net, vgg, throughput=10.0)
    inst = compile_instance(net, vgg, require_acyclic=False)
    for solver in (solve_psg, reference_psg, lambda i, b: throughput_optimal(i)):
        with pytest.raises(NetworkHasCycle, match="use the MILP"):
            solver(inst, 0.1)
    plan = inferplan.provision(net, vgg, throughput=10.0, method="milp")
    assert plan.cost == pytest.approx(brute_force_cost(net, vgg, 0.1), rel=1e-6)
    assert plan.path in {("s", "a", "b", "t"), ("s", "b", "t")}


def test_milp_takes_any_cost_function():
    """A square-root cost (neither linear nor convex) on one node of the ring."""
    base = _ring()
    nodes = tuple(
        inferplan.Node(n.id, n.capacity, n.price,
                       FunctionCost(lambda x: 1e-4 * np.sqrt(x), name="root"))
        if n.id == "b" else n
        for n in base.nodes
    )  # fmt: skip
    net = inferplan.Network(nodes, base.links, base.source, base.target)
    plan = inferplan.provision(net, inferplan.vgg16(), throughput=10.0, method="milp")
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(brute_force_cost(net, inferplan.vgg16(), 0.1), rel=1e-9)


def _log_uniform(low: float, high: float) -> st.SearchStrategy[float]:
    """Floats spread evenly over the decades from ``low`` to ``high``."""
    return st.floats(math.log10(low), math.log10(high)).map(lambda e: 10.0**e)


@st.composite
def wide_range_instances(draw, spread: float):
    """A small random DAG with capacities around 1e6-1e15 FLOP/s, bandwidths 1e3-1e12 bit/s
    and prices 1e-15-1e-3 (some zero), each range widened by ``spread`` decades either way,
    and a profile of 1-4 blocks of 1e6-1e12 FLOPs; the target is ``alpha T*``."""
    widen = 10.0**spread
    n = draw(st.integers(min_value=2, max_value=5))
    ids = [f"n{k}" for k in range(n)]
    pairs = {(u, v) for u in range(n) for v in range(u + 1, n) if draw(st.booleans())}
    pairs |= {(k, k + 1) for k in range(n - 1)}  # a path through every node
    price = st.one_of(st.just(0.0), _log_uniform(1e-15 / widen, 1e-3 * widen))
    capacity = _log_uniform(1e6 / widen, 1e15 * widen)
    bandwidth = _log_uniform(1e3 / widen, 1e12 * widen)
    net = inferplan.Network(
        nodes=tuple(inferplan.Node(v, draw(capacity), draw(price)) for v in ids),
        links=tuple(inferplan.Link(ids[u], ids[v], draw(bandwidth), draw(price))
                    for u, v in sorted(pairs)),
        source=ids[0], target=ids[-1],
    )  # fmt: skip
    blocks = draw(st.integers(min_value=1, max_value=4))
    profile = inferplan.Profile(
        "wide",
        flops=tuple(draw(_log_uniform(1e6, 1e12)) for _ in range(blocks)),
        activation_bits=tuple(draw(_log_uniform(1e3, 1e9)) for _ in range(blocks + 1)),
    )
    inst = compile_instance(net, profile)
    beta = draw(st.floats(min_value=0.01, max_value=1.2)) * throughput_optimal(inst).interval
    return inst, beta


def _outcome(solver, inst, beta):
    try:
        return solver(inst, beta)
    except (Infeasible, InvalidArgument) as error:
        return type(error)


@pytest.mark.parametrize("spread", [0, 60], ids=["realistic", "spread-60-decades"])
@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_milp_equals_psg_on_wide_ranges_or_says_it_could_not_certify(spread, data):
    """Per-element magnitudes over many decades: the MILP's plan costs what PSG's optimum
    costs (to ``CERTIFIED_GAP``) when its status is "optimal", and never less in any case."""
    inst, beta = data.draw(wide_range_instances(spread))
    expected, plan = _outcome(solve_psg, inst, beta), _outcome(solve_milp, inst, beta)
    if isinstance(expected, type):
        assert plan is expected  # the same refusal: infeasible, or beyond floating point
        return
    assert not isinstance(plan, type), plan
    assert plan.status in ("optimal", "uncertified")
    assert plan.feasible
    assert plan.cost >= expected.cost * (1 - 1e-12)
    if plan.status == "optimal":
        assert plan.cost == pytest.approx(expected.cost, rel=CERTIFIED_GAP, abs=0.0)


def _stopped_by_the_clock(keep_solution: bool):
    """``linprog`` as HiGHS answers when its time limit strikes: status 1, with the best
    solution found so far or none."""
    real = milp.linprog

    def stopped(*args, **kwargs):
        result = real(*args, **kwargs)
        result.status = 1
        if not keep_solution:
            result.x = None
        return result

    return mock.patch.object(milp, "linprog", stopped)


def test_a_milp_stopped_by_its_time_limit_returns_its_best_plan_with_that_status():
    inst = compile_instance(_ring(), inferplan.vgg16(), require_acyclic=False)
    best = solve_milp(inst, 0.1)
    with _stopped_by_the_clock(keep_solution=True):
        plan = solve_milp(inst, 0.1, time_limit=5.0)
    assert plan.status == "time_limit"
    assert plan.cost == best.cost and plan.path == best.path and plan.feasible


def test_a_milp_that_finds_nothing_in_its_time_limit_says_so():
    inst = compile_instance(_ring(), inferplan.vgg16(), require_acyclic=False)
    with _stopped_by_the_clock(keep_solution=False), pytest.raises(InvalidArgument) as info:
        solve_milp(inst, 0.1, time_limit=5.0)
    assert info.value.field == "time_limit"
    assert "found no plan within 5 s" in str(info.value)


@pytest.mark.parametrize("limit", [0.0, -1.0, math.nan, math.inf])
def test_a_time_limit_must_be_a_positive_number_of_seconds(limit):
    inst = compile_instance(_ring(), inferplan.vgg16(), require_acyclic=False)
    with pytest.raises(InvalidArgument, match="positive finite number of seconds"):
        solve_milp(inst, 0.1, time_limit=limit)


def test_a_plan_whose_bound_stays_off_is_uncertified_not_optimal():
    """HiGHS's lower bound (here forced to 0) never meets the plan's exact cost: the MILP
    returns its best plan, re-solving no more than MAX_ROUNDS times, as "uncertified"."""
    inst = compile_instance(_ring(), inferplan.vgg16(), require_acyclic=False)
    best = solve_milp(inst, 0.1)
    real, calls = milp.linprog, []

    def loose(*args, **kwargs):
        result = real(*args, **kwargs)
        result.mip_dual_bound = 0.0
        calls.append(result)
        return result

    with mock.patch.object(milp, "linprog", loose):
        plan = solve_milp(inst, 0.1)
    assert best.status == "optimal" and best.cost > 0
    assert plan.status == "uncertified" and plan.cost == best.cost and plan.feasible
    assert 2 <= len(calls) <= milp.MAX_ROUNDS
