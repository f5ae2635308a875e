"""Node memory in every network form: listed JSON/YAML, tables, networkx; its errors."""

from __future__ import annotations

import copy
import json
import math

import pytest

from inferplan import Link, Network, Node, load_network, save_network
from inferplan.errors import InvalidNetwork
from inferplan.network.costs import LinearCost, ModuleCost, TieredCost
from inferplan.network.io import network_from_dict


def _network() -> Network:
    nodes = [
        Node("s", 1e9, 1e-9, memory=100.0, memory_price=2.0),
        Node("a", 1e9, 1e-9, memory=50.0, memory_cost=TieredCost((10.0,), (1.0, 3.0))),
        Node("b", 1e9, 1e-9, memory=0.0, memory_cost=LinearCost(1.0, 64.0)),
        Node("t", 1e9, 1e-9, memory_cost=ModuleCost(8.0, 3.0)),
    ]
    links = [Link("s", "a", 1e6, 1e-6), Link("a", "t", 1e6, 1e-6), Link("s", "b", 1e6, 1e-6),
             Link("b", "t", 1e6, 1e-6)]  # fmt: skip
    return Network(nodes, links, "s", "t")


def _memory(net: Network) -> list[tuple[float | None, float | None, object]]:
    return [(n.memory, n.memory_price, n.memory_cost) for n in net.nodes]


@pytest.mark.parametrize("form", ["json", "yaml", "parquet", "csv"])
def test_memory_survives_every_file_form(tmp_path, form):
    net = _network()
    path = tmp_path / f"net.{'yaml' if form != 'json' else 'json'}"
    save_network(net, path, tables=form if form in ("parquet", "csv") else False)
    back = load_network(path)
    assert back == net and _memory(back) == _memory(net)
    assert math.isinf(back.node_memory[3]) and math.isnan(back.node_memory_price[1])


def test_memory_survives_networkx():
    net = _network()
    assert _memory(Network.from_networkx(net.to_networkx())) == _memory(net)


def test_listed_elements_read_column_wise_and_one_by_one_agree():
    data = _network().to_dict()
    plain = network_from_dict(data)
    data["nodes"][0]["note"] = None  # an unknown field: element by element, and refused
    with pytest.raises(InvalidNetwork, match=r"nodes\[0\].note"):
        network_from_dict(data)
    del data["nodes"][0]["note"]
    data["nodes"][1]["memory"] = 50  # an int: still the plain form
    assert _memory(network_from_dict(data)) == _memory(plain)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("memory", -1.0, r"nodes\[0\] \('s'\)\.memory: memory must be a non-negative number"),
        ("memory", True, r"nodes\[0\]\.memory: Input should be a valid number"),
        ("memory", "1GB", r"nodes\[0\]\.memory: Input should be a valid number"),
        ("memory_price", -2.0, r"nodes\[0\] \('s'\)\.memory_price: memory_price must be a"),
        ("memory_cost", {"kind": "modules", "size": -1, "price": 1},
         r"nodes\[0\]\.memory_cost\.size"),
        ("memory_cost", {"kind": "gold", "price": 1}, r"nodes\[0\]\.memory_cost"),
    ],
)  # fmt: skip
def test_bad_memory_is_one_line_naming_the_node_and_field(field, value, message):
    data = copy.deepcopy(_network().to_dict())
    data["nodes"][0][field] = value
    with pytest.raises(InvalidNetwork, match=message):
        network_from_dict(data)


def test_a_nan_memory_price_is_refused_not_taken_for_absent(tmp_path):
    f = tmp_path / "net.yaml"
    data = _network().to_dict()
    data["nodes"][0]["memory_price"] = math.nan
    with pytest.raises(InvalidNetwork, match="memory_price"):
        network_from_dict(data)
    f.write_text(json.dumps(_network().to_dict()))
    assert load_network(f) == _network()


def test_bad_memory_in_a_table_names_the_table(tmp_path):
    (tmp_path / "n.nodes.csv").write_text("id,capacity,price,memory\ns,1,1,-5\nt,1,1,\n")
    (tmp_path / "n.links.csv").write_text("source,target,capacity,price\ns,t,1,1\n")
    (tmp_path / "n.yaml").write_text(
        "source: s\ntarget: t\nnodes: n.nodes.csv\nlinks: n.links.csv\n"
    )
    with pytest.raises(InvalidNetwork, match=r"n\.nodes\.csv.*memory must be a non-negative"):
        load_network(tmp_path / "n.yaml")
    (tmp_path / "n.nodes.csv").write_text(
        "id,capacity,price,memory_cost_kind,memory_cost_price\ns,1,1,modules,3\nt,1,1,,\n"
    )
    with pytest.raises(InvalidNetwork, match=r"n\.nodes\.csv.*memory_cost\.size: missing"):
        load_network(tmp_path / "n.yaml")


def test_a_node_object_refuses_bad_memory():
    with pytest.raises(InvalidNetwork, match="memory must be a non-negative number"):
        Network(
            [Node("s", 1, 1, memory=math.nan), Node("t", 1, 1)], [Link("s", "t", 1, 1)], "s", "t"
        )


def _camera_network(tmp_path, edge: dict) -> str:
    data = {
        "source": "cam", "target": "edge",
        "nodes": [{"id": "cam", "capacity": 1e10, "price": 1e-9, "memory": 64e6},
                  {"id": "edge", "capacity": 1e12, "price": 1e-11, **edge}],
        "links": [{"source": "cam", "target": "edge", "capacity": 1e8, "price": 1e-8}],
    }  # fmt: skip
    path = tmp_path / "net.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize("method", ["psg", "pfp", "pwf", "milp"])
def test_nothing_fits_is_exit_3_naming_the_block_for_every_method(tmp_path, method):
    from tests.cli import app, runner

    net = _camera_network(tmp_path, {"memory": 256e6})  # VGG-16's fc6 alone needs 411 MB
    args = ["provision", net, "vgg16", "--throughput", "5", "--method", method]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 3
    out = json.loads(result.stdout)
    assert out["status"] == "infeasible" and out["method"] == method
    assert "no deployment fits the nodes' memory" in out["message"]
    assert "block 'fc6' alone needs 411.2 MB; no node holds more than 256 MB" in out["message"]
    plain = runner.invoke(app, args)
    assert plain.exit_code == 3 and "fc6" in plain.stderr and len(plain.stderr.splitlines()) == 1
    result = runner.invoke(app, ["throughput", net, "vgg16"])
    assert result.exit_code == 3 and "no deployment fits" in result.stderr


def test_the_provision_table_and_json_show_memory_bought(tmp_path):
    from tests.cli import app, invoke_json, runner

    net = _camera_network(tmp_path, {"memory": 256e6, "memory_price": 1e-8})
    out = invoke_json(["provision", net, "vgg16", "--throughput", "5", "--json"])
    rows = {m["id"]: m for m in out["memory"]}
    assert out["memory_upgrades"] == {v: m["added"] for v, m in rows.items() if m["added"] > 0}
    for m in rows.values():  # every node ends with what it needs
        assert m["need"] <= m["memory"] * (1 + 1e-12)
    assert sum(m["added"] for m in rows.values()) > 0
    table = runner.invoke(app, ["provision", net, "vgg16", "--throughput", "5"])
    assert table.exit_code == 0
    assert "memory" in table.stdout and "has (after upgrades)" in table.stdout
