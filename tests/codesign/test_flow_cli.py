"""``inferplan throughput/provision --pipelines any``: the flow plan on the command line."""

from __future__ import annotations

import json
import math

import pytest

import inferplan
from inferplan.network.io import save_network
from tests.cli import app, invoke_json, runner


@pytest.fixture(scope="module")
def net(tmp_path_factory):  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("flow") / "net.json"
    save_network(inferplan.tiered(seed=2), path)
    return path


def test_throughput_any_is_at_least_one_path(net):
    one = invoke_json(["throughput", str(net), "vgg16", "--json"])
    flow = invoke_json(["throughput", str(net), "vgg16", "--pipelines", "any", "--json"])
    assert flow["status"] == "optimal"
    assert flow["throughput"] >= one["throughput"] * (1 - 1e-9)
    assert math.isclose(sum(p["rate"] for p in flow["pipelines"]), flow["throughput"],
                        rel_tol=1e-9)  # fmt: skip
    for p in flow["pipelines"]:
        assert p["path"][0] == "s" and p["path"][-1] == "t" and p["partition"][-1] == 16


def test_pipelines_1_is_today(net):
    """The default is one path: the same JSON as without the option."""
    plain = invoke_json(["throughput", str(net), "vgg16", "--json"])
    assert invoke_json(["throughput", str(net), "vgg16", "--pipelines", "1", "--json"]) == plain


def test_provision_any_table_and_dot(net, tmp_path):
    dot = tmp_path / "flow.dot"
    result = runner.invoke(app, ["provision", str(net), "vgg16", "--pipelines", "any",
                                 "--throughput", "20", "--dot", str(dot)])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "pipelines" in result.stdout and "layout" in result.stdout
    assert dot.read_text().startswith("digraph flow")


def test_unreachable_is_exit_3_with_what_caps_allow(tmp_path):
    network = inferplan.Network(
        nodes=(inferplan.Node("s", 1.0, cost=inferplan.LinearCost(1.0, 1.0)),
               inferplan.Node("t", 1.0, cost=inferplan.LinearCost(1.0, 1.0))),
        links=(inferplan.Link("s", "t", 1.0, cost=inferplan.LinearCost(1.0, 1.0)),),
        source="s", target="t")  # fmt: skip
    profile = inferplan.Profile("p", flops=(4.0, 4.0), activation_bits=(1.0, 1.0, 1.0))
    net_path, prof_path = tmp_path / "n.json", tmp_path / "p.json"
    save_network(network, net_path)
    prof_path.write_text(json.dumps(profile.to_dict()))
    result = runner.invoke(app, ["provision", str(net_path), str(prof_path), "--pipelines",
                                 "any", "--throughput", "100"])  # fmt: skip
    assert result.exit_code == 3
    assert "allow at most 0.5 inferences/s" in result.stderr


@pytest.mark.parametrize("args", [
    ["provision", "--pipelines", "any", "--throughput", "-1"],
    ["provision", "--pipelines", "any", "--throughput", "5", "--latency", "1"],
    ["provision", "--pipelines", "any", "--throughput", "5", "--method", "milp"],
    ["throughput", "--pipelines", "any", "--time-limit", "0"],
    ["throughput", "--time-limit", "5"],
    ["throughput", "--pipelines", "2"],
])  # fmt: skip
def test_bad_input_is_one_line_exit_2(net, args):
    result = runner.invoke(app, [args[0], str(net), "vgg16", *args[1:]])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("error:")
