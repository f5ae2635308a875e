"""Node memory in every co-design planner, against independent brute force."""

from __future__ import annotations

import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferplan import Link, Network, Node, Profile
from inferplan.codesign import compile_instance, solve_milp, solve_psg, throughput_optimal
from inferplan.codesign.engine.psg import reference_psg
from inferplan.errors import Infeasible
from tests.codesign.test_services import _deployments, _loads, _price
from tests.oracles import (
    brute_force_cost,
    brute_force_fitting_interval,
    brute_force_memory_cost,
    memory_cost,
    memory_need,
)
from tests.strategies import (
    COST_KINDS,
    profiles_with_params,
    small_dags,
    small_networks,
    with_memory,
)


def _most(profile: Profile) -> float:
    """Somewhat more than the whole model needs on one node."""
    return 1.2 * memory_need(profile, 0, profile.n_blocks)


@st.composite
def memory_instances(draw: st.DrawFn, cyclic: bool = False) -> tuple[Network, Profile, float]:
    profile = draw(profiles_with_params(max_blocks=4))
    kinds = draw(st.one_of(st.none(), st.just(COST_KINDS)))
    plain = draw(small_networks(4, kinds) if cyclic else small_dags(5, kinds))
    network = draw(with_memory(plain, _most(profile)))
    beta = draw(st.floats(min_value=0.05, max_value=5.0))
    return network, profile, beta


def _close(a: float, b: float) -> bool:
    return (math.isinf(a) and math.isinf(b)) or math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9)


def _psg_cost(inst: object, beta: float, engine: str) -> float:
    try:
        return solve_psg(inst, beta, engine=engine).cost  # type: ignore[arg-type]
    except Infeasible:
        return math.inf


def _fits(network: Network, profile: Profile, plan: object) -> None:
    """The plan, re-priced from scratch, fits every path node's memory after its upgrades."""
    bought = plan.memory_upgrades  # type: ignore[attr-defined]
    done = (0, *plan.partition[:-1])  # type: ignore[attr-defined]
    for v, a, b, row in zip(plan.path, done, plan.partition, plan.memory, strict=True):  # type: ignore[attr-defined]
        node = network.node_by_id[v]
        need = memory_need(profile, a, b)
        assert math.isclose(row.need, need, rel_tol=1e-12)
        if node.memory is not None:
            assert need <= (node.memory + bought.get(v, 0.0)) * (1 + 1e-9)


@settings(max_examples=120, deadline=None)
@given(memory_instances())
def test_psg_with_memory_equals_brute_force_in_both_engines(case):
    network, profile, beta = case
    inst = compile_instance(network, profile)
    want = brute_force_memory_cost(network, profile, beta)
    for engine in ("numpy", "compiled"):
        got = _psg_cost(inst, beta, engine)
        assert _close(got, want), (engine, got, want)
    if math.isfinite(want):
        plan = solve_psg(inst, beta)
        _fits(network, profile, plan)
        assert plan.feasible
        priced = memory_cost(network, profile, plan.path, plan.partition)
        assert priced <= plan.cost * (1 + 1e-9) + 1e-12
        assert _close(reference_psg(inst, beta).cost, want)


@settings(max_examples=60, deadline=None)
@given(memory_instances(cyclic=True))
def test_milp_with_memory_equals_brute_force_on_any_network(case):
    network, profile, beta = case
    inst = compile_instance(network, profile, require_acyclic=False)
    want = brute_force_memory_cost(network, profile, beta)
    try:
        plan = solve_milp(inst, beta)
    except Infeasible:
        assert math.isinf(want)
        return
    assert _close(plan.cost, want), (plan.cost, want)
    _fits(network, profile, plan)


@settings(max_examples=60, deadline=None)
@given(memory_instances())
def test_throughput_among_deployments_that_fit_equals_brute_force(case):
    network, profile, _ = case
    inst = compile_instance(network, profile)
    want = brute_force_fitting_interval(network, profile)
    for engine in ("numpy", "compiled"):
        try:
            got = throughput_optimal(inst, engine=engine).interval
        except Infeasible:
            got = math.inf
        assert _close(got, want), (engine, got, want)


