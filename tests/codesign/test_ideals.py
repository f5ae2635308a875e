"""Planners on the ideals of a layer graph: PSG, T*, the MILP and the baselines against a brute
force over every chain of ideals; plans re-priced from scratch; path graphs against chains."""

from __future__ import annotations

import math

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from inferplan import Profile
from inferplan.codesign import compile_instance, solve_milp, solve_psg, throughput_optimal
from inferplan.codesign.heuristics import solve_pfp, solve_pwf
from inferplan.codesign.psg import reference_psg
from inferplan.codesign.throughput_milp import throughput_milp
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.io import network_from_dict
from inferplan.network.network import Network
from inferplan.profiles import ideals
from inferplan.profiles.graph import LayerGraph
from inferplan.profiles.ideals import graph_cuts

from ..oracles import boundary_bits, evaluate_graph, graph_deployments, graph_ideals
from ..strategies import layer_graphs, path_graph, small_dags, small_profiles

# Brute force enumerates every chain of ideals along every path: keep both small.
MAX_CHAINS = 20_000


def _brute(network: Network, graph: LayerGraph, beta: float) -> tuple[float, float]:
    """Least cost for ``beta`` and least interval, over every deployment."""
    best_cost, best_interval = math.inf, math.inf
    for seen, (path, chain) in enumerate(graph_deployments(network, graph)):
        assume(seen < MAX_CHAINS)
        found = evaluate_graph(network, graph, path, chain, beta)
        best_interval = min(best_interval, evaluate_graph(network, graph, path, chain,
                                                          math.inf).interval)  # fmt: skip
        best_cost = min(best_cost, found.cost)
    return best_cost, best_interval


def _repriced(network: Network, graph: LayerGraph, plan_path: tuple[str, ...],
              layers: tuple[tuple[str, ...], ...], node_up: dict[str, float],
              link_up: dict[tuple[str, str], float]) -> float:  # fmt: skip
    """The interval of a plan read only from its path, its stages' layers and its upgrades."""
    flops = dict(zip(graph.layers, graph.flops, strict=True))
    reads = {v: {u for u, w in graph.edges if w == v and u != "input"} for v in graph.layers}
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    done: frozenset[str] = frozenset()
    interval = 0.0
    for k, (v, names) in enumerate(zip(plan_path, layers, strict=True)):
        assert not done & set(names), "a layer runs twice"
        for name in names:  # every layer a stage runs reads only what is done or its own
            assert reads[name] <= done | set(names)
        done = done | set(names)
        work = math.fsum(flops[x] for x in names)
        interval = max(interval, work / (nodes[v].capacity + node_up.get(v, 0.0)))
        if k + 1 < len(plan_path):
            e = (v, plan_path[k + 1])
            interval = max(interval, boundary_bits(graph, done) /
                           (links[e].capacity + link_up.get(e, 0.0)))  # fmt: skip
    assert done == set(graph.layers), "every layer runs"
    return interval


@settings(max_examples=40)
@given(graph=layer_graphs(max_layers=10))
def test_ideals_are_the_down_closed_sets_with_their_work_and_boundary(graph: LayerGraph) -> None:
    cuts = graph_cuts(graph)
    expected = graph_ideals(graph)
    found = [frozenset(cuts.units_between(0, k)) for k in range(cuts.n_cuts)]
    assert sorted(found, key=sorted) == sorted(expected, key=sorted)
    assert len(set(found)) == len(found)
    flops = dict(zip(graph.layers, graph.flops, strict=True))
    for j, J in enumerate(found):
        assert cuts.bits[j] == boundary_bits(graph, J)
        for i, inner in enumerate(found):
            if inner <= J:
                assert i <= j  # an ideal inside another comes first
                assert cuts.work_between[i, j] == math.fsum(flops[x] for x in J - inner)
            else:
                assert cuts.work_between[i, j] == math.inf


