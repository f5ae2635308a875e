"""Joint provisioning's bounds against brute forces: the fast planner's lower bound (each
element's convex envelope over the most the services can need there) never above the optimum,
and the joint MILP under a latency bound with measured per-node times at the optimum."""

from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Infeasible, Profile
from inferplan.codesign.services.fast import split_bound
from inferplan.codesign.services.joint import JointProblem, Service, provision_services
from inferplan.codesign.timing import MeasuredBlocks
from tests.codesign.test_services import (
    _deployments,
    _loads,
    brute_force,
    joint_instances,
    measured_joint_instances,
)
from tests.oracles import BlockSeconds, _allocated, range_load

# -- the fast planner's lower bound ---------------------------------------------------------


def _falling_tiers_network() -> inferplan.Network:
    """``s -> t`` where only ``t`` is worth buying on: 3 per unit up to 10, then 1."""
    return inferplan.network_from_dict({
        "source": "s", "target": "t",
        "nodes": [{"id": "s", "capacity": 1e-9, "price": 1e6},
                  {"id": "t", "capacity": 1e-9,
                   "cost": {"kind": "tiers", "upto": [10.0], "price": [3.0, 1.0]}}],
        "links": [{"source": "s", "target": "t", "capacity": 1e12, "price": 0.0}],
    })  # fmt: skip


def test_the_bound_spans_the_whole_need_of_falling_tiers() -> None:
    """40 FLOP/s on ``t`` cost 3 x 10 + 30 = 60. The envelope of the falling tiers over the
    whole 40 is the line to (40, 60), so the bound is 60; over half the need it would be the
    line through (20, 40), 2 a unit, and bound the plan at 80, above its cost."""
    net = _falling_tiers_network()
    service = Service("a", Profile("m", (20.0, 20.0), (1.0, 1.0, 1.0)), "s", "t", interval=1.0)
    problem = JointProblem(net, [service], require_acyclic=False)
    optimum = brute_force(net, [service])
    assert optimum == pytest.approx(60.0, rel=1e-9)
    assert split_bound(problem) <= optimum * (1 + 1e-9)
    assert split_bound(problem) == pytest.approx(60.0, rel=1e-6)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joint_instances())
def test_the_split_bound_is_below_the_brute_force_optimum(case) -> None:
    """The bound itself, before the planner clips it at its plan's cost, and with each
    element bounded by its supporting line in turn."""
    net, services = case
    optimum = brute_force(net, services)
    problem = JointProblem(net, services, require_acyclic=True)
    if math.isinf(optimum):
        return
    V, E = len(net.nodes), len(net.links)
    for linearized in [(), *((k,) for k in range(V + E))]:
        try:
            bound = split_bound(problem, linearized)
        except Infeasible:
            pytest.fail("the bound says no plan exists where the brute force found one")
        assert bound <= optimum * (1 + 1e-9) + 1e-9, (linearized, bound, optimum)


# -- the joint MILP under a latency bound with per-node times -------------------------------


def _joint_latency_brute_force(
    net: inferplan.Network, services: list[Service], measured: dict[str, BlockSeconds], bounded: int
) -> float:
    """The least joint cost when service ``bounded`` alone has a latency bound: every
    combination of deployments, each element bought at least its summed need, and the bounded
    service's stages (load ``w`` taking ``w / (C + x)``, its measured seconds times the
    node's capacity on a measured node) allocated exactly within its bound less its links'
    delays (:func:`tests.oracles._allocated`); ``inf`` when none can be."""
    nodes = {n.id: n for n in net.nodes}
    links = {(e.source, e.target): e for e in net.links}
    chosen = services[bounded]
    assert chosen.latency is not None
    options = [list(_deployments(net, s.source, s.target, s.profile.n_blocks)) for s in services]
    best = math.inf
    for combo in itertools.product(*options):
        need: dict[object, float] = {}
        for s, (path, partition) in zip(services, combo, strict=True):
            for k, x in _loads(s.profile, path, partition, s.interval, net,
                               measured.get(s.name)).items():  # fmt: skip
                need[k] = need.get(k, 0.0) + x
        path, partition = combo[bounded]
        stages, propagation, prev, own = [], 0.0, 0, set()
        for k, v in enumerate(path):
            b = partition[k]
            node = nodes[v]
            work = range_load(net, chosen.profile, v, prev, b, measured.get(chosen.name))
            stages.append((work, node.capacity, max(0.0, need.get(v, 0.0) - node.capacity),
                           node.capacity_cost))  # fmt: skip
            own.add(v)
            if k + 1 < len(path):
                e = links[(v, path[k + 1])]
                bits = chosen.profile.activation_bits[b]
                key = (v, path[k + 1])
                stages.append((bits, e.capacity, max(0.0, need.get(key, 0.0) - e.capacity),
                               e.capacity_cost))  # fmt: skip
                propagation += e.delay_s
                own.add(key)
            prev = b
        rest = 0.0
        for key, x in need.items():
            if key in own:
                continue
            item = links[key] if isinstance(key, tuple) else nodes[key]
            excess = max(0.0, x - item.capacity)
            if excess > 0:
                rest += float(item.capacity_cost(np.array([excess]))[0])
        if rest >= best:
            continue
        best = min(best, rest + _allocated(stages, chosen.latency - propagation, best - rest))
    return best


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(measured_joint_instances(), st.data())
def test_the_joint_milp_under_a_latency_bound_with_measured_times_is_the_brute_force(
    case, data
) -> None:
    net, services, measured = case
    combos = math.prod(
        len(list(_deployments(net, s.source, s.target, s.profile.n_blocks))) for s in services
    )
    assume(combos <= 400)
    try:
        free = provision_services(net, services, method="milp")
    except Infeasible:
        return
    bounded = data.draw(st.integers(0, len(services) - 1))
    served = free.services[bounded]
    assume(served.latency is not None and served.latency > 0)
    shrink = data.draw(st.floats(0.3, 1.0))
    services = [dataclasses.replace(s, latency=shrink * served.latency) if k == bounded else s
                for k, s in enumerate(services)]  # fmt: skip
    expected = _joint_latency_brute_force(net, services, measured, bounded)
    try:
        plan = provision_services(net, services, method="milp")
    except Infeasible:
        assert math.isinf(expected)
        return
    assert math.isfinite(expected)
    assert plan.cost == pytest.approx(expected, rel=1e-6, abs=1e-9)
    latency = plan.services[bounded].latency
    assert latency is not None and latency <= services[bounded].latency * (1 + 1e-9)
    assert isinstance(services[bounded].node_time, MeasuredBlocks)
