"""Flow plans (many pipelines at once) against a brute force over every layout, an LP each;
under the default loads and under measured block times (each node its own loads)."""

from __future__ import annotations

import math
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import OptimizeResult

import inferplan
from inferplan import Link, Network, Node, Profile
from inferplan.codesign import compile_instance
from inferplan.codesign.pipelines import flow
from inferplan.codesign.pipelines.flow import flow_provision, flow_throughput
from inferplan.codesign.pipelines.result import FlowPlan
from inferplan.codesign.timing import MeasuredBlocks
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import FunctionCost, LinearCost
from tests.oracles import (
    BlockSeconds,
    brute_force_flow,
    brute_force_flow_cost,
    brute_force_interval,
    range_load,
)
from tests.strategies import small_dags, small_networks, small_profiles

PRICED = ("linear", "capped", "modules")


def _instance(network: Network, profile: Profile, measured: BlockSeconds | None = None):  # type: ignore[no-untyped-def]
    """The flow planners' instance: cycles allowed, ``measured`` block times when given."""
    if measured is None:
        return compile_instance(network, profile, require_acyclic=False)
    return compile_instance(network, profile, require_acyclic=False,
                            node_time=MeasuredBlocks.of(measured))  # fmt: skip


def _check_plan(plan: FlowPlan, network: Network, profile: Profile,
                measured: BlockSeconds | None = None) -> None:  # fmt: skip
    """What every flow plan must satisfy, from the definitions: its pipelines are paths of the
    network whose rates sum to its rate, each node's stage is the range the layout gives it,
    each node's load is its range's load (FLOPs, or ``measured`` seconds times its capacity)
    times the rate through it, and no node or link carries more than its capacity after the
    upgrades."""
    links = {(e.source, e.target) for e in network.links}
    N = profile.n_blocks
    assert math.isclose(sum(p.rate for p in plan.pipelines), plan.throughput, rel_tol=1e-9)
    computed: dict[str, float] = {}
    for p in plan.pipelines:
        assert p.rate > 0
        assert p.path[0] == network.source and p.path[-1] == network.target
        assert all((u, v) in links for u, v in zip(p.path, p.path[1:], strict=False))
        assert p.partition[-1] == N and list(p.partition) == sorted(p.partition)
        done = 0
        for v, b in zip(p.path, p.partition, strict=True):
            if b > done:
                assert plan.layout[v] == (done, b)
                computed[v] = computed.get(v, 0.0) + p.rate
            done = b
    nodes = {n.id: n for n in network.nodes}
    loads = {x.id: x for x in plan.loads if x.kind == "node"}
    for v, rate in computed.items():
        want = rate * range_load(network, profile, v, *plan.layout[v], measured)
        added = loads[v].added if v in loads else 0.0
        assert want <= (nodes[v].capacity + added) * (1 + 1e-6)
        if want > 0:
            assert loads[v].load == pytest.approx(want, rel=1e-6)
    for load in plan.loads:
        assert load.headroom >= -1e-6 * max(load.capacity, 1.0)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), small=st.booleans())
def test_largest_flow_equals_brute_force(data, small):
    """Networks with cycles; every layout's LP against the MILP."""
    nodes, blocks = (3, 3) if small else (4, 2)
    network = data.draw(small_networks(max_nodes=nodes))
    profile = data.draw(small_profiles(max_blocks=blocks))
    plan = flow_throughput(_instance(network, profile))
    expected = brute_force_flow(network, profile)
    assert plan.status == "optimal"
    assert math.isclose(plan.throughput, expected, rel_tol=1e-6)
    _check_plan(plan, network, profile)


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_flow_is_at_least_one_path(data):
    """One pipeline is a flow plan: the flow's rate is at least the one path's ``1 / T*``."""
    network = data.draw(small_dags(max_nodes=5))
    profile = data.draw(small_profiles(max_blocks=3))
    plan = flow_throughput(_instance(network, profile))
    assert plan.throughput >= (1 - 1e-7) / brute_force_interval(network, profile)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), alpha=st.floats(min_value=0.3, max_value=3.0),
       kind=st.sampled_from(PRICED), small=st.booleans())  # fmt: skip
