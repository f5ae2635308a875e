"""Flow plans under per-node time models (measured seconds per block) against a brute force
over every layout that computes each node's load from the measured times itself."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import compile_instance
from inferplan.codesign.pipelines.flow import flow_provision, flow_throughput
from inferplan.codesign.pipelines.result import FlowPlan
from inferplan.codesign.timing import MeasuredBlocks
from inferplan.errors import Infeasible
from tests.oracles import BlockSeconds, brute_force_flow, brute_force_flow_cost, range_load
from tests.strategies import small_networks, small_profiles

SECONDS = st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=50.0, allow_nan=False))


@st.composite
def measured_flows(
    draw: st.DrawFn, kind: str | None = None
) -> tuple[inferplan.Network, inferplan.Profile, BlockSeconds]:
    """A small network (cycles allowed), a chain and seconds per block on some nodes."""
    small = draw(st.booleans())
    nodes, blocks = (3, 3) if small else (4, 2)
    kinds = None if kind is None else (kind,)
    net = draw(small_networks(max_nodes=nodes, cost_kinds=kinds))
    prof = draw(small_profiles(max_blocks=blocks))
    measured = {n.id: [draw(SECONDS) for _ in range(prof.n_blocks)]
                for n in net.nodes if draw(st.booleans())}  # fmt: skip
    return net, prof, measured


def _instance(net: inferplan.Network, prof: inferplan.Profile, measured: BlockSeconds):  # type: ignore[no-untyped-def]
    return compile_instance(net, prof, require_acyclic=False,
                            node_time=MeasuredBlocks.of(measured))  # fmt: skip


def _check_loads(plan: FlowPlan, net: inferplan.Network, prof: inferplan.Profile,
                 measured: BlockSeconds) -> None:  # fmt: skip
    """Each node's load is its range's measured load times the rate through it, within its
    capacity after the upgrades."""
    through: dict[str, float] = {}
    for p in plan.pipelines:
        done = 0
        for v, b in zip(p.path, p.partition, strict=True):
            if b > done:
                assert plan.layout[v] == (done, b)
                through[v] = through.get(v, 0.0) + p.rate
            done = b
    loads = {x.id: x for x in plan.loads if x.kind == "node"}
    for v, rate in through.items():
        want = rate * range_load(net, prof, v, *plan.layout[v], measured)
        if want > 0:
            assert loads[v].load == pytest.approx(want, rel=1e-6)
            assert want <= loads[v].capacity * (1 + 1e-6)


@settings(max_examples=30, deadline=None)
@given(case=measured_flows())
def test_the_largest_flow_under_measured_times_is_the_brute_force_optimum(case):
    net, prof, measured = case
    plan = flow_throughput(_instance(net, prof, measured))
    assert plan.status == "optimal"
    assert plan.throughput == pytest.approx(brute_force_flow(net, prof, measured), rel=1e-6)
    _check_loads(plan, net, prof, measured)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), alpha=st.floats(min_value=0.3, max_value=3.0),
       kind=st.sampled_from(("linear", "capped", "modules")))  # fmt: skip
def test_flow_provisioning_under_measured_times_is_the_brute_force_optimum(data, alpha, kind):
    net, prof, measured = data.draw(measured_flows(kind))
    rate = alpha * brute_force_flow(net, prof, measured)
    expected = brute_force_flow_cost(net, prof, rate, measured)
    inst = _instance(net, prof, measured)
    if math.isinf(expected):
        with pytest.raises(Infeasible):
            flow_provision(inst, rate)
        return
    plan = flow_provision(inst, rate)
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(expected, rel=1e-6, abs=1e-7)
    _check_loads(plan, net, prof, measured)


def test_a_slow_measured_node_carries_less_of_the_flow():
    """On a compute-bound model, measuring the busiest node of the default flow plan 100
    times slower than its FLOPs over its capacity lowers the largest flow."""
    net = inferplan.load_network("examples/network.json")
    prof = inferplan.Profile("heavy", flops=(1e12,) * 3, activation_bits=(1e3,) * 4)
    plain = flow_throughput(compile_instance(net, prof, require_acyclic=False))
    busiest = max((x for x in plain.loads if x.kind == "node"), key=lambda x: x.load / x.capacity)
    capacity = next(n.capacity for n in net.nodes if n.id == busiest.id)
    slow = {busiest.id: [100 * f / capacity for f in prof.flops]}
    plan = flow_throughput(_instance(net, prof, slow))
    assert plan.throughput < plain.throughput * (1 - 1e-6)
    _check_loads(plan, net, prof, slow)


def test_measuring_every_node_at_its_flops_over_capacity_gives_the_default_flow():
    net = inferplan.load_network("examples/network.json")
    prof = inferplan.mlp(64, 3)
    same = {n.id: [f / n.capacity for f in prof.flops] for n in net.nodes}
    plain = compile_instance(net, prof, require_acyclic=False)
    rate = flow_throughput(plain).throughput
    assert flow_throughput(_instance(net, prof, same)).throughput == pytest.approx(rate, rel=1e-9)
    assert flow_provision(_instance(net, prof, same), 2 * rate).cost == pytest.approx(
        flow_provision(plain, 2 * rate).cost, rel=1e-6)  # fmt: skip