@settings(max_examples=40, deadline=None)
@given(small_dags(5, None), profiles_with_params(4), st.floats(0.05, 5.0))
def test_without_memory_every_answer_is_as_before(network, profile, beta):
    """No node memory: no extra term, and enough memory everywhere changes nothing."""
    inst = compile_instance(network, profile)
    assert inst.terms.empty
    roomy = Network(
        nodes=[Node(n.id, n.capacity, n.price, n.cost, memory=_most(profile))
               for n in network.nodes],
        links=network.links, source=network.source, target=network.target,
    )  # fmt: skip
    roomy_inst = compile_instance(roomy, profile)
    assert roomy_inst.terms.empty
    for engine in ("numpy", "compiled"):
        plain, same = (
            solve_psg(inst, beta, engine=engine),
            solve_psg(roomy_inst, beta, engine=engine),
        )
        assert (plain.cost, plain.path, plain.partition) == (same.cost, same.path, same.partition)
        assert _close(plain.cost, brute_force_cost(network, profile, beta))
        assert plain.memory_upgrades == {}
        t_plain, t_same = (
            throughput_optimal(inst, engine=engine),
            throughput_optimal(roomy_inst, engine=engine),
        )
        assert (t_plain.interval, t_plain.path) == (t_same.interval, t_same.path)


def test_a_node_too_small_for_any_block_makes_the_plan_infeasible_naming_the_need():
    profile = Profile("p", flops=(1e9, 1e9), activation_bits=(800.0, 800.0, 80.0),
                      params=(1000, 10))  # fmt: skip
    nodes = [Node("s", 1e9, 1e-9, memory=500.0), Node("t", 1e9, 1e-9, memory=500.0)]
    network = Network(nodes, [Link("s", "t", 1e6, 1e-6)], "s", "t")
    inst = compile_instance(network, profile)
    with pytest.raises(Infeasible, match=r"block 'block1' alone needs 4\.2 kB"):
        solve_psg(inst, 1.0)
    with pytest.raises(Infeasible, match="no deployment fits"):
        throughput_optimal(inst)
    # memory for sale: the plan buys what the first block needs on one node
    cheap = Network(
        [Node("s", 1e9, 1e-9, memory=500.0, memory_price=1e-3), Node("t", 1e9, 1e-9, memory=500.0)],
        [Link("s", "t", 1e6, 1e-6)],
        "s",
        "t",
    )
    plan = solve_psg(compile_instance(cheap, profile), 10.0)
    assert plan.memory_upgrades == {"s": pytest.approx(4200.0 - 500.0)}  # block 1 on s


@settings(max_examples=40, deadline=None)
@given(memory_instances(), st.sampled_from(["pfp", "pwf"]), st.sampled_from(["solver", "random"]))
def test_baselines_plan_deployments_that_fit_and_buy_their_memory(case, method, tie_break):
    from inferplan.codesign import solve_pfp, solve_pwf

    network, profile, beta = case
    inst = compile_instance(network, profile)
    solver = solve_pfp if method == "pfp" else solve_pwf
    try:
        plan = solver(inst, beta, tie_break=tie_break, seed=1)
    except Infeasible:
        return  # a cap the baseline's deployment needs beyond (as without memory)
    _fits(network, profile, plan)
    assert plan.feasible
    assert plan.cost >= brute_force_memory_cost(network, profile, beta) * (1 - 1e-9) - 1e-12
    # it bought exactly what its deployment needs beyond each node's memory
    done = (0, *plan.partition[:-1])
    for v, a, b in zip(plan.path, done, plan.partition, strict=True):
        node = network.node_by_id[v]
        short = 0.0 if node.memory is None else memory_need(profile, a, b) - node.memory
        bought = plan.memory_upgrades.get(v, 0.0)
        assert bought >= short * (1 - 1e-9) and (short > 0 or bought == 0)


