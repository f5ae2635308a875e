"""The cost frontiers: against throughput non-decreasing, against the latency bound
non-increasing, each equal to independent solves where sampled, and the deployment changes
they report are real."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import (
    compile_instance,
    cost_frontier,
    latency_frontier,
    throughput_optimal,
)
from inferplan.errors import Infeasible, InvalidArgument
from tests.cli import app, runner
from tests.oracles import brute_force_cost, brute_force_interval, brute_force_latency_cost
from tests.strategies import small_dags, small_profiles


@settings(max_examples=40)
@given(
    network=small_dags(max_nodes=5, cost_kinds=("linear", "modules", "capped")),
    profile=small_profiles(max_blocks=4),
    reach=st.floats(min_value=1.5, max_value=6.0),
)
def test_frontier_is_non_decreasing_and_exact_at_its_points(network, profile, reach):
    inst = compile_instance(network, profile)
    base = 1.0 / throughput_optimal(inst).interval
    front = cost_frontier(inst, low=0.5 * base, high=reach * base, points=9)
    rates = [p.throughput for p in front.points]
    assert rates == sorted(rates)
    costs = [p.cost for p in front.points]
    assert all(b >= a * (1 - 1e-9) - 1e-12 for a, b in itertools.pairwise(costs))
    assert costs[0] == 0.0  # below T*'s rate nothing needs buying
    for point in front.points[:: max(1, len(front.points) // 4)]:
        assert point.cost == pytest.approx(
            brute_force_cost(network, profile, 1.0 / point.throughput), rel=1e-9, abs=1e-9
        )


@pytest.mark.parametrize("seed", [0, 3])
def test_frontier_equals_provision_at_sampled_points_and_marks_changes(seed):
    net, profile = inferplan.tiered(seed=seed), inferplan.resnet50()
    inst = compile_instance(net, profile)
    front = cost_frontier(inst, points=31)
    for point in front.points[::7]:
        plan = inferplan.provision(net, profile, throughput=point.throughput)
        assert point.cost == pytest.approx(plan.cost, rel=1e-12)
        assert (point.path, point.partition) == (plan.path, plan.partition)
    assert front.changes, "ResNet-50 over a fourfold range always moves some cut"
    for change in front.changes:
        assert change.low.deployment != change.high.deployment
        assert change.high.throughput / change.low.throughput - 1 <= 1e-6
        for end in (change.low, change.high):
            plan = inferplan.provision(net, profile, throughput=end.throughput)
            assert (plan.path, plan.partition) == end.deployment


def _capped(seed: int) -> inferplan.Network:
    base = inferplan.tiered(seed=seed)
    return inferplan.Network(
        tuple(inferplan.Node(n.id, n.capacity, n.price, inferplan.LinearCost(n.price, 1e9))
              for n in base.nodes),
        base.links, base.source, base.target,
    )  # fmt: skip


def test_frontier_with_caps_reports_infeasible_rates():
    inst = compile_instance(_capped(1), inferplan.vgg16())
    front = cost_frontier(inst, points=11)
    assert math.isinf(front.points[-1].cost) and front.points[-1].path == ()
    assert front.points[0].cost == 0.0


def test_frontier_rejects_bad_ranges():
    inst = compile_instance(inferplan.tiered(seed=1), inferplan.vgg16())
    with pytest.raises(
        InvalidArgument, match="low: the range of rates must be positive and increasing"
    ):
        cost_frontier(inst, low=5.0, high=2.0)
    with pytest.raises(InvalidArgument, match="exact method"):
        cost_frontier(inst, method="pwf")


def test_frontier_command(tmp_path):
    pytest.importorskip("matplotlib")
    net = tmp_path / "net.json"
    inferplan.save_network(inferplan.tiered(seed=2), net)
    picture = tmp_path / "front.png"
    result = runner.invoke(app, ["frontier", str(net), "vgg16", "--points", "5", "--json",
                                 "--plot", str(picture)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["method"] == "psg" and len(data["points"]) >= 5
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    bad = runner.invoke(app, ["frontier", str(net), "vgg16", "--from", "9", "--to", "3"])
    assert bad.exit_code == 2
    assert "error: --from: the range of rates must be positive and increasing" in bad.stderr


def test_frontier_on_a_cyclic_network_uses_the_milp():
    from tests.codesign.test_milp import _ring

    net, vgg = _ring(), inferplan.vgg16()
    inst = compile_instance(net, vgg, require_acyclic=False)
    default = cost_frontier(inst, method="milp", points=3)  # from 1/T*, T* by the MILP
    assert default.points[0].throughput == pytest.approx(
        1.0 / brute_force_interval(net, vgg), rel=1e-6
    )
    assert default.points[0].cost == pytest.approx(0.0, abs=1e-9)
    front = cost_frontier(inst, low=2.0, high=12.0, points=4, method="milp")
    for point in front.points[::2]:
        assert point.cost == pytest.approx(
            brute_force_cost(net, vgg, 1.0 / point.throughput), rel=1e-6, abs=1e-9
        )


# --- cost against the latency bound ----------------------------------------------------------


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    # module costs near the bound where plans begin are enumerated count by count (exact, but
    # slow to bisect a feasibility edge through); test_latency.py checks them point by point
    network=small_dags(max_nodes=5, cost_kinds=("linear", "capped", "tiers"), delays=True),
    profile=small_profiles(max_blocks=3),
    alpha=st.floats(min_value=0.3, max_value=1.2),
    reach=st.floats(min_value=0.05, max_value=0.9),
)  # fmt: skip
def test_the_latency_frontier_is_non_increasing_and_the_brute_force_optimum(
    network, profile, alpha, reach
):
    beta = alpha * brute_force_interval(network, profile)
    free = brute_force_cost(network, profile, beta)
    if math.isinf(free):
        with pytest.raises(Infeasible):
            latency_frontier(compile_instance(network, profile), beta, points=3)
        return
    slowest = inferplan.provision(network, profile, interval=beta).latency
    front = latency_frontier(compile_instance(network, profile), beta,
                             latency_range=(reach * slowest, slowest), points=5)  # fmt: skip
    assert front.sweep == "latency"
    bounds = [p.target_latency for p in front.points]
    assert bounds == sorted(bounds) and bounds[0] == reach * slowest and bounds[-1] == slowest
    costs = [p.cost for p in front.points]
    assert all(b <= a * (1 + 1e-9) + 1e-12 for a, b in itertools.pairwise(costs))
    assert costs[-1] == pytest.approx(free, rel=1e-9, abs=1e-12)  # the bound costs nothing
    for point in front.points[:: max(1, len(front.points) // 4)]:
        expected = brute_force_latency_cost(network, profile, beta, point.target_latency)
        assert point.throughput == 1.0 / beta
        if math.isinf(expected):
            assert point.status == "infeasible" and point.path == () and math.isinf(point.cost)
            continue
        assert point.status == "optimal"
        assert point.cost == pytest.approx(expected, rel=1e-6, abs=1e-9)
        assert point.latency <= point.target_latency * (1 + 1e-9)
    for change in front.changes:
        assert change.low.deployment != change.high.deployment
        assert change.high.target_latency / change.low.target_latency - 1 <= 1e-6


def _delayed(seed: int, delay: float) -> inferplan.Network:
    data = inferplan.tiered(seed=seed).to_dict()
    for link in data["links"]:
        link["delay_s"] = delay
    return inferplan.network_from_dict(data)


def test_the_latency_frontier_marks_changes_and_where_plans_begin():
    net, profile = _delayed(3, 0.004), inferplan.resnet50()
    inst = compile_instance(net, profile)
    beta = 0.5 * throughput_optimal(inst).interval
    free = inferplan.provision(net, profile, interval=beta)
    front = latency_frontier(inst, beta, latency_range=(0.01, free.latency), points=21)
    first = front.points[0]
    assert first.status == "infeasible" and math.isinf(first.cost)  # below 4 links' delays
    with pytest.raises(Infeasible, match=r"latency of 0\.01 s"):
        inferplan.provision(net, profile, interval=beta, latency=0.01)
    edge = next(c for c in front.changes if not c.low.path)
    assert edge.high.status == "optimal"
    with pytest.raises(Infeasible):
        inferplan.provision(net, profile, interval=beta, latency=edge.low.target_latency)
    moves = [c for c in front.changes if c.low.path]
    assert moves, "ResNet-50 under a fourfold range of bounds moves some cut"
    for change in moves:
        for end in (change.low, change.high):
            plan = inferplan.provision(net, profile, interval=beta, latency=end.target_latency)
            assert (plan.path, plan.partition) == end.deployment
            assert plan.cost == pytest.approx(end.cost, rel=1e-12)
    assert front.points[-1].cost == pytest.approx(free.cost, rel=1e-12)
    default = latency_frontier(inst, beta, points=3)
    assert [p.target_latency for p in default.points[::len(default.points) - 1]] == [
        0.25 * free.latency, free.latency]  # fmt: skip


def test_the_latency_frontier_refuses_what_it_cannot_sweep():
    inst = compile_instance(inferplan.tiered(seed=1), inferplan.vgg16())
    with pytest.raises(InvalidArgument, match="latency_range: the latency bounds must be "
                       "positive and increasing"):  # fmt: skip
        latency_frontier(inst, 0.1, latency_range=(0.2, 0.1))
    with pytest.raises(InvalidArgument, match="method: needs an exact method"):
        latency_frontier(inst, 0.1, method="pfp")
    with pytest.raises(InvalidArgument, match="method 'psg-reference' does not take latency"):
        latency_frontier(inst, 0.1, method="psg-reference")


def test_frontier_command_with_a_latency_range(tmp_path):
    pytest.importorskip("matplotlib")
    net = tmp_path / "net.json"
    inferplan.save_network(_delayed(2, 0.002), net)
    picture = tmp_path / "front.png"
    result = runner.invoke(app, ["frontier", str(net), "vgg16", "--latency-range", "0.005",
                                 "0.1", "--throughput", "20", "--points", "5", "--json",
                                 "--plot", str(picture)])  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["sweep"] == "latency" and data["points"][0]["target_latency"] == 0.005
    assert data["points"][0]["status"] == "infeasible" and data["points"][0]["cost"] is None
    assert {p["throughput"] for p in data["points"]} == {20.0}
    assert picture.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    table = runner.invoke(app, ["frontier", str(net), "vgg16", "--latency-range", "0.005",
                                "0.1", "--interval", "0.05", "--points", "5"])  # fmt: skip
    assert table.exit_code == 0, table.output
    assert "optimal deployment by latency bound" in table.stdout and "infeasible" in table.stdout
    for args, line in [
        (["--latency-range", "0.1", "0.2"], "error: --latency-range: needs the rate to hold"),
        (["--throughput", "20"], "error: --throughput: only with --latency-range"),
        (["--latency-range", "0.1", "0.2", "--interval", "1", "--from", "3"],
         "error: --from: sweeps rates, --latency-range latency bounds"),
        (["--latency-range", "0.2", "0.1", "--throughput", "20"],
         "error: --latency-range: the latency bounds must be positive and increasing"),
    ]:  # fmt: skip
        bad = runner.invoke(app, ["frontier", str(net), "vgg16", *args])
        assert bad.exit_code == 2 and line in bad.stderr, bad.output
    capped = tmp_path / "capped.json"
    inferplan.save_network(_capped(1), capped)
    beyond = runner.invoke(app, ["frontier", str(capped), "vgg16", "--latency-range", "0.1",
                                 "0.2", "--throughput", "1e4", "--points", "2",
                                 "--json"])  # fmt: skip
    assert beyond.exit_code == 0, beyond.output  # every point says it is infeasible
    assert {p["status"] for p in json.loads(beyond.stdout)["points"]} == {"infeasible"}
    with pytest.raises(Infeasible):  # without a range, no plan for the rate to start from
        latency_frontier(compile_instance(_capped(1), inferplan.vgg16()), 1e-4)
