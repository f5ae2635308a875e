"""Joint provisioning of several services against an independent brute force: every simple
path and every partition of every service, loads summed and priced from the definitions."""

from __future__ import annotations

import dataclasses
import itertools
import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Infeasible, InvalidArgument, Network, Profile
from inferplan.codesign.services.joint import Service, provision_services
from inferplan.codesign.timing import MeasuredBlocks
from tests.oracles import BlockSeconds, range_load, stage_times_at_caps
from tests.strategies import small_dags, small_networks, small_profiles

KINDS = ("linear", "capped", "modules", "tiers")


def _deployments(network: Network, source: str, target: str, n_blocks: int):
    graph = nx.DiGraph()
    graph.add_nodes_from(n.id for n in network.nodes)
    graph.add_edges_from((e.source, e.target) for e in network.links)
    for path in nx.all_simple_paths(graph, source, target):
        for inner in itertools.combinations_with_replacement(range(n_blocks + 1), len(path) - 1):
            yield tuple(path), (*inner, n_blocks)


def _loads(profile: Profile, path, partition, beta, network: Network | None = None,
           measured: BlockSeconds | None = None):  # fmt: skip
    """Per element, the rate one deployment needs: FLOPs of its blocks / beta (or, on a node
    ``measured`` times, their seconds times its capacity / beta), bits / beta."""
    need: dict[object, float] = {}
    prev = 0
    for k, v in enumerate(path):
        b = partition[k]
        if b > prev:
            work = (math.fsum(profile.flops[prev:b]) if network is None
                    else range_load(network, profile, v, prev, b, measured))  # fmt: skip
            if work > 0:  # a stage measured free loads nothing
                need[v] = need.get(v, 0.0) + work / beta
        if k + 1 < len(path):
            need[(v, path[k + 1])] = profile.activation_bits[b] / beta
        prev = b
    return need


def _price(network: Network, need: dict[object, float]) -> float:
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    total = 0.0
    for element, x in need.items():
        item = links[element] if isinstance(element, tuple) else nodes[element]
        excess = max(0.0, x - item.capacity)
        if excess > 0:
            total += float(item.capacity_cost(np.array([excess]))[0])
    return total


def brute_force(network: Network, services: list[Service],
                measured: dict[str, BlockSeconds] | None = None) -> float:  # fmt: skip
    """The least joint cost over every combination of deployments (``inf``: none within caps);
    ``measured``: each service's seconds per block on some nodes, by service name."""
    times = measured or {}
    options = [
        [_loads(s.profile, p, b, s.interval, network, times.get(s.name))
         for p, b in _deployments(network, s.source, s.target, s.profile.n_blocks)]
        for s in services
    ]  # fmt: skip
    best = math.inf
    for combo in itertools.product(*options):
        need: dict[object, float] = {}
        for loads in combo:
            for k, x in loads.items():
                need[k] = need.get(k, 0.0) + x
        best = min(best, _price(network, need))
    return best


@st.composite
def joint_instances(draw: st.DrawFn, acyclic: bool = True):
    S = draw(st.integers(min_value=1, max_value=3))
    most = 5 if S < 3 else 4
    net = draw(small_dags(max_nodes=most, cost_kinds=KINDS) if acyclic
               else small_networks(max_nodes=4, cost_kinds=KINDS))  # fmt: skip
    graph = net.graph
    pairs = [(u, v) for u in graph for v in nx.descendants(graph, u)]
    services = []
    for k in range(S):
        source, target = draw(st.sampled_from(sorted(pairs)))
        profile = draw(small_profiles(max_blocks=2 if S == 3 else 3))
        beta = draw(st.floats(min_value=0.5, max_value=10.0))
        services.append(Service(f"s{k}", profile, source, target, interval=beta))
    return net, services


def _check_plan(net: Network, services: list[Service], plan,
                measured: dict[str, BlockSeconds] | None = None) -> None:  # fmt: skip
    """The plan's loads and intervals from the definitions."""
    need: dict[object, float] = {}
    times = measured or {}
    for s, d in zip(services, plan.services, strict=True):
        assert d.name == s.name and d.path[0] == s.source and d.path[-1] == s.target
        assert len(set(d.path)) == len(d.path)
        assert d.interval <= s.interval * (1 + 1e-9)
        for k, x in _loads(s.profile, d.path, d.partition, s.interval, net,
                           times.get(s.name)).items():  # fmt: skip
            need[k] = need.get(k, 0.0) + x
    assert plan.cost == pytest.approx(_price(net, need), rel=1e-9, abs=1e-12)
    loads = {**plan.node_loads, **plan.link_loads}
    assert set(loads) == set(need)
    for k, x in need.items():
        assert loads[k] == pytest.approx(x, rel=1e-9)