def test_flow_provision_equals_brute_force(data, alpha, kind, small):
    """Linear, capped and module costs: the least cost of every layout's LP (module counts
    integral) against the MILP; where no layout reaches the rate, both say so."""
    nodes, blocks = (3, 3) if small else (4, 2)
    network = data.draw(small_networks(max_nodes=nodes, cost_kinds=(kind,)))
    profile = data.draw(small_profiles(max_blocks=blocks))
    _provision_is_the_brute_force(network, profile, alpha)


def _provision_is_the_brute_force(network: Network, profile: Profile, alpha: float,
                                  measured: BlockSeconds | None = None) -> None:  # fmt: skip
    """Flow provisioning of ``alpha`` times the largest flow against the brute force (both
    under ``measured`` block times when given)."""
    rate = alpha * brute_force_flow(network, profile, measured)
    expected = brute_force_flow_cost(network, profile, rate, measured)
    inst = _instance(network, profile, measured)
    if math.isinf(expected):
        with pytest.raises(Infeasible, match=r"allow (at most|no flow at all)"):
            flow_provision(inst, rate)
        return
    plan = flow_provision(inst, rate)
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(expected, rel=1e-6, abs=1e-7)
    assert plan.throughput == rate
    _check_plan(plan, network, profile, measured)


SECONDS = st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=50.0, allow_nan=False))


@st.composite
def measured_flows(
    draw: st.DrawFn, kind: str | None = None
) -> tuple[Network, Profile, BlockSeconds]:
    """A small network (cycles allowed), a chain and seconds per block on some nodes (zero
    too: a block a node's accelerator makes free)."""
    nodes, blocks = (3, 3) if draw(st.booleans()) else (4, 2)
    kinds = None if kind is None else (kind,)
    network = draw(small_networks(max_nodes=nodes, cost_kinds=kinds))
    profile = draw(small_profiles(max_blocks=blocks))
    measured = {n.id: [draw(SECONDS) for _ in range(profile.n_blocks)]
                for n in network.nodes if draw(st.booleans())}  # fmt: skip
    return network, profile, measured


@settings(max_examples=30, deadline=None)
@given(case=measured_flows())
def test_the_largest_flow_under_measured_times_is_the_brute_force_optimum(case):
    """Per-node loads: each node's load of a range is its measured seconds times its
    capacity, computed by the brute force from the times themselves."""
    network, profile, measured = case
    plan = flow_throughput(_instance(network, profile, measured))
    assert plan.status == "optimal"
    expected = brute_force_flow(network, profile, measured)
    assert plan.throughput == pytest.approx(expected, rel=1e-6)
    _check_plan(plan, network, profile, measured)


@settings(max_examples=30, deadline=None)
@given(data=st.data(), alpha=st.floats(min_value=0.3, max_value=3.0),
       kind=st.sampled_from(PRICED))  # fmt: skip
def test_flow_provisioning_under_measured_times_is_the_brute_force_optimum(data, alpha, kind):
    network, profile, measured = data.draw(measured_flows(kind))
    _provision_is_the_brute_force(network, profile, alpha, measured)


def test_a_slow_measured_node_carries_less_of_the_flow():
    """On a compute-bound model, measuring the busiest node of the default flow plan 100
    times slower than its FLOPs over its capacity lowers the largest flow."""
    network = inferplan.load_network("examples/network.json")
    profile = Profile("heavy", flops=(1e12,) * 3, activation_bits=(1e3,) * 4)
    plain = flow_throughput(_instance(network, profile))
    busiest = max((x for x in plain.loads if x.kind == "node"), key=lambda x: x.load / x.capacity)
    capacity = next(n.capacity for n in network.nodes if n.id == busiest.id)
    slow = {busiest.id: [100 * f / capacity for f in profile.flops]}
    plan = flow_throughput(_instance(network, profile, slow))
    assert plan.throughput < plain.throughput * (1 - 1e-6)
    _check_plan(plan, network, profile, slow)


