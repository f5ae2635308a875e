"""The cost-throughput frontier: non-decreasing, equal to ``provision`` where sampled, and the
deployment changes it reports are real."""

from __future__ import annotations

import itertools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import compile_instance, cost_frontier, throughput_optimal
from inferplan.errors import InvalidArgument
from tests.cli import app, runner
from tests.oracles import brute_force_cost, brute_force_interval
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


def test_frontier_with_caps_reports_infeasible_rates():
    base = inferplan.tiered(seed=1)
    capped = inferplan.Network(
        tuple(inferplan.Node(n.id, n.capacity, n.price, inferplan.LinearCost(n.price, 1e9))
              for n in base.nodes),
        base.links, base.source, base.target,
    )  # fmt: skip
    inst = compile_instance(capped, inferplan.vgg16())
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