def _check_caps_said(net: Network, services: list[Service], error: Infeasible, *,
                     proven: bool) -> None:  # fmt: skip
    """What an infeasible joint answer says of each service alone, against a brute force of
    its best interval with every element at its cap: the services that miss their interval
    even so are named with it, and when none does, the caps they share are said to bind."""
    said = error.details["services"]
    assert [d["name"] for d in said] == [s.name for s in services]
    every_one_fits = True
    for service, d in zip(services, said, strict=True):
        best = min(
            max(stage_times_at_caps(net, service.profile, p, b).values())
            for p, b in _deployments(net, service.source, service.target,
                                     service.profile.n_blocks)
        )  # fmt: skip
        if d["best_interval"] is None:  # not even the caps fit its memory
            every_one_fits = False
            assert f"service {service.name!r} does not fit in memory" in str(error)
            continue
        if d["binding"]:
            assert d["best_interval"] == pytest.approx(best, rel=1e-9)
            path, partition = d["at_caps"]["path"], d["at_caps"]["partition"]
            slow = stage_times_at_caps(net, service.profile, path, partition)
            assert {(b["kind"], b["id"]) for b in d["binding"]} == {
                k for k, t in slow.items() if t >= best * (1 - 1e-9)
            }
        else:  # only uncapped elements on the best path
            assert d["best_interval"] == 0.0
        alone = f"service {service.name!r} alone: the caps allow at best {best:.4g} s"
        if d["best_interval"] > service.interval * (1 + 1e-9):
            every_one_fits = False
            assert alone in str(error), str(error)
        else:
            assert f"service {service.name!r} alone" not in str(error), str(error)
    shared = "each service alone meets its interval within the caps"
    assert (shared in str(error)) == every_one_fits, str(error)
    assert ("the caps they share bind" in str(error)) == (every_one_fits and proven)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joint_instances())
def test_milp_and_fast_against_brute_force(case) -> None:
    net, services = case
    optimum = brute_force(net, services)
    if math.isinf(optimum):
        for method in ("milp", "fast"):
            with pytest.raises(Infeasible) as info:
                provision_services(net, services, method=method)
            _check_caps_said(net, services, info.value, proven=method == "milp")
        return
    exact = provision_services(net, services, method="milp")
    assert exact.status == "optimal"
    assert exact.cost == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    assert exact.lower_bound <= optimum * (1 + 1e-6) + 1e-9
    _check_plan(net, services, exact)
    try:
        fast = provision_services(net, services, method="fast")
    except Infeasible as exc:  # the fast planner may miss a plan the caps leave; it says so
        assert str(exc).startswith("the fast planner found no plan serving every service")
        assert "one may still exist: method 'milp' decides" in str(exc)
        return
    assert fast.cost >= optimum * (1 - 1e-9) - 1e-12
    assert fast.lower_bound <= optimum * (1 + 1e-9) + 1e-12
    assert fast.status in ("optimal", "heuristic")
    if fast.status == "optimal":
        assert fast.cost == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    _check_plan(net, services, fast)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(joint_instances(acyclic=False))
def test_milp_on_cyclic_networks(case) -> None:
    net, services = case
    _milp_is_the_brute_force(net, services)


def _milp_is_the_brute_force(
    net: Network, services: list[Service], measured: dict[str, BlockSeconds] | None = None
) -> float | None:
    """The joint MILP against the brute force (``measured``: block times by service): both
    infeasible, or the MILP optimal at the brute force's cost with the definitions' loads; the
    optimum, ``None`` when infeasible."""
    optimum = brute_force(net, services, measured)
    if math.isinf(optimum):
        with pytest.raises(Infeasible):
            provision_services(net, services, method="milp")
        return None
    exact = provision_services(net, services, method="milp")
    assert exact.status == "optimal"
    assert exact.cost == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    _check_plan(net, services, exact, measured)
    return optimum


