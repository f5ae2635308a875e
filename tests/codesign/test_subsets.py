"""PSG's subset step (the comparable pairs of ideals, no table of pairs) against the all-pairs
engine, the brute force over every chain of ideals, and the planners' choice of it past the
ideals the tables hold."""

from __future__ import annotations

import itertools
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Profile
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.engine import subsets
from inferplan.codesign.engine.psg import psg_path
from inferplan.codesign.engine.subsets import subset_engine, subset_fits, subset_refusal
from inferplan.codesign.memory import fits_somewhere, most_memory
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import ModuleCost
from inferplan.network.network import Link, Network, Node
from inferplan.profiles import ideals
from inferplan.profiles.graph import LayerGraph

from ..oracles import evaluate_graph, graph_deployments, graph_memory_cost
from ..strategies import layer_graphs, small_dags, with_memory

MAX_CHAINS = 20_000


def _most(graph: LayerGraph) -> float:
    """More bytes than any transition of ``graph`` needs (4-byte parameters)."""
    return 4.0 * sum(graph.params) + sum(graph.output_bits) / 4.0 + graph.input_bits / 8.0


def _outcome(inst, beta, engine):  # type: ignore[no-untyped-def]
    try:
        return psg_path(inst, beta, engine=engine)
    except Infeasible as error:
        return type(error)


@settings(max_examples=80, deadline=None)
@given(data=st.data(), graph=layer_graphs(max_layers=10, branches=None),
       factor=st.floats(min_value=0.1, max_value=1.2), memory=st.booleans())  # fmt: skip
def test_the_subset_step_equals_the_all_pairs_engine(
    data: st.DataObject, graph: LayerGraph, factor: float, memory: bool
) -> None:
    network = data.draw(small_dags(max_nodes=4, cost_kinds=("linear", "capped")))
    if memory:
        network = data.draw(with_memory(network, _most(graph), ("limit", "price")))
    inst = compile_instance(network, Profile.from_graph("random", graph), cuts="graph")
    assume(not inst.cuts.is_chain and inst.n_cuts <= 300)
    assert subset_refusal(inst) is None
    assert subset_engine("compiled", inst) and not subset_engine("numpy", inst)
    beta = factor * throughput_optimal(inst, memory=np.full(len(inst.node_ids), np.inf)).interval
    # linear and capped costs: the same cost, path, partition and links, bit for bit
    assert _outcome(inst, beta, "compiled") == _outcome(inst, beta, "numpy")
    most = most_memory(inst)
    assert subset_fits(inst, most) == fits_somewhere(inst, most)
    assert subset_fits(inst, inst.memory) == fits_somewhere(inst, inst.memory)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), graph=layer_graphs(max_layers=8),
       factor=st.floats(min_value=0.2, max_value=1.2))  # fmt: skip
def test_the_subset_step_equals_the_brute_force(
    data: st.DataObject, graph: LayerGraph, factor: float
) -> None:
    network = data.draw(small_dags(max_nodes=4, cost_kinds=("linear", "capped", "tiers")))
    network = data.draw(with_memory(network, _most(graph), ("limit", "price")))
    inst = compile_instance(network, Profile.from_graph("random", graph), cuts="graph")
    assume(not inst.cuts.is_chain and inst.n_cuts <= 100)
    deployments = list(graph_deployments(network, graph))
    assume(len(deployments) <= MAX_CHAINS)
    fastest = min(evaluate_graph(network, graph, p, c, math.inf).interval for p, c in deployments)
    beta = factor * fastest
    best = math.inf
    for path, chain in deployments:
        cost = evaluate_graph(network, graph, path, chain, beta).cost
        best = min(best, cost + graph_memory_cost(network, graph, path, chain))
    if math.isinf(best):
        with pytest.raises(Infeasible):
            solve_psg(inst, beta, engine="compiled")
        return
    plan = solve_psg(inst, beta, engine="compiled")
    assert plan.cost == pytest.approx(best, rel=1e-7, abs=1e-9)
    assert all(m.memory is None or m.need <= m.memory * (1 + 1e-9) for m in plan.memory)


def two_stack(layers: int) -> Profile:
    """An encoder and a decoder stack, ``d_k`` reading ``d_(k-1)`` and ``e_k``: ``(L + 1)(L +
    2) / 2`` ideals; uneven FLOPs and parameters."""
    names = [f"e{k}" for k in range(1, layers + 1)] + [f"d{k}" for k in range(1, layers + 1)]
    edges = [("input", "e1"), ("input", "d1")]
    for k in range(1, layers + 1):
        if k > 1:
            edges += [(f"e{k - 1}", f"e{k}"), (f"d{k - 1}", f"d{k}")]
        edges.append((f"e{k}", f"d{k}"))
    flops = tuple(1e9 * (1 + (7 * k) % 5) for k in range(len(names)))
    params = tuple(1_000_000 * (1 + (3 * k) % 4) for k in range(len(names)))
    graph = LayerGraph(tuple(names), flops, (8e6,) * len(names), tuple(edges), input_bits=8e6,
                       params=params)  # fmt: skip
    return Profile.from_graph(f"two-stack-{layers}", graph)


def _chain(memory: float | None = None) -> Network:
    ids = [f"w{k}" for k in range(4)]
    nodes = tuple(Node(v, 2e10 + 1e10 * k, 1e-9, memory=memory, memory_price=1e-6)
                  for k, v in enumerate(ids))  # fmt: skip
    links = tuple(Link(u, v, 1e9, 1e-9) for u, v in itertools.pairwise(ids))
    return Network(nodes=nodes, links=links, source=ids[0], target=ids[-1])


@pytest.mark.parametrize("memory", [None, 2e7])
def test_provision_runs_the_subset_step_past_the_ideals_the_tables_hold(
    memory: float | None,
) -> None:
    profile, net = two_stack(15), _chain(memory)  # 136 ideals
    beta = 0.5 * inferplan.throughput(_chain(), profile, cuts="graph").interval
    dense = inferplan.provision(net, profile, interval=beta, cuts="graph")  # the all-pairs step
    step = subsets.SubsetStep.step
    with (mock.patch.object(ideals, "MAX_STATE_CUTS", 100),
          mock.patch.object(subsets.SubsetStep, "step", autospec=True,
                            side_effect=step) as spy):  # fmt: skip
        plan = inferplan.provision(net, profile, interval=beta)  # default cuts: the graph's
        assert spy.called
        with pytest.raises(InvalidArgument, match="more than this planner holds"):  # tables
            compile_instance(net, profile, cuts="graph").work_between  # noqa: B018
    assert plan.cuts == "graph" and plan.status == "optimal"
    assert plan.cost == dense.cost and plan.partition == dense.partition
    assert plan.path == dense.path
    if memory is not None:
        assert any(m.added > 0 for m in plan.memory)  # memory binds: some is bought


def test_past_the_tables_a_cost_the_subset_step_cannot_price_is_refused() -> None:
    profile = two_stack(15)
    net = _chain()
    nodes = (net.nodes[0], Node("w1", 3e10, 1e-9, ModuleCost(1e9, 1.0)), *net.nodes[2:])
    net = Network(nodes=nodes, links=net.links, source=net.source, target=net.target)
    inst = compile_instance(net, profile, cuts="graph")
    assert subset_refusal(inst) is not None
    with (mock.patch.object(ideals, "MAX_STATE_CUTS", 100),
          pytest.raises(InvalidArgument, match="piecewise-linear")):  # fmt: skip
        solve_psg(inst, 1.0)