def _joint_brute_force(network: Network, services: list) -> float:
    """The least joint cost with memory: each node's needs summed over the services there."""
    options = []
    for s in services:
        options.append([])
        for p, b in _deployments(network, s.source, s.target, s.profile.n_blocks):
            held = {v: memory_need(s.profile, a, c) for v, a, c in zip(p, (0, *b[:-1]), b,
                                                                        strict=True)}  # fmt: skip
            options[-1].append((_loads(s.profile, p, b, s.interval), held))
    nodes = network.node_by_id
    best = math.inf
    for combo in itertools.product(*options):
        need: dict[object, float] = {}
        held: dict[str, float] = {}
        for loads, mine in combo:
            for k, x in loads.items():
                need[k] = need.get(k, 0.0) + x
            for v, x in mine.items():
                held[v] = held.get(v, 0.0) + x
        total = _price(network, need)
        for v, x in held.items():
            node = nodes[v]
            short = x - (math.inf if node.memory is None else node.memory)
            if short > 0:
                total += float(node.memory_capacity_cost(np.array([short]))[0])
        best = min(best, total)
    return best


@st.composite
def joint_memory_instances(draw: st.DrawFn, acyclic: bool = True):
    from inferplan.codesign.services.joint import Service

    kinds = ("linear", "capped", "modules", "tiers")
    S = draw(st.integers(min_value=1, max_value=2))
    net = draw(small_dags(4, kinds) if acyclic else small_networks(3, kinds))
    graph = net.graph
    pairs = sorted((u, v) for u in graph for v in nx.descendants(graph, u))
    services = []
    for k in range(S):
        source, target = draw(st.sampled_from(pairs))
        profile = draw(profiles_with_params(max_blocks=2))
        services.append(Service(f"s{k}", profile, source, target,
                                interval=draw(st.floats(0.5, 10.0))))  # fmt: skip
    most = sum(_most(s.profile) for s in services)
    return draw(with_memory(net, most, ("limit", "price", *kinds))), services


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_services_share_node_memory_in_the_joint_milp_and_the_fast_planner(data):
    from inferplan.codesign.services.joint import provision_services

    cyclic = data.draw(st.booleans())
    network, services = data.draw(joint_memory_instances(acyclic=not cyclic))
    optimum = _joint_brute_force(network, services)
    methods = ("milp",) if cyclic else ("milp", "fast")
    if math.isinf(optimum):
        for method in methods:
            with pytest.raises(Infeasible):
                provision_services(network, services, method=method)
        return
    exact = provision_services(network, services, method="milp")
    assert exact.cost == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    plans = [exact]
    try:
        if cyclic:
            raise Infeasible("the fast planner takes acyclic networks")
        fast = provision_services(network, services, method="fast")
        assert fast.cost >= optimum * (1 - 1e-9) - 1e-12
        assert fast.lower_bound <= optimum * (1 + 1e-9) + 1e-12
        plans.append(fast)
    except Infeasible:
        pass  # the fast planner may miss a plan; it says so (tests/codesign/test_services.py)
    for plan in plans:  # every node holds what all its services need there
        for v, held in plan.memory_loads.items():
            node = network.node_by_id[v]
            if node.memory is not None:
                assert held <= (node.memory + plan.memory_upgrades.get(v, 0.0)) * (1 + 1e-9)


@settings(max_examples=15, deadline=None)
@given(memory_instances())
def test_the_frontier_prices_memory_at_every_rate(case):
    from inferplan.codesign import cost_frontier

    network, profile, _ = case
    inst = compile_instance(network, profile)
    try:
        front = cost_frontier(inst, points=4)
    except Infeasible:  # nothing fits even with all the memory the nodes can buy
        assert math.isinf(brute_force_memory_cost(network, profile, 1e9))
        return
    for point in front.points:
        want = brute_force_memory_cost(network, profile, 1.0 / point.throughput)
        assert _close(point.cost, want), (point, want)
