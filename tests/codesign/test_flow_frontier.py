"""The flow cost frontier (``frontier --pipelines any``) against a brute force over every
layout at each of its rates, and against the one-path frontier it can only undercut."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.codesign import compile_instance
from inferplan.codesign.frontier import cost_frontier, flow_cost_frontier
from inferplan.errors import InvalidArgument
from tests.cli import app, runner
from tests.oracles import brute_force_flow, brute_force_flow_cost
from tests.strategies import small_dags, small_networks, small_profiles


@settings(max_examples=15, deadline=None)
@given(data=st.data(), top=st.floats(min_value=1.2, max_value=3.0))
def test_every_point_is_the_brute_force_least_cost(data, top):
    network = data.draw(small_networks(max_nodes=3))
    profile = data.draw(small_profiles(max_blocks=2))
    inst = compile_instance(network, profile, require_acyclic=False)
    base = brute_force_flow(network, profile)
    front = flow_cost_frontier(inst, low=0.5 * base, high=top * base, points=4)
    assert [p.throughput for p in front.points] == sorted(p.throughput for p in front.points)
    for p in front.points:
        expected = brute_force_flow_cost(network, profile, p.throughput)
        if math.isinf(expected):
            assert p.status == "infeasible" and math.isinf(p.cost)
        else:
            assert p.status == "optimal"
            assert p.cost == pytest.approx(expected, rel=1e-6, abs=1e-7)
            assert p.layout and p.path == ()


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_flows_cost_no_more_than_one_path(data):
    network = data.draw(small_dags(max_nodes=4))
    profile = data.draw(small_profiles(max_blocks=3))
    one = cost_frontier(compile_instance(network, profile), points=3)
    flow = flow_cost_frontier(compile_instance(network, profile, require_acyclic=False,
                                               cuts="chain"),
                              low=one.points[0].throughput, high=one.points[-1].throughput,
                              points=3)  # fmt: skip
    assert len(flow.points) == 3  # no bisection: the sweep's own rates
    for b in flow.points:
        (a,) = [p for p in one.points if math.isclose(p.throughput, b.throughput)]
        assert b.cost <= a.cost * (1 + 1e-6) + 1e-7


def test_the_default_range_starts_free_at_the_largest_flow():
    from tests.codesign.test_flow_plans import PROFILE, _two_ways

    inst = compile_instance(_two_ways(), PROFILE, require_acyclic=False)
    front = flow_cost_frontier(inst, points=3)
    # two nodes of 2 FLOP/s side by side and the ends of 1, 8 FLOPs an inference: 6 / 8
    assert front.points[0].throughput == pytest.approx(6 / 8)
    assert front.points[0].cost == pytest.approx(0.0, abs=1e-9)
    assert front.points[-1].throughput == pytest.approx(4 * 6 / 8)
    assert front.to_dict()["points"][0]["layout"]


def test_bad_points_are_refused():
    from tests.codesign.test_flow_plans import PROFILE, _two_ways

    inst = compile_instance(_two_ways(), PROFILE, require_acyclic=False)
    with pytest.raises(InvalidArgument, match="at least 2"):
        flow_cost_frontier(inst, points=1)
    with pytest.raises(InvalidArgument, match="positive and increasing"):
        flow_cost_frontier(inst, low=2.0, high=1.0)


def invoke(args):  # type: ignore[no-untyped-def]
    return runner.invoke(app, args)


def _files(tmp_path):
    from tests.codesign.test_flow_plans import PROFILE, _two_ways

    net = tmp_path / "net.json"
    from inferplan.network.io import save_network

    save_network(_two_ways(), net)
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps(PROFILE.to_dict()))
    return str(net), str(prof)


def test_the_cli_sweeps_flow_plans(tmp_path):
    net, prof = _files(tmp_path)
    result = invoke(["frontier", net, prof, "--pipelines", "any", "--points", "3", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["method"] == "flow-provision"
    assert [p["layout"] for p in out["points"]]
    table = invoke(["frontier", net, prof, "--pipelines", "any", "--points", "3"])
    assert table.exit_code == 0 and "layout" in table.stdout


@pytest.mark.parametrize("args", [["--latency-range", "1", "2", "--throughput", "1"],
                                  ["--method", "milp"], ["--cuts", "graph"]])  # fmt: skip
def test_the_cli_refuses_what_flow_frontiers_do_not_take(tmp_path, args):
    net, prof = _files(tmp_path)
    result = invoke(["frontier", net, prof, "--pipelines", "any", *args])
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1
    assert args[0] in result.stderr


def test_time_limit_is_only_for_flow_frontiers(tmp_path):
    net, prof = _files(tmp_path)
    result = invoke(["frontier", net, prof, "--time-limit", "5"])
    assert result.exit_code == 2 and "--time-limit" in result.stderr


def test_services_with_flows_are_refused_in_one_line(tmp_path):
    net, _ = _files(tmp_path)
    services = tmp_path / "services.json"
    services.write_text("{}")
    result = invoke(["provision", net, "--services", str(services), "--pipelines", "any"])
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1
    assert "--services" in result.stderr and "--pipelines any" in result.stderr


@pytest.mark.parametrize("command", [["provision", "--throughput", "1"], ["throughput"]])
def test_a_latency_bound_with_flows_is_refused_in_one_line(tmp_path, command):
    net, prof = _files(tmp_path)
    result = invoke([command[0], net, prof, *command[1:], "--latency", "1",
                     "--pipelines", "any"])  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error:") and result.stderr.count("\n") == 1
    assert "--latency" in result.stderr
