"""Bad network, profile and argument input: one line naming the file, the element, the problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli import app, runner

GOOD = {
    "source": "s",
    "target": "t",
    "nodes": [
        {"id": "s", "capacity": 12e9, "price": 2.5e-9},
        {"id": "a1", "capacity": 30e9, "price": 1e-9},
        {"id": "t", "capacity": 150e9, "price": 1e-10},
    ],
    "links": [
        {"source": "s", "target": "a1", "capacity": 50e6, "price": 1e-7},
        {"source": "a1", "target": "t", "capacity": 400e6, "price": 2e-8},
    ],
}


def _write(tmp_path: Path, data: object, name: str = "net.json") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def _run_provision(path: Path, *extra: str, profile: str = "vgg16") -> tuple[int, str, str]:
    result = runner.invoke(app, ["provision", str(path), profile, *extra])
    return result.exit_code, result.stdout, result.stderr


def _edited(**changes: object) -> dict:
    data = json.loads(json.dumps(GOOD))
    for key, value in changes.items():
        data[key] = value
    return data


def _nodes(*edits: tuple[int, str, object]) -> list[dict]:
    nodes = json.loads(json.dumps(GOOD["nodes"]))
    for k, key, value in edits:
        nodes[k][key] = value
    return nodes


def _links(*edits: tuple[int, str, object]) -> list[dict]:
    links = json.loads(json.dumps(GOOD["links"]))
    for k, key, value in edits:
        links[k][key] = value
    return links


BAD_NETWORKS = [
    ("malformed JSON", '{"source": "s",', "malformed JSON at line 1"),
    ("missing field", _edited(target=None) | {"target": None}, "target"),
    ("missing source", {k: v for k, v in GOOD.items() if k != "source"}, "source: missing field"),
    ("unknown field", _edited(colour="red"), "colour: unknown field"),
    ("node missing capacity",
     _edited(nodes=[{"id": "s", "price": 1.0}, *GOOD["nodes"][1:]]),
     "nodes[0].capacity: missing field"),
    ("duplicate node", _edited(nodes=[*GOOD["nodes"], GOOD["nodes"][1]]),
     "nodes[3] ('a1'): duplicate node id 'a1'"),
    ("duplicate link", _edited(links=[*GOOD["links"], GOOD["links"][0]]),
     "links[2] ('s'->'a1'): duplicate link"),
    ("unknown node", _edited(links=_links((1, "target", "zz"))),
     "links[1] ('a1'->'zz'): target 'zz' is not a node of the network"),
    ("self-loop", _edited(links=[*GOOD["links"], {"source": "t", "target": "t", "capacity": 1,
                                                  "price": 0}]),
     "links[2] ('t'->'t'): self-loop"),
    ("zero capacity", _edited(nodes=_nodes((1, "capacity", 0))),
     "nodes[1] ('a1').capacity: capacity must be a positive finite number, got 0"),
    ("negative capacity", _edited(links=_links((0, "capacity", -5))),
     "links[0] ('s'->'a1').capacity: capacity must be a positive finite number, got -5"),
    ("infinite capacity", '{"source": "s", "target": "t", "nodes": [{"id": "s", "capacity": '
     'Infinity, "price": 1}, {"id": "t", "capacity": 1, "price": 1}], "links": [{"source": "s", '
     '"target": "t", "capacity": 1, "price": 1}]}',
     "nodes[0] ('s').capacity: capacity must be a positive finite number, got inf"),
    ("text capacity", _edited(nodes=_nodes((0, "capacity", "fast"))), "nodes[0].capacity"),
    ("negative price", _edited(nodes=_nodes((2, "price", -1e-9))),
     "nodes[2] ('t').price: price must be a non-negative finite number"),
    ("NaN price", '{"source": "s", "target": "t", "nodes": [{"id": "s", "capacity": 1, '
     '"price": NaN}, {"id": "t", "capacity": 1, "price": 1}], "links": [{"source": "s", '
     '"target": "t", "capacity": 1, "price": 1}]}',
     "nodes[0] ('s').price: price must be a non-negative finite number, got nan"),
    ("negative delay", _edited(links=_links((0, "delay_s", -0.5))),
     "links[0] ('s'->'a1').delay_s: delay_s must be a non-negative finite number of seconds, "
     "got -0.5"),
    ("text delay", _edited(links=_links((1, "delay_s", "5 ms"))), "links[1].delay_s"),
    ("boolean delay", _edited(links=_links((1, "delay_s", True))), "links[1].delay_s"),
    ("unknown source", _edited(source="x"), "source: 'x' is not a node of the network"),
    ("source equals target", _edited(target="s"), "target: source and target must differ"),
    ("unreachable", _edited(links=GOOD["links"][:1]),
     "target: target 't' is unreachable from source 's'"),
    ("cycle", _edited(links=[*GOOD["links"], {"source": "a1", "target": "b", "capacity": 1,
                                              "price": 1},
                             {"source": "b", "target": "a1", "capacity": 1, "price": 1}],
                      nodes=[*GOOD["nodes"], {"id": "b", "capacity": 1, "price": 1}]),
     "links: cycle 'a1' -> 'b' -> 'a1' lies on the way from source to target"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "data", "expected"), BAD_NETWORKS, ids=[c[0] for c in BAD_NETWORKS]
)
def test_bad_network_file(tmp_path, case, data, expected):
    path = _write(tmp_path, data)
    code, out, err = _run_provision(path, "--throughput", "30")
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"error: {path}: ")
    assert expected in lines[0]
    assert "Traceback" not in err


def test_missing_file(tmp_path):
    code, _, err = _run_provision(tmp_path / "nope.json", "--throughput", "30")
    assert code == 2
    assert err.strip() == f"error: {tmp_path / 'nope.json'}: file not found"


def test_malformed_yaml(tmp_path):
    path = _write(tmp_path, "source: s\nnodes: [\n", name="net.yaml")
    code, _, err = _run_provision(path, "--throughput", "30")
    assert code == 2
    assert err.startswith(f"error: {path}: malformed YAML at line")


def test_yaml_network_and_edges_alias(tmp_path):
    text = (
        "source: s\ntarget: t\nnodes:\n"
        "  - {id: s, capacity: 1.2e10, price: 2.5e-9}\n"
        "  - {id: t, capacity: 1.5e11, price: 1.0e-10}\n"
        "edges:\n  - {source: s, target: t, capacity: 5.0e7, price: 1.0e-7}\n"
    )
    code, out, err = _run_provision(_write(tmp_path, text, "net.yaml"), "--throughput", "5",
                                    "--json")  # fmt: skip
    assert code == 0, err
    assert json.loads(out)["path"] == ["s", "t"]


BAD_PROFILES = [
    ("length mismatch", {"name": "m", "flops": [1, 2], "activation_bits": [1, 2]},
     "activation_bits: must have len(flops) + 1 = 3 entries (D_0..D_N), got 2"),
    ("zero flops", {"name": "m", "flops": [1, 0], "activation_bits": [1, 2, 3]},
     "flops[1]: Input should be greater than 0, got 0"),
    ("negative bits", {"name": "m", "flops": [1, 2], "activation_bits": [1, -2, 3]},
     "activation_bits[1]: Input should be greater than 0, got -2"),
    ("missing flops", {"name": "m", "activation_bits": [1, 2]}, "flops: missing field"),
    ("unknown field", {"name": "m", "flops": [1], "activation_bits": [1, 2], "x": 1},
     "x: unknown field"),
    ("block names", {"name": "m", "flops": [1], "activation_bits": [1, 2], "blocks": ["a", "b"]},
     "blocks: must name each of the 1 blocks, got 2 names"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("case", "data", "expected"), BAD_PROFILES, ids=[c[0] for c in BAD_PROFILES]
)
def test_bad_profile_file(tmp_path, case, data, expected):
    net = _write(tmp_path, GOOD)
    prof = _write(tmp_path, data, name="profile.json")
    code, _, err = _run_provision(net, "--throughput", "30", profile=str(prof))
    assert code == 2
    assert err.strip() == f"error: {prof}: {expected}"


def test_unknown_builtin_profile(tmp_path):
    code, _, err = _run_provision(_write(tmp_path, GOOD), "--throughput", "30", profile="vgg17")
    assert code == 2
    assert "unknown built-in profile 'vgg17'" in err


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--interval", "0"], "--interval: must be a positive finite number, got 0.0"),
        (["--interval", "-0.1"], "--interval: must be a positive finite number, got -0.1"),
        (["--throughput", "-3"], "--throughput: must be a positive finite number, got -3.0"),
        (["--throughput", "inf"], "--throughput: must be a positive finite number, got inf"),
        ([], "give exactly one of interval or throughput"),
        (["--interval", "1", "--throughput", "1"], "give exactly one of interval or throughput"),
    ],
)
def test_bad_target(tmp_path, args, expected):
    code, _, err = _run_provision(_write(tmp_path, GOOD), *args)
    assert code == 2
    assert err.strip() == f"error: {expected}"


def test_off_path_elements_are_ignored(tmp_path):
    data = _edited(
        nodes=[*GOOD["nodes"], {"id": "lonely", "capacity": 1, "price": 1},
               {"id": "dead", "capacity": 1, "price": 1}],
        links=[*GOOD["links"], {"source": "s", "target": "dead", "capacity": 1, "price": 1},
               {"source": "lonely", "target": "t", "capacity": 1, "price": 1}],
    )  # fmt: skip
    code, out, err = _run_provision(_write(tmp_path, data), "--throughput", "30", "--json")
    assert code == 0, err
    assert json.loads(out)["path"] == ["s", "a1", "t"]


@pytest.mark.parametrize(
    ("text", "name", "expected"),
    [
        ("- a\n- b\n", "net.yaml", "the top level must be a mapping of fields, got a list"),
        ("", "net.yaml",
         "the top level must be a mapping of fields, got nothing (an empty document or null)"),
        (json.dumps(_edited(nodes=_nodes((0, "capacity", True)))), "net.json",
         "nodes[0].capacity: Input should be a valid number, got True"),
        (json.dumps(_edited(links=_links((0, "price", "1e-7")))), "net.json",
         "links[0].price: Input should be a valid number, got '1e-7'"),
    ],
)  # fmt: skip
def test_document_shape_and_strict_numbers(tmp_path, text, name, expected):
    path = _write(tmp_path, text, name=name)
    code, _, err = _run_provision(path, "--throughput", "30")
    assert code == 2
    assert err.strip() == f"error: {path}: {expected}"


def test_boolean_in_a_profile_is_not_a_number(tmp_path):
    prof = _write(tmp_path, {"flops": [True, 1.0], "activation_bits": [1, 2, 3]}, "p.json")
    code, _, err = _run_provision(_write(tmp_path, GOOD), "--throughput", "30", profile=str(prof))
    assert code == 2
    assert err.strip() == f"error: {prof}: flops[0]: Input should be a valid number, got True"


def test_overflowing_targets_and_profiles_are_refused(tmp_path):
    net = _write(tmp_path, GOOD)
    code, _, err = _run_provision(net, "--interval", "1e-300")
    assert code == 2
    assert err.startswith("error: --interval: an interval of 1e-300 s needs capacities beyond")
    huge = _write(tmp_path, {"flops": [1e308, 1e308], "activation_bits": [1, 2, 3]}, "p.json")
    code, _, err = _run_provision(net, "--throughput", "3", profile=str(huge))
    assert code == 2
    assert err.strip() == f"error: {huge}: flops: the total work overflows floating point"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["provision", "{net}", "vgg16", "--throughput", "30", "--plot", "{tmp}/no/p.png"],
         "error: {tmp}/no/p.png: No such file or directory"),
        (["provision", "{net}", "vgg16", "--throughput", "30", "--plot", "{tmp}/p.txt"],
         "error: {tmp}/p.txt: cannot draw a figure as 'txt': use one of"),
        (["profile", "alexnet", "-o", "{tmp}/no/p.json"],
         "error: {tmp}/no/p.json: No such file or directory"),
        (["generate", "tiered", "-o", "{tmp}/no/n.yaml"],
         "error: {tmp}/no/n.yaml: No such file or directory"),
    ],
)  # fmt: skip
def test_unwritable_outputs_are_one_line_errors(tmp_path, args, expected):
    net = _write(tmp_path, GOOD)
    filled = [a.format(net=net, tmp=tmp_path) for a in args]
    result = runner.invoke(app, filled)
    assert result.exit_code == 2
    assert result.stderr.startswith(expected.format(tmp=tmp_path))
    assert result.stderr.count("\n") == 1


def test_negative_seed_is_refused():
    result = runner.invoke(app, ["generate", "tiered", "--seed", "-3"])
    assert result.exit_code == 2
    assert "Invalid value for '--seed'" in result.stderr


def test_milp_takes_falling_tiers_from_a_network_file(tmp_path):
    """Volume discounts (non-convex tiers): the MILP prices each transition with them, as PSG."""
    falling = {"kind": "tiers", "upto": [1e9, 1e13], "price": [2e-9, 1e-9]}
    path = _write(tmp_path, _edited(nodes=_nodes((1, "cost", falling))))
    costs = {}
    for method in ("milp", "psg"):
        code, out, _ = _run_provision(path, "--throughput", "30", "--method", method, "--json")
        assert code == 0
        plan = json.loads(out)
        assert plan["status"] == "optimal"
        costs[method] = plan["cost"]
    assert costs["milp"] == pytest.approx(costs["psg"], rel=1e-8)