def test_measuring_every_node_at_its_flops_over_capacity_gives_the_default_flow():
    network, profile = inferplan.load_network("examples/network.json"), inferplan.mlp(64, 3)
    same = {n.id: [f / n.capacity for f in profile.flops] for n in network.nodes}
    plain = _instance(network, profile)
    rate = flow_throughput(plain).throughput
    timed = _instance(network, profile, same)
    assert flow_throughput(timed).throughput == pytest.approx(rate, rel=1e-9)
    assert flow_provision(timed, 2 * rate).cost == pytest.approx(
        flow_provision(plain, 2 * rate).cost, rel=1e-6)  # fmt: skip


@settings(max_examples=25, deadline=None)
@given(data=st.data(), alpha=st.floats(min_value=0.3, max_value=3.0),
       kind=st.sampled_from(PRICED))  # fmt: skip
def test_flows_without_rounding_equal_brute_force(data, alpha, kind):
    """The full MILPs alone (no layout rounded from the relaxation, as when no rounding meets
    the relaxation's bound) against the brute force."""
    network = data.draw(small_networks(max_nodes=3, cost_kinds=(kind,)))
    profile = data.draw(small_profiles(max_blocks=3))
    most = brute_force_flow(network, profile)
    rate = alpha * most
    expected = brute_force_flow_cost(network, profile, rate)
    inst = _instance(network, profile)
    with patch.object(flow, "_roundings", lambda *args: []):
        assert flow_throughput(inst).throughput == pytest.approx(most, rel=1e-6)
        if math.isinf(expected):
            with pytest.raises(Infeasible):
                flow_provision(inst, rate)
            return
        plan = flow_provision(inst, rate)
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(expected, rel=1e-6, abs=1e-7)
    _check_plan(plan, network, profile)


def _priced_two_ways() -> Network:
    priced = {"s": 100.0, "a": 1.0, "b": 2.0, "t": 100.0}
    nodes = tuple(Node(v, 1.0, cost=LinearCost(p)) for v, p in priced.items())
    pairs = (("s", "a"), ("s", "b"), ("a", "t"), ("b", "t"))
    links = tuple(Link(u, v, 10.0, cost=LinearCost(1.0)) for u, v in pairs)
    return Network(nodes=nodes, links=links, source="s", target="t")


def test_a_rounding_short_of_the_bound_leaves_the_full_milp_to_decide():
    """A rounding where only the target computes (at 100 per FLOP/s added, a and b at 1 and
    2) costs more than the relaxation's bound, so the full MILP runs, and its plan is the
    brute force's."""
    network = _priced_two_ways()
    rate = 2 * brute_force_flow(network, PROFILE)
    expected = brute_force_flow_cost(network, PROFILE, rate)
    inst = _instance(network, PROFILE)
    spoilt, solves = flow._roundings, []
    inner = flow.highs

    def only_the_target(c, relaxed, N):  # type: ignore[no-untyped-def]
        assert spoilt(c, relaxed, N)  # the real roundings exist; replace them by one
        whole = (np.asarray(c.rv) == inst.target) & (np.asarray(c.ra) == 0)
        return [whole.astype(float)]

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        bounds = kwargs["bounds"]
        solves.append(int(np.sum(bounds[:, 0] < bounds[:, 1])))
        return inner(*args, **kwargs)

    with patch.object(flow, "_roundings", only_the_target), patch.object(flow, "highs", counted):
        plan = flow_provision(inst, rate)
    assert len(solves) == 3  # the relaxation, the rounding, the full MILP
    assert plan.status == "optimal"
    assert plan.cost == pytest.approx(expected, rel=1e-6)
    _check_plan(plan, network, PROFILE)


