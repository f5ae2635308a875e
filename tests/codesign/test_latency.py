"""Latency: every plan and deployment reports the time one inference takes through it."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Infeasible
from inferplan.codesign import compile_instance, cost_frontier
from inferplan.codesign.planfile import check_plan, plan_from_dict
from inferplan.codesign.services.joint import Service, provision_services
from inferplan.errors import InvalidArgument
from inferplan.network.costs import FunctionCost
from tests.oracles import brute_force_latency_cost, deployments, evaluate, plan_latency
from tests.strategies import small_dags, small_networks, small_profiles

REPORTS = settings(max_examples=30, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow])  # fmt: skip


def _upgrades(plan: inferplan.Plan) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    return dict(plan.node_upgrades), {(u.source, u.target): u.amount for u in plan.link_upgrades}


@REPORTS
@given(net=small_dags(delays=True), profile=small_profiles(), alpha=st.floats(0.2, 1.2),
       method=st.sampled_from(["psg", "pfp", "pwf", "milp"]))  # fmt: skip
def test_every_method_reports_the_latency_of_its_plan(net, profile, alpha, method):
    best = inferplan.throughput(net, profile)
    assert best.latency == pytest.approx(plan_latency(net, profile, best.path, best.partition),
                                         rel=1e-12)  # fmt: skip
    try:
        plan = inferplan.provision(net, profile, interval=alpha * best.interval, method=method)
    except Infeasible:
        return
    assert plan.latency == pytest.approx(
        plan_latency(net, profile, plan.path, plan.partition, *_upgrades(plan)), rel=1e-12
    )
    assert plan.latency >= plan.interval and plan.target_latency is None
    back = plan_from_dict(json.loads(json.dumps(plan.to_dict())))
    assert back.latency == plan.latency
    check_plan(net, profile, back)


@REPORTS
@given(net=small_networks(delays=True), profile=small_profiles())
def test_the_milp_reports_latency_on_cyclic_networks(net, profile):
    best = inferplan.throughput(net, profile, method="milp")
    assert best.latency == pytest.approx(plan_latency(net, profile, best.path, best.partition),
                                         rel=1e-12)  # fmt: skip


def test_a_plan_file_with_another_latency_is_refused():
    net = inferplan.tiered(seed=3)
    profile = inferplan.vgg16()
    plan = inferplan.provision(net, profile, throughput=20).to_dict()
    plan["latency"] *= 1.5
    with pytest.raises(InvalidArgument, match="latency: the plan says"):
        check_plan(net, profile, plan_from_dict(plan))
    del plan["latency"]  # a plan file from before plans carried it
    assert plan_from_dict(plan).latency is None
    check_plan(net, profile, plan_from_dict(plan))


def test_propagation_delays_add_to_latency_and_change_no_cost():
    net = inferplan.tiered(seed=5)
    data = net.to_dict()
    for link in data["links"]:
        link["delay_s"] = 0.01
    delayed = inferplan.network_from_dict(data)
    profile = inferplan.resnet50()
    plain, late = (inferplan.provision(n, profile, throughput=15) for n in (net, delayed))
    assert late.cost == plain.cost and late.path == plain.path
    assert late.latency == pytest.approx(plain.latency + 0.01 * (len(plain.path) - 1))


def test_frontier_points_and_services_report_latency():
    net = inferplan.tiered(seed=2)
    profile = inferplan.alexnet()
    front = cost_frontier(compile_instance(net, profile), points=5)
    for point in front.points:
        plan = inferplan.provision(net, profile, throughput=point.throughput)
        assert point.latency == pytest.approx(
            plan_latency(net, profile, plan.path, plan.partition, *_upgrades(plan)), rel=1e-12
        )
        assert point.to_dict()["latency"] == point.latency
    beta = inferplan.throughput(net, profile).interval
    services = [Service("a", profile, net.source, net.target, beta * 0.8),
                Service("b", inferplan.vgg16(), net.source, net.target, 1.0)]  # fmt: skip
    for method in ("milp", "fast"):
        plan = provision_services(net, services, method=method)
        for s, served in zip(services, plan.services, strict=True):
            ups = {(u, v): x for (u, v), x in plan.link_upgrades.items()}
            expected = plan_latency(net, s.profile, served.path, served.partition,
                                    dict(plan.node_upgrades), ups)  # fmt: skip
            assert served.latency == pytest.approx(expected, rel=1e-12)
            assert math.isfinite(served.to_dict()["latency"])


# --- provision under a latency bound, against the brute force ------------------------------

BOUNDED = settings(max_examples=35, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow,
                                          HealthCheck.filter_too_much])  # fmt: skip
KINDS = [None, ("linear",), ("capped",), ("tiers",), ("modules",),
         ("linear", "capped", "tiers", "modules")]  # fmt: skip


@pytest.mark.parametrize("kinds", KINDS, ids=lambda k: "+".join(k) if k else "prices")
def test_latency_bounded_plans_are_the_brute_force_optimum(kinds):
    @BOUNDED
    @given(net=small_dags(max_nodes=5, cost_kinds=kinds, delays=True),
           profile=small_profiles(max_blocks=3), alpha=st.floats(0.3, 1.5),
           shrink=st.floats(0.2, 1.3), method=st.sampled_from(["psg", "pfp"]))  # fmt: skip
    def check(net, profile, alpha, shrink, method):
        beta = alpha * inferplan.throughput(net, profile).interval
        try:
            free = inferplan.provision(net, profile, interval=beta)
        except Infeasible:
            return
        bound = shrink * free.latency
        expected = brute_force_latency_cost(net, profile, beta, bound)
        try:
            plan = inferplan.provision(net, profile, interval=beta, latency=bound, method=method)
        except Infeasible as exc:
            assert method == "pfp" or math.isinf(expected)
            assert f"latency of {bound:g} s" in str(exc)
            return
        assert plan.target_latency == bound
        ups = _upgrades(plan)
        assert plan.interval <= beta * (1 + 1e-9)
        recomputed = plan_latency(net, profile, plan.path, plan.partition, *ups)
        assert plan.latency == pytest.approx(recomputed, rel=1e-12)
        assert recomputed <= bound * (1 + 1e-9)
        if method == "psg":
            assert plan.status == "optimal"
            assert plan.cost == pytest.approx(expected, rel=1e-6, abs=1e-9)
        else:
            assert plan.cost >= expected * (1 - 1e-6) - 1e-9

    check()


@BOUNDED
@given(net=small_dags(cost_kinds=("linear", "capped", "tiers", "modules"), delays=True),
       profile=small_profiles(), alpha=st.floats(0.3, 1.2),
       shrinks=st.lists(st.floats(0.1, 1.5), min_size=2, max_size=4))  # fmt: skip
def test_a_looser_bound_never_costs_more_and_a_loose_one_costs_nothing_extra(
    net, profile, alpha, shrinks
):
    beta = alpha * inferplan.throughput(net, profile).interval
    try:
        free = inferplan.provision(net, profile, interval=beta)
    except Infeasible:
        return
    loose = inferplan.provision(net, profile, interval=beta, latency=free.latency * 1.0001)
    assert loose.cost == free.cost and loose.path == free.path
    costs = []
    for shrink in sorted(shrinks, reverse=True):
        try:
            costs.append(inferplan.provision(net, profile, interval=beta,
                                             latency=shrink * free.latency).cost)  # fmt: skip
        except Infeasible:
            costs.append(math.inf)
    assert all(b >= a * (1 - 1e-9) for a, b in itertools.pairwise(costs))


def test_latency_below_every_propagation_delay_is_infeasible_for_every_method():
    data = inferplan.tiered(seed=1).to_dict()
    for link in data["links"]:
        link["delay_s"] = 0.05
    net = inferplan.network_from_dict(data)
    for method in ("psg", "pfp"):
        with pytest.raises(Infeasible, match=r"latency of 0\.08 s"):
            inferplan.provision(net, inferplan.vgg16(), throughput=10, latency=0.08,
                                method=method)  # fmt: skip


@pytest.mark.parametrize("method", ["pwf", "psg-reference"])
def test_methods_without_a_latency_bound_refuse_it_in_one_line(method):
    with pytest.raises(InvalidArgument, match=f"method '{method}' does not take latency"):
        inferplan.provision(inferplan.tiered(seed=1), inferplan.vgg16(), throughput=10,
                            latency=1.0, method=method)  # fmt: skip


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_a_bad_latency_bound_is_named(bad):
    with pytest.raises(InvalidArgument, match="must be a positive finite number of seconds"):
        inferplan.provision(inferplan.tiered(seed=1), inferplan.vgg16(), throughput=10,
                            latency=bad)  # fmt: skip


def test_a_function_cost_is_refused_under_a_latency_bound():
    base = inferplan.tiered(seed=1)
    nodes = [inferplan.Node(n.id, n.capacity, n.price, FunctionCost(lambda x: x**2, name="sq"))
             for n in base.nodes]  # fmt: skip
    net = inferplan.Network(nodes, base.links, base.source, base.target)
    with pytest.raises(InvalidArgument, match="linear, tiered, capped or module costs"):
        inferplan.provision(net, inferplan.vgg16(), throughput=10, latency=0.2)


# --- the least-latency deployment and T* within a latency ----------------------------------


def _every_deployment(net, profile):
    for path, partition in deployments(net, profile.n_blocks):
        yield (evaluate(net, profile, path, partition, math.inf).interval,
               plan_latency(net, profile, path, partition))  # fmt: skip


@settings(max_examples=60, deadline=None)
@given(net=small_dags(delays=True), profile=small_profiles(), alpha=st.floats(0.5, 3.0),
       shrink=st.floats(0.5, 2.0))  # fmt: skip
def test_least_latency_and_throughput_within_a_latency_are_the_brute_force_optima(
    net, profile, alpha, shrink
):
    every = list(_every_deployment(net, profile))
    fastest = min(lat for _, lat in every)
    best = inferplan.latency_optimal(net, profile)
    assert best.latency == pytest.approx(fastest, rel=1e-9)
    assert best.latency == pytest.approx(plan_latency(net, profile, best.path, best.partition),
                                         rel=1e-12)  # fmt: skip
    beta = alpha * min(interval for interval, _ in every)
    allowed = [lat for interval, lat in every if interval <= beta * (1 + 1e-9)]
    if allowed:
        within = inferplan.latency_optimal(net, profile, interval=beta)
        assert within.latency == pytest.approx(min(allowed), rel=1e-9)
        assert within.interval <= beta * (1 + 1e-9)
    else:
        with pytest.raises(Infeasible):
            inferplan.latency_optimal(net, profile, interval=beta)
    bound = shrink * fastest
    ok = [interval for interval, lat in every if lat <= bound * (1 + 1e-12)]
    if not ok:
        with pytest.raises(Infeasible, match="least is"):
            inferplan.throughput(net, profile, latency=bound)
        return
    found = inferplan.throughput(net, profile, latency=bound)
    assert found.interval == pytest.approx(min(ok), rel=1e-9)
    assert found.latency <= bound * (1 + 1e-9)


def test_latency_commands_print_one_json_object_and_exit_3_when_infeasible(tmp_path):
    from tests.cli import app, invoke_json, runner

    example = "examples/network.json"
    data = json.loads(Path(example).read_text())
    for link in data["links"]:
        link["delay_s"] = 0.05
    delayed = tmp_path / "delayed.json"
    delayed.write_text(json.dumps(data))
    out = invoke_json(["latency", example, "vgg16", "--json"])
    assert set(out) == {
        "interval",
        "throughput",
        "latency",
        "path",
        "partition",
        "ideals",
        "bottleneck",
        "cuts",
        "layers",
        "sends",
    }
    assert out == inferplan.latency_optimal(inferplan.load_network(example),
                                            inferplan.vgg16()).to_dict()  # fmt: skip
    within = invoke_json(["throughput", example, "vgg16", "--latency", "0.5", "--json"])
    assert within["latency"] <= 0.5
    plan = invoke_json(["provision", example, "vgg16", "--throughput", "30", "--latency", "0.06",
                        "--json"])  # fmt: skip
    assert plan["latency"] <= 0.06 * (1 + 1e-9) and plan["target_latency"] == 0.06
    for args in (["latency", example, "vgg16", "--throughput", "30"],
                 *(["provision", str(delayed), "vgg16", "--throughput", "30", "--latency",
                    "0.08", "--method", method] for method in ("psg", "pfp")),
                 ["throughput", str(delayed), "vgg16", "--latency", "0.08"]):  # fmt: skip
        result = runner.invoke(app, [*args, "--json"])
        assert result.exit_code == 3, result.output
        assert json.loads(result.stdout)["status"] == "infeasible"