SECONDS = st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=20.0, allow_nan=False))


@st.composite
def measured_joint_instances(draw: st.DrawFn, acyclic: bool = True):
    """:func:`joint_instances` with each service's seconds per block measured on some nodes
    (its own model's blocks: services run different models)."""
    net, services = draw(joint_instances(acyclic))
    measured = {s.name: {n.id: [draw(SECONDS) for _ in range(s.profile.n_blocks)]
                         for n in net.nodes if draw(st.booleans())}
                for s in services}  # fmt: skip
    timed = [dataclasses.replace(s, node_time=MeasuredBlocks.of(measured[s.name]))
             for s in services]  # fmt: skip
    return net, timed, measured


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(measured_joint_instances())
def test_milp_and_fast_under_measured_times_against_brute_force(case) -> None:
    """Per-node loads: the brute force prices each node's load from the measured seconds
    times its capacity; the MILP is exact, the fast planner never below it nor its bound
    above."""
    net, services, measured = case
    optimum = _milp_is_the_brute_force(net, services, measured)
    if optimum is None:
        return
    try:
        fast = provision_services(net, services, method="fast")
    except Infeasible:
        return
    assert fast.cost >= optimum * (1 - 1e-9) - 1e-12
    assert fast.lower_bound <= optimum * (1 + 1e-9) + 1e-12
    if fast.status == "optimal":
        assert fast.cost == pytest.approx(optimum, rel=1e-6, abs=1e-9)
    _check_plan(net, services, fast, measured)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(measured_joint_instances(acyclic=False))
def test_milp_under_measured_times_on_cyclic_networks(case) -> None:
    net, services, measured = case
    _milp_is_the_brute_force(net, services, measured)


def test_one_service_is_the_single_service_problem() -> None:
    net = inferplan.tiered(seed=4)
    vgg = inferplan.vgg16()
    beta = 0.4 * inferplan.throughput(net, vgg).interval
    single = inferplan.provision(net, vgg, interval=beta)
    for method in ("milp", "fast"):
        joint = provision_services(net, [Service("v", vgg, "s", "t", interval=beta)],
                                   method=method)  # fmt: skip
        assert joint.status == "optimal"
        assert joint.cost == pytest.approx(single.cost, rel=1e-7)


def test_modules_shared_are_cheaper_than_apart() -> None:
    """Two half modules cost one module together: the joint plan shares it, and the bound
    (convex envelope) stays below."""
    net = Network(
        nodes=(inferplan.Node("s", 1.0, 100.0), inferplan.Node("t", 1.0, 0.0,
               inferplan.network.ModuleCost(size=10.0, price=5.0))),
        links=(inferplan.Link("s", "t", 1e9, 0.0),),
        source="s", target="t",
    )  # fmt: skip
    p = Profile("p", flops=(5.0,), activation_bits=(1.0, 1.0))
    services = [Service("a", p, "s", "t", interval=1.0), Service("b", p, "s", "t", interval=1.0)]
    for method in ("milp", "fast"):
        plan = provision_services(net, services, method=method)
        assert plan.cost == pytest.approx(5.0)  # one module of 10 for 5 + 5 - 1 = 9 FLOP/s
        assert plan.lower_bound <= 5.0
    assert brute_force(net, services) == pytest.approx(5.0)


def test_a_time_limit_used_up_by_building_the_milp_stops_before_highs(monkeypatch) -> None:
    import inferplan.codesign.services.milp as services_milp

    def never(*args, **kwargs):
        raise AssertionError("HiGHS called after the time limit")

    monkeypatch.setattr(services_milp, "highs", never)
    net = inferplan.tiered(seed=4)
    vgg = inferplan.vgg16()
    beta = 0.4 * inferplan.throughput(net, vgg).interval
    with pytest.raises(InvalidArgument, match="found no plan within"):
        provision_services(net, [Service("v", vgg, "s", "t", interval=beta)], method="milp",
                           time_limit=1e-9)  # fmt: skip


