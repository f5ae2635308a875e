"""``inferplan provision NETWORK --services FILE``: services files, their errors (one line
naming the service), the JSON contract, infeasible requests and the picture."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import inferplan
from inferplan.codesign.services.file import load_services
from inferplan.codesign.services.joint import provision_services
from tests.cli import app, runner
from tests.cli import invoke_json as _json

EXAMPLES = Path(__file__).parents[2] / "examples"
NETWORK = EXAMPLES / "network.json"
SERVICES = EXAMPLES / "services.yaml"


@pytest.mark.parametrize("method", ["milp", "fast"])
def test_json_contract(method):
    out = _json(["provision", str(NETWORK), "--services", str(SERVICES), "--method", method,
                 "--json"])  # fmt: skip
    assert set(out) == {"status", "method", "cost", "lower_bound", "gap", "services",
                        "node_upgrades", "link_upgrades", "memory_upgrades", "loads"}  # fmt: skip
    assert out["method"] == method
    assert out["lower_bound"] <= out["cost"]
    names = [s["name"] for s in out["services"]]
    assert names == ["cams", "detect", "classify"]
    for s in out["services"]:
        assert set(s) == {"name", "path", "partition", "ideals", "interval", "target_interval",
                          "latency", "target_latency", "cuts", "layers"}  # fmt: skip
        assert (s["ideals"] is None) == (s["cuts"] == "chain")
        assert s["target_latency"] is None
        assert s["latency"] > 0
        assert s["interval"] <= s["target_interval"] * (1 + 1e-9)
    assert set(out["loads"]) == {"nodes", "links", "memory"}
    assert set(out["loads"]["memory"]) == {v for s in out["services"] for v in s["path"]}
    for link in out["loads"]["links"]:
        assert set(link) == {"source", "target", "load"}
    api = provision_services(inferplan.load_network(NETWORK), load_services(SERVICES),
                             method=method)  # fmt: skip
    assert out == json.loads(json.dumps(api.to_dict()))


def test_readable_output_names_every_service():
    result = runner.invoke(app, ["provision", str(NETWORK), "--services", str(SERVICES)])
    assert result.exit_code == 0, result.stderr
    assert "milp (optimal)" in result.stdout
    for name in ("cams", "detect", "classify", "shared loads"):
        assert name in result.stdout


def test_plot(tmp_path):
    out = tmp_path / "services.png"
    result = runner.invoke(app, ["provision", str(NETWORK), "--services", str(SERVICES),
                                 "--plot", str(out)])  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert f"written: {out}" in result.stderr


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "services.yaml"
    path.write_text(body)
    return path


GOOD = "  - {name: a, profile: vgg16, source: s, target: t, interval: 0.5}\n"


@pytest.mark.parametrize(
    "body, message",
    [
        ("services:\n" + GOOD + "  - {name: b, profile: vgg16, source: nowhere, target: t, "
         "interval: 0.5}\n", "service 'b': source 'nowhere' is not a node of the network"),
        ("services:\n" + GOOD + GOOD, "services[1] ('a'): duplicate service name 'a'"),
        ("services:\n  - {name: a, profile: gone.json, source: s, target: t, interval: 1}\n",
         "services[0] ('a').profile: profile 'gone.json':"),
        ("services:\n  - {name: a, profile: vgg16, source: s, target: t}\n",
         "services[0] ('a'): give exactly one of throughput or interval"),
        ("services:\n  - {name: a, profile: vgg16, source: s, target: t, interval: 1, "
         "throughput: 2}\n", "services[0] ('a'): give exactly one of throughput or interval"),
        ("services:\n  - {name: a, profile: vgg16, source: s, target: t, interval: -1}\n",
         "services[0].interval"),
        ("services:\n  - {name: a, profile: vgg16, source: t, target: s, interval: 1}\n",
         "service 'a': target 's' is unreachable from source 't'"),
        ("services: []\n", "services"),
    ],
)  # fmt: skip
def test_bad_services_files_are_one_line_naming_the_service(tmp_path, body, message):
    path = _write(tmp_path, body)
    result = runner.invoke(app, ["provision", str(NETWORK), "--services", str(path)])
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert message in lines[0]
    assert "Traceback" not in result.stderr


def test_profile_files_are_relative_to_the_services_file(tmp_path):
    (tmp_path / "tiny.json").write_text(json.dumps(inferplan.alexnet().to_dict()))
    path = _write(tmp_path, "services:\n  - {name: a, profile: tiny.json, source: s, "
                            "target: t, throughput: 5}\n")  # fmt: skip
    (service,) = load_services(path)
    assert service.profile.flops == inferplan.alexnet().flops


@pytest.mark.parametrize(
    "extra, message",
    [
        (["vgg16"], "give a profile or --services, not both"),
        (["--throughput", "3"], "--throughput is for one profile"),
        (["--method", "psg"], "unknown method 'psg' for several services"),
        (["--method", "fast", "--time-limit", "3"], "does not take time_limit"),
    ],
)
def test_options_that_do_not_go_with_services(extra, message):
    args = ["provision", str(NETWORK), "--services", str(SERVICES), *extra]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_fast_is_not_a_single_service_method():
    result = runner.invoke(app, ["provision", str(NETWORK), "vgg16", "--throughput", "3",
                                 "--method", "fast"])  # fmt: skip
    assert result.exit_code == 2
    assert "unknown method 'fast'" in result.stderr


def test_infeasible_is_exit_3_with_one_json_object(tmp_path):
    net = inferplan.load_network(NETWORK).to_dict()
    for node in net["nodes"]:
        node["cost"] = {"kind": "linear", "price": node["price"], "max": 1e9}
    for link in net["links"]:
        link["cost"] = {"kind": "linear", "price": link["price"], "max": 1e6}
    capped = tmp_path / "capped.json"
    capped.write_text(json.dumps(net))
    for method in ("milp", "fast"):
        chosen = ["--method", method] if method == "fast" else []  # milp is the default
        result = runner.invoke(app, ["provision", str(capped), "--services", str(SERVICES),
                                     *chosen, "--json"])  # fmt: skip
        assert result.exit_code == 3, result.stderr
        out = json.loads(result.stdout)
        assert out["status"] == "infeasible" and out["method"] == method
        # the MILP proves there is none; the fast planner only says it found none
        expected = ("no plan serves every service" if method == "milp"
                    else "the fast planner found no plan serving every service")  # fmt: skip
        assert out["message"].startswith(expected), out["message"]
        # each service alone meets its interval at the caps: what they share binds
        alone = {d["name"]: d for d in out["services"]}
        assert list(alone) == ["cams", "detect", "classify"]
        for d in alone.values():
            assert 0 < d["best_interval"] <= d["interval"] and d["binding"], d
            assert d["at_caps"]["interval"] == d["best_interval"]
        assert out["message"].endswith(": the caps they share bind") == (method == "milp")
        table = runner.invoke(app, ["provision", str(capped), "--services", str(SERVICES),
                                    *chosen])  # fmt: skip
        assert table.exit_code == 3
        for name in alone:  # one table per service, its binding cap marked
            assert f"service {name!r} alone, best within the caps: interval" in table.stdout
        assert table.stdout.count("binds: at its cap of") == sum(
            len(d["binding"]) for d in alone.values()
        )


@pytest.mark.parametrize("target", ["throughput: 1e308", "interval: 5e-324"])
def test_a_target_beyond_floating_point_names_the_service_not_a_flag(tmp_path, target):
    path = tmp_path / "services.yaml"
    entry = "profile: vgg16, source: s, target: t"
    path.write_text(f"services:\n  - {{name: ok, {entry}, interval: 1}}\n"
                    f"  - {{name: huge, {entry}, {target}}}\n")  # fmt: skip
    result = runner.invoke(app, ["provision", str(NETWORK), "--services", str(path)])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"error: {path}: service 'huge': an interval of ")
    assert "needs capacities beyond floating point" in result.stderr and "--interval" not in (
        result.stderr)  # fmt: skip


TWO_MLPS = (
    "services:\n"
    "  - {name: a, profile: mlp-64x3, source: s, target: t, throughput: 2000000}\n"
    "  - {name: b, profile: mlp-64x3, source: s, target: t, interval: 1.0e-6}\n"
)


def _node_loads_by_definition(out: dict, measured: dict[str, list[float]]) -> dict[str, float]:
    """Each node's load from the plan's deployments: a stage's FLOPs, or on a measured node
    its seconds times the node's capacity, over the service's interval."""
    flops = inferplan.mlp(64, 3).flops
    capacity = {n.id: n.capacity for n in inferplan.load_network(NETWORK).nodes}
    need: dict[str, float] = {}
    for d in out["services"]:
        done = 0
        for v, b in zip(d["path"], d["partition"], strict=True):
            if b > done:
                work = (sum(measured[v][done:b]) * capacity[v] if v in measured
                        else sum(flops[done:b]))  # fmt: skip
                need[v] = need.get(v, 0.0) + work / d["target_interval"]
            done = b
    return need


def test_services_plan_with_node_times_from_the_flag_or_the_services_file(tmp_path):
    """A target measured slow: the plan moves the work off it (its loads those of the
    measured times), the same whether the times come from --node-times or each service's
    node_times field."""
    measured = {"t": [1e-3, 1e-3, 1e-3]}
    times = tmp_path / "times.yaml"
    times.write_text("block_seconds:\n  t: [1.0e-3, 1.0e-3, 1.0e-3]\n")
    services = _write(tmp_path, TWO_MLPS)
    plain = _json(["provision", str(NETWORK), "--services", str(services), "--json"])
    timed = _json(["provision", str(NETWORK), "--services", str(services), "--json",
                   "--node-times", str(times)])  # fmt: skip
    assert "t" in plain["loads"]["nodes"] and "t" not in timed["loads"]["nodes"]
    want = _node_loads_by_definition(timed, measured)
    assert timed["loads"]["nodes"] == pytest.approx(want, rel=1e-9)
    own = _write(tmp_path, TWO_MLPS.replace("interval: 1.0e-6}", "interval: 1.0e-6, "
                                            "node_times: times.yaml}").replace(
        "throughput: 2000000}", "throughput: 2000000, node_times: times.yaml}"))  # fmt: skip
    from_file = _json(["provision", str(NETWORK), "--services", str(own), "--json"])
    assert from_file["cost"] == pytest.approx(timed["cost"], rel=1e-9)
    assert from_file["loads"] == timed["loads"]


@pytest.mark.parametrize(("body", "times", "message"), [
    (TWO_MLPS.replace("mlp-64x3, source: s, target: t, interval", "alexnet, source: s, "
                      "target: t, interval"), "block_seconds:\n  t: [1, 1, 1]\n",
     "--node-times: the times are one model's blocks, and services 'a' and 'b' run different"),
    (TWO_MLPS, "block_seconds:\n  t: [1, 1]\n", "block_seconds.t: 2 block times given"),
    (TWO_MLPS, "block_seconds:\n  nowhere: [1, 1, 1]\n", "unknown node 'nowhere'"),
    (TWO_MLPS.replace("throughput: 2000000}", "throughput: 2000000, node_times: times.yaml}"),
     "block_seconds:\n  t: [1, 1, 1]\n", "service 'a' gives its own node times"),
])  # fmt: skip
def test_bad_node_times_with_services_are_one_line(tmp_path, body, times, message):
    (tmp_path / "times.yaml").write_text(times)
    path = _write(tmp_path, body)
    result = runner.invoke(app, ["provision", str(NETWORK), "--services", str(path),
                                 "--node-times", str(tmp_path / "times.yaml")])  # fmt: skip
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]


@pytest.mark.parametrize(("times", "message"), [
    ("block_seconds:\n  nowhere: [1, 1, 1]\n",
     "service 'a': its node times measure node 'nowhere', which is not a node of the network"),
    ("block_seconds:\n  t: [1, 1]\n", "block_seconds.t: 2 block times given"),
])  # fmt: skip
def test_bad_node_times_in_a_services_file_are_one_line(tmp_path, times, message):
    (tmp_path / "times.yaml").write_text(times)
    path = _write(tmp_path, TWO_MLPS.replace("throughput: 2000000}",
                                             "throughput: 2000000, node_times: times.yaml}"))
    result = runner.invoke(app, ["provision", str(NETWORK), "--services", str(path)])
    assert result.exit_code == 2, result.stdout
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert message in lines[0], lines[0]