def test_the_full_milp_out_of_time_leaves_the_rounding_with_the_relaxations_bound():
    """When no rounding meets the bound and the full MILP finds nothing in time, the best
    rounding is the plan, ``time_limit``, with the relaxation's bound and the gap between."""
    network = _priced_two_ways()
    inst = _instance(network, PROFILE)
    rate = 2 * brute_force_flow(network, PROFILE)
    inner, calls = flow.highs, []

    def only_the_target(c, relaxed, N):  # type: ignore[no-untyped-def]
        return [((np.asarray(c.rv) == inst.target) & (np.asarray(c.ra) == 0)).astype(float)]

    def out_of_time(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(1)  # the relaxation, the rounding, then the full MILP
        if len(calls) == 3:
            return OptimizeResult(x=None, status=1, message="time limit")
        return inner(*args, **kwargs)

    rounded, timed = patch.object(flow, "_roundings", only_the_target), patch.object(
        flow, "highs", out_of_time)
    with rounded, timed:
        plan = flow_provision(inst, rate)
    assert len(calls) == 3
    best = flow_provision(inst, rate)
    assert best.cost == pytest.approx(brute_force_flow_cost(network, PROFILE, rate), rel=1e-6)
    assert plan.status == "time_limit"
    assert best.cost < plan.cost  # the rounding is dearer than the optimum ...
    assert plan.bound <= best.cost * (1 + 1e-9)  # ... and the bound below it
    assert math.isfinite(plan.bound) and plan.gap == pytest.approx(1 - plan.bound / plan.cost)
    _check_plan(plan, network, PROFILE)


def _two_ways(cost: object = None) -> Network:
    nodes = (Node("s", 1.0, 1.0), Node("a", 2.0, 1.0, cost), Node("b", 2.0, 2.0),  # type: ignore[arg-type]
             Node("t", 1.0))  # fmt: skip
    pairs = (("s", "a"), ("s", "b"), ("a", "t"), ("b", "t"))
    links = tuple(Link(u, v, 10.0, 1.0) for u, v in pairs)
    return Network(nodes=nodes, links=links, source="s", target="t")


PROFILE = Profile("p", flops=(4.0, 4.0), activation_bits=(1.0, 1.0, 1.0))


def test_two_equal_nodes_carry_twice_one_path():
    """Two equal parallel nodes: twice what one path carries, split over both."""
    network = _two_ways()
    one = inferplan.throughput(network, PROFILE).throughput
    plan = flow_throughput(_instance(network, PROFILE))
    assert plan.throughput > 1.5 * one
    assert {p.path[1] for p in plan.pipelines} == {"a", "b"}
    assert plan.bottleneck  # the saturated cut
    json = plan.to_dict()
    assert json["layout"] and sum(p["rate"] for p in json["pipelines"]) == pytest.approx(
        json["throughput"])


def test_bad_input_is_refused():
    inst = _instance(_two_ways(), PROFILE)
    with pytest.raises(InvalidArgument, match="throughput"):
        flow_provision(inst, -1.0)
    with pytest.raises(InvalidArgument, match="time_limit"):
        flow_throughput(inst, time_limit=0.0)
    odd = _instance(_two_ways(FunctionCost(lambda x: x**0.5, name="sqrt")), PROFILE)
    with pytest.raises(InvalidArgument, match="function"):
        flow_provision(odd, 10.0)


def test_beyond_caps_says_what_they_allow():
    """Every element may add 1 at most: 2 FLOP/s run the 8 FLOPs at 0.25/s on one node, on
    both at 0.5/s; the link (2 bit/s at most) carries 2/s."""
    cap = LinearCost(1.0, 1.0)
    capped = Network(nodes=(Node("s", 1.0, cost=cap), Node("t", 1.0, cost=cap)),
                     links=(Link("s", "t", 1.0, cost=cap),), source="s", target="t")  # fmt: skip
    with pytest.raises(Infeasible, match=r"allow at most 0\.5 "):
        flow_provision(_instance(capped, PROFILE), 100.0)


def test_a_link_crossed_at_two_states_has_its_row():
    """Regression (hypothesis seed 5): the link n2->n3 carries at most F max_j D_j = 1.19 bit/s
    at one state, under its 1.22, so it had no row; but a flow may cross it at j = 0 and again
    at j = 2 (n3 -> n2 -> n3), which the MILP then did for free and the purchase read back from
    the loads priced at 1.50. No upgrade is needed: n1 (the target) runs both blocks."""
    free = LinearCost(0.0)
    nodes = (
        Node("n0", 68.99683432202744, cost=free),
        Node("n1", 26.470237323613432, cost=LinearCost(0.33531166433587173)),
        Node("n2", 13.8012336236971, cost=LinearCost(1.861357892777191)),
        Node("n3", 92.85668984202299, cost=free),
    )
    links = (Link("n0", "n2", 1.0, cost=LinearCost(6.081744433725193)),
             Link("n1", "n3", 89.78698172451935, cost=LinearCost(5.5490987710924005)),
             Link("n2", "n3", 1.2194153792584193, cost=LinearCost(2.1399575847208974)),
             Link("n3", "n1", 99.99999999999999, cost=free),
             Link("n3", "n2", 87.46445969353772, cost=free))  # fmt: skip
    network = Network(nodes=nodes, links=links, source="n0", target="n1")
    profile = Profile("p", flops=(45.51093846719133, 197.61018579168436),
                      activation_bits=(105.30257281242025, 154.67035903915126,
                                       144.01018594784267))  # fmt: skip
    rate = 0.00770618972238463
    assert brute_force_flow_cost(network, profile, rate) == 0.0
    plan = flow_provision(_instance(network, profile), rate)
    assert plan.status == "optimal" and plan.cost == 0.0
    assert all(load.added == 0.0 for load in plan.loads)
    _check_plan(plan, network, profile)



def _there_and_back(cap: float) -> Network:
    """Each block weighs 100 bytes and u and w hold one each (s and t none); block 2 is too
    much work for w, so w runs block 1 and u block 2, and w is behind u: the one route is
    s -> u -> w (block 1) -> u (block 2) -> w -> t, which crosses u->w at j = 0 and j = 2."""
    fixed = LinearCost(1.0, 0.0)
    nodes = (
        Node("s", 1.0, cost=fixed, memory=0.0),
        Node("u", 10.0, cost=fixed, memory=150.0),
        Node("w", 1.0, cost=fixed, memory=150.0),
        Node("t", 1.0, cost=fixed, memory=0.0),
    )
    links = (Link("s", "u", 100.0), Link("u", "w", 4.0, cost=LinearCost(1.0, cap)),
             Link("w", "u", 100.0), Link("w", "t", 100.0))  # fmt: skip
    return Network(nodes=nodes, links=links, source="s", target="t")


THERE_AND_BACK = Profile("p", flops=(1.0, 10.0), activation_bits=(2.0, 1.0, 3.0),
                         params=(100, 100), bytes_per_param=1.0)  # fmt: skip


def test_a_flow_may_cross_a_link_twice():
    """At 1 inference/s u->w carries D_0 + D_2 = 5 bit/s, though no single state weighs more
    than its 4: one bit/s must be bought, and under a cap of 0.5 no plan exists."""
    network = _there_and_back(2.0)  # (the brute force knows no memory: worked by hand)
    plan = flow_provision(_instance(network, THERE_AND_BACK), 1.0)
    assert plan.cost == pytest.approx(1.0)
    assert plan.layout == {"w": (0, 1), "u": (1, 2)}
    assert [p.path for p in plan.pipelines] == [("s", "u", "w", "u", "w", "t")]
    _check_plan(plan, network, THERE_AND_BACK)
    capped = _there_and_back(0.5)
    with pytest.raises(Infeasible, match="allow at most"):
        flow_provision(_instance(capped, THERE_AND_BACK), 1.0)


def test_flow_t_star_out_of_time_with_only_the_empty_flow_asks_for_more_time():
    """At the time limit the empty flow (always feasible) proves nothing: the answer is a
    one-line request for more time, never 'every path lacks capacity'."""
    network, profile = inferplan.load_network("examples/network.json"), inferplan.mlp(64, 3)
    inst = _instance(network, profile)
    assert flow_throughput(inst).throughput > 0  # a flow exists: "lacks capacity" would be wrong

    def nothing_in_time(model, balance, rhs, time_limit, *rest):  # type: ignore[no-untyped-def]
        return 1, np.zeros(len(model.objective)), 0.0, "time limit reached"

    with patch.object(flow, "_solve", nothing_in_time), pytest.raises(
        InvalidArgument, match=r"found no flow above 0 within 5 s; give it more time"
    ) as info:
        flow_throughput(inst, time_limit=5.0)
    assert info.value.field == "time_limit"