def test_bad_services_name_the_service() -> None:
    net = inferplan.tiered(seed=1)
    vgg = inferplan.vgg16()
    with pytest.raises(InvalidArgument, match=r"service .b.*.nowhere. is not a node"):
        provision_services(net, [Service("a", vgg, "s", "t", interval=1.0),
                                 Service("b", vgg, "nowhere", "t", interval=1.0)])  # fmt: skip
    with pytest.raises(InvalidArgument, match=r"service .a.*duplicate service name"):
        provision_services(net, [Service("a", vgg, "s", "t", interval=1.0)] * 2)
    with pytest.raises(InvalidArgument, match="service 'a'"):
        Service("a", vgg, "s", "t", interval=-1.0)
    with pytest.raises(InvalidArgument, match="does not take seed"):
        provision_services(net, [Service("a", vgg, "s", "t", interval=1.0)], seed=3)
    with pytest.raises(InvalidArgument, match="seed: must be a non-negative integer"):
        provision_services(net, [Service("a", vgg, "s", "t", interval=1.0)], method="fast",
                           seed=-1)  # fmt: skip
    with pytest.raises(InvalidArgument, match="unknown method 'psg'"):
        provision_services(net, [Service("a", vgg, "s", "t", interval=1.0)], method="psg")


@settings(max_examples=200, deadline=None)
@given(
    kind=st.sampled_from(KINDS),
    data=st.data(),
    capacity=st.floats(min_value=1.0, max_value=100.0),
    load=st.floats(min_value=0.0, max_value=300.0),
    extra=st.lists(st.floats(min_value=0.0, max_value=300.0), min_size=1, max_size=8),
)
def test_residual_prices_the_marginal_cost(kind, data, capacity, load, extra):
    """What a best response pays for adding r to an element others load: the cost's
    increase, from the definition."""
    from inferplan.codesign.services.fast import EMPTY, residual
    from tests.strategies import capacity_costs

    cost = data.draw(capacity_costs(kind))
    left, marginal = residual(capacity, load, cost)
    base = float(cost(np.array([max(0.0, load - capacity)]))[0])
    if math.isinf(base):  # the others alone exceed the cap: no joint plan to price
        return
    for r in extra:
        if load >= capacity and r <= 2 * EMPTY * capacity:
            continue  # the hair of free capacity an element at capacity is given
        want = float(cost(np.array([max(0.0, load + r - capacity)]))[0]) - base
        got = float(marginal(np.array([max(0.0, r - left)]))[0])
        if math.isinf(want) or math.isinf(got):
            edge = getattr(cost, "max_modules", 0.0) * getattr(cost, "size", 0.0) or cost.max_amount
            at_cap = math.isclose(load + r - capacity, edge, rel_tol=1e-9)  # rounding decides
            assert (math.isinf(want) and math.isinf(got)) or at_cap or abs(r - left) < 1e-6
        else:
            assert got == pytest.approx(want, rel=1e-9, abs=1e-9 * max(1.0, abs(want)) + 1e-6)


@settings(max_examples=200, deadline=None)
@given(kind=st.sampled_from(KINDS), data=st.data(), most=st.floats(min_value=0.0, max_value=400))
def test_the_convex_envelope_is_convex_and_below(kind, data, most):
    from inferplan.codesign.services.fast import convex_envelope
    from tests.strategies import capacity_costs

    cost = data.draw(capacity_costs(kind))
    hull = convex_envelope(cost, most)
    xs = np.linspace(0.0, most, 97)
    f, g = cost(xs), hull(xs)
    assert np.all(g <= f + 1e-9 * np.maximum(1.0, np.abs(np.where(np.isfinite(f), f, 0.0))))
    finite = np.isfinite(g)
    second = np.diff(g[finite], 2)
    assert np.all(second >= -1e-7 * np.maximum(1.0, np.abs(g[finite]).max(initial=0.0)))


