"""Latency: every plan and deployment reports the time one inference takes through it."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Infeasible
from inferplan.codesign import compile_instance, cost_frontier
from inferplan.codesign.planfile import check_plan, plan_from_dict
from inferplan.codesign.services import Service, provision_services
from inferplan.errors import InvalidArgument
from tests.oracles import plan_latency
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
