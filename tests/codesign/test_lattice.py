"""T* by the lattice engine (reachability over the ideals, bisection on the interval) against
the all-pairs engine, the brute force over every chain of ideals and the chain planner."""

from __future__ import annotations

import importlib
import math
from unittest import mock

import numpy as np
import pytest
from hypothesis import assume, given, settings

from inferplan import Profile
from inferplan.codesign import compile_instance, throughput_optimal
from inferplan.codesign.engine.lattice import Lattice, lattice_throughput
from inferplan.codesign.engine.throughput import LATTICE_CUTS, lattice_engine
from inferplan.codesign.plan import build_deployment
from inferplan.codesign.stages import stage_units
from inferplan.network.io import network_from_dict
from inferplan.network.network import Network
from inferplan.profiles.graph import LayerGraph
from inferplan.profiles.ideals import graph_cuts
from inferplan.profiles.memory import graph_memory_need, graph_most_need, graph_pair_need

from ..oracles import graph_ideals
from ..strategies import layer_graphs, path_graph, small_dags, small_profiles
from .test_ideals import _brute, _repriced

# the module (the package's name `throughput` is provision's function)
throughput_module = importlib.import_module("inferplan.codesign.engine.throughput")


@settings(max_examples=60)
@given(network=small_dags(max_nodes=4), graph=layer_graphs(max_layers=10))
def test_lattice_tstar_equals_the_all_pairs_engine_and_the_brute_force(
    network: Network, graph: LayerGraph
) -> None:
    inst = compile_instance(network, Profile.from_graph("random", graph), cuts="graph")
    assume(inst.n_cuts <= 200)
    path, partition = lattice_throughput(inst, inst.capacity, inst.bandwidth)
    interval = build_deployment(inst, path, partition).interval
    dense = throughput_optimal(inst, engine="numpy")
    assert interval == dense.interval  # bit for bit
    _, least = _brute(network, graph, math.inf)
    assert interval == pytest.approx(least, rel=1e-12)
    names = tuple(inst.node_ids[v] for v in path)
    again = _repriced(network, graph, names, stage_units(inst, partition), {}, {})
    assert again == pytest.approx(interval, rel=1e-12)
    if not inst.cuts.is_chain:  # what "auto" runs: memory that never binds keeps it
        most = graph_most_need(inst.profile, inst.cuts)
        ample = inst.with_memory(np.full(len(inst.node_ids), most))
        with mock.patch.object(throughput_module, "LATTICE_CUTS", 0):  # "auto" takes it at any size
            assert lattice_engine("auto", ample, ample.memory)
            assert throughput_optimal(ample).interval == interval
        assert lattice_engine("auto", ample, ample.memory) == (inst.n_cuts > LATTICE_CUTS)


@settings(max_examples=30)
@given(network=small_dags(max_nodes=5), profile=small_profiles(max_blocks=6))
def test_lattice_tstar_on_a_path_graph_is_the_chain_planners(
    network: Network, profile: Profile
) -> None:
    graph = compile_instance(network, Profile.from_graph("path", path_graph(profile)),
                             cuts="graph")  # fmt: skip
    chain = throughput_optimal(compile_instance(network, profile, cuts="chain"))
    path, partition = lattice_throughput(graph, graph.capacity, graph.bandwidth)
    assert build_deployment(graph, path, partition).interval == chain.interval


def test_lattice_work_is_exact_beside_a_much_larger_layer() -> None:
    # 1e14 + 1e-3 FLOPs is no float: the lattice engine's works are then exact integers
    g = LayerGraph(("big", "tiny", "join"), flops=(1e14, 1e-3, 3.0), output_bits=(8.0,) * 3,
                   edges=(("input", "big"), ("input", "tiny"), ("big", "join"),
                          ("tiny", "join")), input_bits=8.0)  # fmt: skip
    net = network_from_dict({"source": "s", "target": "t",
                             "nodes": [{"id": "s", "capacity": 1e13, "price": 1.0},
                                       {"id": "t", "capacity": 1.0, "price": 1.0}],
                             "links": [{"source": "s", "target": "t", "capacity": 1e9,
                                        "price": 1.0}]})  # fmt: skip
    inst = compile_instance(net, Profile.from_graph("scales", g), cuts="graph")
    assert Lattice(inst).work_floats is None
    lattice, dense = throughput_optimal(inst), throughput_optimal(inst, engine="numpy")
    # big (and tiny: 10 + 1e-16 rounds to 10) on s, join on t; all on s takes 10 + 3e-13
    assert lattice.interval == dense.interval == 10.0
    assert lattice.layers[-1] in (("join",), ("tiny", "join"))


@settings(max_examples=40)
@given(graph=layer_graphs(max_layers=9))
def test_the_hasse_diagram_is_every_ideal_less_one_layer(graph: LayerGraph) -> None:
    cuts = graph_cuts(graph)
    found = [frozenset(cuts.units_between(0, k)) for k in range(cuts.n_cuts)]
    assert set(found) == set(graph_ideals(graph))
    lower, first = cuts.lower_covers
    for j, J in enumerate(found):
        expected = {i for i, inner in enumerate(found) if inner < J and len(J - inner) == 1}
        assert set(lower[first[j] : first[j + 1]].tolist()) == expected
    assert cuts.sizes.tolist() == [len(J) for J in found]
    profile = Profile.from_graph("random", graph)  # the needs of one pair, without the table
    table = graph_memory_need(profile, cuts)
    for i in range(cuts.n_cuts):
        for j in range(cuts.n_cuts):
            assert graph_pair_need(profile, cuts, i, j) == table[i, j]
    assert graph_most_need(profile, cuts) >= np.max(table, where=np.isfinite(table), initial=0)