def test_regression_joint_milp_at_a_tight_tolerance() -> None:
    """Three services on a cyclic network with falling tiers: HiGHS at a feasibility tolerance
    of 1e-10 called the optimum infeasible and proved a plan 56 % dearer optimal."""
    net = inferplan.network_from_dict({
        "source": "n0", "target": "n3",
        "nodes": [
            {"id": "n0", "capacity": 34.89708561853653,
             "cost": {"kind": "modules", "size": 30.27734108863448, "price": 0.0,
                      "max": 2.5916181580468534}},
            {"id": "n1", "capacity": 56.65921849510782, "price": 6.309800134272786},
            {"id": "n2", "capacity": 1.0,
             "cost": {"kind": "tiers", "upto": [0.5], "price": [0.0], "max": 0.5}},
            {"id": "n3", "capacity": 27.894430454008745,
             "cost": {"kind": "modules", "size": 8.883246213447737,
                      "price": 7.1176691244851655}},
        ],
        "links": [
            {"source": "n0", "target": "n1", "capacity": 75.81161607443916,
             "cost": {"kind": "tiers", "upto": [1.5, 3.0, 41.483389042828996],
                      "price": [0.5, 0.0, 0.0]}},
            {"source": "n0", "target": "n3", "capacity": 1.1, "price": 6.883542752097123},
            {"source": "n1", "target": "n0", "capacity": 26.750246341086903, "price": 0.0},
            {"source": "n1", "target": "n2", "capacity": 88.57835744367148, "price": 0.0},
            {"source": "n1", "target": "n3", "capacity": 54.75438456355527, "price": 0.0},
            {"source": "n2", "target": "n0", "capacity": 6.814972205375431,
             "cost": {"kind": "linear", "price": 0.0, "max": 25.153558658243924}},
            {"source": "n2", "target": "n1", "capacity": 83.35351076409285,
             "cost": {"kind": "tiers", "upto": [34.207524348306826, 53.621306596200895,
                                                133.52654554965414],
                      "price": [6.8165226659646825, 0.0, 0.0, 0.0]}},
            {"source": "n3", "target": "n0", "capacity": 55.38750735220896,
             "cost": {"kind": "linear", "price": 0.0, "max": 1.5}},
            {"source": "n3", "target": "n1", "capacity": 2.1830175245670143,
             "cost": {"kind": "linear", "price": 0.0, "max": 131.78253445412642}},
            {"source": "n3", "target": "n2", "capacity": 67.67615590189936,
             "cost": {"kind": "tiers", "upto": [79.0], "price": [0.0], "max": 79.0}},
        ],
    })  # fmt: skip
    one = Profile("one", flops=(112.57130646154988,),
                  activation_bits=(178.68314873646045, 194.7737555535525))  # fmt: skip
    two = Profile("two", flops=(189.691035107705, 94.46593113415476),
                  activation_bits=(173.56224085998934, 168.82917372837005,
                                   93.67957233046948))  # fmt: skip
    services = [Service("s0", one, "n3", "n0", interval=1.3404362406562296),
                Service("s1", two, "n0", "n1", interval=1.9276150141672657),
                Service("s2", two, "n0", "n2", interval=9.051365593386121)]  # fmt: skip
    optimum = brute_force(net, services)
    assert optimum == pytest.approx(856.3930316642941)
    plan = provision_services(net, services, method="milp")
    assert plan.status == "optimal" and plan.cost == pytest.approx(optimum, rel=1e-9)


def test_services_that_each_fit_the_caps_alone_but_not_together_are_told_so() -> None:
    """Two services of 6 FLOP per 1 s inference: each alone runs on t at its cap of
    10 FLOP/s (0.6 s at best), together they need 12 FLOP/s of it; s is too slow for
    either. The answer names the best interval of each alone and that the shared caps bind
    (the MILP's proof), or, from the fast planner, no more than what it found."""
    capped = {"kind": "linear", "price": 1.0, "max": 0.0}
    net = inferplan.network_from_dict({
        "source": "s", "target": "t",
        "nodes": [{"id": "s", "capacity": 1.0, "cost": capped},
                  {"id": "t", "capacity": 10.0, "cost": capped}],
        "links": [{"source": "s", "target": "t", "capacity": 1e9, "cost": capped}],
    })  # fmt: skip
    model = Profile("m", flops=(6.0,), activation_bits=(1.0, 1.0))
    services = [Service(name, model, "s", "t", interval=1.0) for name in ("a", "b")]
    assert math.isinf(brute_force(net, services))
    assert all(math.isfinite(brute_force(net, [s])) for s in services)
    for method in ("milp", "fast"):
        with pytest.raises(Infeasible) as info:
            provision_services(net, services, method=method)
        _check_caps_said(net, services, info.value, proven=method == "milp")
        assert "(at best: a 0.6 s, b 0.6 s)" in str(info.value)
        assert info.value.details["services"][0]["binding"] == [
            {"kind": "node", "id": "t", "capacity": 10.0}
        ]