@settings(max_examples=60)
@given(
    network=small_dags(max_nodes=4),
    graph=layer_graphs(max_layers=10),
    factor=st.floats(min_value=0.1, max_value=1.2),
)
def test_psg_tstar_and_milp_equal_the_brute_force_on_layer_graphs(
    network: Network, graph: LayerGraph, factor: float
) -> None:
    profile = Profile.from_graph("random", graph)
    inst = compile_instance(network, profile, cuts="graph")
    assume(inst.n_cuts <= 200)
    best = throughput_optimal(inst)
    beta = factor * best.interval
    cost, interval = _brute(network, graph, beta)
    assert best.interval == pytest.approx(interval, rel=1e-12)
    assert throughput_milp(inst).interval == pytest.approx(interval, rel=1e-9)
    ups = {}
    for plan in (solve_psg(inst, beta), reference_psg(inst, beta), solve_milp(inst, beta)):
        assert plan.cost == pytest.approx(cost, rel=1e-7, abs=1e-9)
        ups[plan.method] = plan
    for plan in (*ups.values(), _or_none(solve_pfp, inst, beta), _or_none(solve_pwf, inst, beta)):
        if plan is None:
            continue
        assert plan.cost >= cost * (1 - 1e-9) - 1e-9
        again = _repriced(network, graph, plan.path, plan.layers, dict(plan.node_upgrades),
                          {(u.source, u.target): u.amount for u in plan.link_upgrades})  # fmt: skip
        assert again == pytest.approx(plan.interval, rel=1e-12)
        assert plan.feasible


def _or_none(solver, inst, beta):  # type: ignore[no-untyped-def]
    try:
        return solver(inst, beta)
    except Infeasible:
        return None


@settings(max_examples=60)
@given(
    network=small_dags(max_nodes=5),
    profile=small_profiles(max_blocks=6),
    factor=st.floats(min_value=0.1, max_value=1.2),
    engine=st.sampled_from(["numpy", "auto"]),
)
def test_a_path_graph_plans_as_its_chain(
    network: Network, profile: Profile, factor: float, engine: str
) -> None:
    graphed = Profile.from_graph("path", path_graph(profile))
    chain = compile_instance(network, profile, cuts="chain")
    graph = compile_instance(network, graphed, cuts="graph")
    assert graph.cuts.kind == "graph" and graph.cuts.is_chain
    assert (graph.work_between == chain.work_between).all()
    assert (graph.activation_bits == chain.activation_bits).all()
    a, b = throughput_optimal(chain, engine=engine), throughput_optimal(graph, engine=engine)
    assert (a.interval, a.path, a.partition) == (b.interval, b.path, b.partition)
    beta = factor * a.interval
    for solver in (solve_psg, solve_milp, solve_pfp, solve_pwf):
        p, q = solver(chain, beta), solver(graph, beta)
        assert (p.cost, p.interval, p.path, p.partition) == (q.cost, q.interval, q.path,
                                                             q.partition)  # fmt: skip
        assert [len(x) for x in p.layers] == [len(x) for x in q.layers]


@settings(max_examples=30)
@given(network=small_dags(max_nodes=4), graph=layer_graphs(max_layers=8))
def test_graph_cuts_never_plan_worse_than_the_chain(network: Network, graph: LayerGraph) -> None:
    profile = Profile.from_graph("random", graph)
    chain = throughput_optimal(compile_instance(network, profile, cuts="chain"))
    best = throughput_optimal(compile_instance(network, profile, cuts="graph"))
    assert best.interval <= chain.interval


def test_the_default_cuts_and_the_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    g = LayerGraph(tuple(f"l{k}" for k in range(8)), flops=(1.0,) * 8, output_bits=(8.0,) * 8,
                   edges=tuple(("input", f"l{k}") for k in range(8)), input_bits=8.0)  # fmt: skip
    profile = Profile.from_graph("wide", g)  # 2**8 = 256 ideals
    net = network_from_dict({"source": "s", "target": "t",
                             "nodes": [{"id": "s", "capacity": 1.0, "price": 1.0},
                                       {"id": "t", "capacity": 1.0, "price": 1.0}],
                             "links": [{"source": "s", "target": "t", "capacity": 1.0,
                                        "price": 1.0}]})  # fmt: skip
    assert compile_instance(net, profile).cuts.kind == "graph"
    assert compile_instance(net, profile, max_ideals=100).cuts.kind == "chain"
    with pytest.raises(InvalidArgument, match="more than 100 ideals") as err:
        compile_instance(net, profile, cuts="graph", max_ideals=100)
    assert err.value.field == "max_ideals"
    monkeypatch.setattr(ideals, "MAX_STATE_CUTS", 100)
    assert compile_instance(net, profile).cuts.kind == "chain"
    with pytest.raises(InvalidArgument, match="256 cuts are more than the planners hold") as err:
        compile_instance(net, profile, cuts="graph")
    assert err.value.field == "cuts"
    with pytest.raises(InvalidArgument, match="no layer graph"):
        compile_instance(net, Profile("p", (1.0,), (1.0, 1.0)), cuts="graph")
