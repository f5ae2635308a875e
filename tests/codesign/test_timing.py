"""The node time seam: an instance compiled from another node time model is what every
planner reads, checked against a brute force over every deployment under that model."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.arrays import FloatArray
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.engine.throughput import lattice_engine
from inferplan.codesign.timing import FLOPS_OVER_CAPACITY, NodeTimeModel
from inferplan.profiles.ideals import Cuts


@dataclass(frozen=True)
class Slower:
    """Every stage ``factor`` times slower than its FLOPs over capacity."""

    factor: float

    @property
    def additive(self) -> bool:
        return False

    def work_table(self, cuts: Cuts) -> FloatArray:
        table: FloatArray = cuts.work_between * self.factor
        return table

    def work(self, cuts: Cuts, i: int, j: int) -> float:
        return cuts.work(i, j) * self.factor


def _interval(net: inferplan.Network, prof: inferplan.Profile, factor: float,
              path: tuple[str, ...], partition: tuple[int, ...]) -> float:
    """The slowest stage of a deployment, from the network and the profile alone: compute
    ``factor * flops / capacity`` on each node, activations over each link."""
    nodes = {n.id: n for n in net.nodes}
    links = {(e.source, e.target): e for e in net.links}
    prefix = np.concatenate(([0.0], np.cumsum(prof.flops)))
    bits = prof.activation_bits
    worst, done = 0.0, 0
    for k, v in enumerate(path):
        worst = max(worst, factor * (prefix[partition[k]] - prefix[done]) / nodes[v].capacity)
        done = partition[k]
        if k + 1 < len(path):
            worst = max(worst, bits[done] / links[(v, path[k + 1])].capacity)
    return worst


def _brute_force(net: inferplan.Network, prof: inferplan.Profile, factor: float) -> float:
    """T* under the slower model: every simple path, every monotone partition."""
    n = prof.n_blocks
    best = np.inf
    for path in nx.all_simple_paths(net.graph, net.source, net.target):
        for inner in itertools.combinations_with_replacement(range(n + 1), len(path) - 1):
            partition = (*inner, n)
            best = min(best, _interval(net, prof, factor, tuple(path), partition))
    return float(best)


def test_the_default_model_is_flops_over_capacity():
    net, prof = inferplan.load_network("examples/network.json"), inferplan.vgg16()
    inst = compile_instance(net, prof)
    assert isinstance(FLOPS_OVER_CAPACITY, NodeTimeModel) and inst.node_time is FLOPS_OVER_CAPACITY
    assert inst.work(0, inst.last_cut) == prof.total_flops


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), factor=st.sampled_from([0.5, 1.0, 30.0, 1e3, 1e5]),
       depth=st.integers(2, 5))
def test_t_star_and_psg_read_the_node_time_model(seed, factor, depth):
    net, prof = inferplan.tiered(seed=seed), inferplan.mlp(1024, depth)
    slow = compile_instance(net, prof, node_time=Slower(factor))
    best = throughput_optimal(slow)
    want = _brute_force(net, prof, factor)
    assert best.interval == pytest.approx(want, rel=1e-9)
    assert _interval(net, prof, factor, best.path, best.partition) == pytest.approx(want, rel=1e-9)
    plan = solve_psg(slow, best.interval)  # at T* nothing needs buying under the same model
    assert plan.cost == pytest.approx(0.0, abs=1e-9)


def test_a_model_that_is_no_flops_difference_keeps_off_the_lattice_engine():
    prof = inferplan.vgg16()
    inst = compile_instance(inferplan.tiered(seed=0), prof, node_time=Slower(1.0))
    assert not lattice_engine("auto", inst, inst.memory)
