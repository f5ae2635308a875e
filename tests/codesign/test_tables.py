"""Large-network loading: the table form (Parquet, CSV), column-wise validation against an
element-by-element reference, and the vectorised compilation against networkx."""

from __future__ import annotations

import json
import math
import pickle
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import networkx as nx
import numpy as np
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Infeasible, InvalidFile, InvalidNetwork, Link, Network, NetworkHasCycle, Node
from inferplan.codesign import compile_instance
from inferplan.network import network as network_module
from tests.cli import app, fifo, runner
from tests.strategies import small_dags, small_networks, small_profiles

FORMS = ("json", "parquet", "csv")
FILE_COSTS = ("linear", "capped", "modules", "tiers")  # the kinds a file can hold
slow = settings(max_examples=40, deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip


def _saved(network: Network, folder: Path, form: str) -> Path:
    path = folder / form / "net.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    inferplan.save_network(network, path, tables=False if form == "json" else form)
    return path


def _costs(network: Network) -> list[Any]:
    return [n.cost for n in network.nodes] + [e.cost for e in network.links]


@slow
@given(net=st.one_of(small_dags(cost_kinds=FILE_COSTS, delays=True),
                     small_networks(cost_kinds=FILE_COSTS, delays=True), small_dags()),
       profile=small_profiles(), alpha=st.floats(0.2, 1.5))  # fmt: skip
def test_every_form_loads_the_same_network_and_plan(tmp_path_factory, net, profile, alpha):
    folder = tmp_path_factory.mktemp("forms")
    loaded = {form: inferplan.load_network(_saved(net, folder, form)) for form in FORMS}
    outcomes = set()
    for back in loaded.values():
        assert back == net
        assert back.nodes == net.nodes and back.links == net.links
        assert _costs(back) == _costs(net)
        try:
            interval = inferplan.throughput(back, profile).interval / alpha
            plan = inferplan.provision(back, profile, interval=interval)
            outcomes.add(json.dumps(plan.to_dict(), sort_keys=True))
        except (Infeasible, NetworkHasCycle) as exc:
            outcomes.add(str(exc))
    assert len(outcomes) == 1


@pytest.mark.parametrize("parser", ["orjson", "json"])
def test_both_json_parsers_give_the_same_network(tmp_path, monkeypatch, parser):
    net = inferplan.layered_dag(30, 120, seed=4)
    path = _saved(net, tmp_path, "json")
    if parser == "json":
        monkeypatch.setitem(sys.modules, "orjson", None)  # as if not installed
    assert inferplan.load_network(path).to_dict() == net.to_dict()


def test_tables_without_pyarrow_say_what_to_install(tmp_path, monkeypatch):
    path = _saved(inferplan.tiered(seed=1), tmp_path, "parquet")
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(InvalidFile, match=r"needs pyarrow: pip install 'inferplan\[tables\]'"):
        inferplan.load_network(path)


# --- validation: the same one-line errors for listed elements and for tables ---------------


def _write_tables(doc: dict[str, Any], folder: Path, form: str) -> Path:
    """The document's elements written as tables by pyarrow directly (no inferplan code, so
    that invalid elements can be written), and the network file naming them."""
    for kind in ("nodes", "links"):
        rows = []
        for element in doc[kind]:
            row = {k: v for k, v in element.items() if k != "cost"}
            for key, value in element.get("cost", {}).items():
                name = "tier_price" if key == "price" and isinstance(value, list) else key
                if form == "csv" and isinstance(value, list):
                    value = ";".join(map(repr, value))
                row[f"cost_{name}"] = value
            rows.append(row)
        names = list(dict.fromkeys(name for row in rows for name in row))
        table = pa.Table.from_pylist([{n: row.get(n) for n in names} for row in rows])
        target = folder / f"{kind}.{form}"
        (pa_csv.write_csv if form == "csv" else pq.write_table)(table, target)
    path = folder / "net.yaml"
    path.write_text(f"source: {doc['source']}\ntarget: {doc['target']}\n"
                    f"nodes: nodes.{form}\nlinks: links.{form}\n")  # fmt: skip
    return path


GOOD = {
    "source": "s",
    "target": "t",
    "nodes": [
        {"id": "s", "capacity": 12e9, "price": 2.5e-9},
        {"id": "a", "capacity": 30e9, "price": 1e-9},
        {"id": "b", "capacity": 20e9, "price": 1e-9},
        {"id": "t", "capacity": 150e9, "price": 1e-10},
    ],
    "links": [
        {"source": "s", "target": "a", "capacity": 50e6, "price": 1e-7},
        {"source": "a", "target": "t", "capacity": 400e6, "price": 2e-8},
        {"source": "s", "target": "b", "capacity": 60e6, "price": 1e-7},
        {"source": "b", "target": "t", "capacity": 300e6, "price": 2e-8},
    ],
}

DEFECTS: list[tuple[str, str, Any]] = [  # (elements, what is edited, the new value)
    ("nodes", "id", "the previous id"),
    ("links", "source", "x"),
    ("links", "target", "y"),
    ("links", "target", "its source (a self-loop)"),
    ("links", "duplicate", "appended"),
    *((kind, what, value) for kind in ("nodes", "links") for what, value in [
        ("capacity", 0.0), ("capacity", -5.0), ("capacity", math.inf), ("capacity", math.nan),
        ("price", -1.0), ("price", math.nan),
        ("cost", {"kind": "modules", "size": 0.0, "price": 1.0}),
        ("cost", {"kind": "tiers", "upto": [2.0, 1.0], "price": [1.0, 2.0]}),
        ("cost", {"kind": "cubic", "price": 1.0}),
        ("cost", {"kind": "linear", "price": -2.0}),
        ("cost", {"kind": "linear", "price": 1.0, "max": -1.0}),
        ("cost", {"kind": "linear", "price": 1.0, "size": 2.0}),
        ("cost", {"kind": "modules", "price": 1.0}),
        ("cost", {"kind": "modules", "size": -1.0, "price": 1.0}),
        ("cost", {"kind": "modules", "size": 1.0, "price": math.nan}),
        ("cost", {"kind": "tiers", "upto": [1.0, 2.0], "price": [1.0]}),
        ("cost", {"kind": "tiers", "upto": [1.0, 1.0], "price": [1.0, 2.0]}),
        ("cost", {"kind": "tiers", "upto": [0.0], "price": [1.0, 2.0]}),
        ("cost", {"kind": "tiers", "upto": [1.0, 2.0], "price": [1.0, math.inf]}),
        ("cost", {"kind": "tiers", "upto": [1.0], "price": [1.0, -2.0], "max": 3.0}),
    ]),
    *(("links", "delay_s", value) for value in (-1.0, math.inf, math.nan)),
]  # fmt: skip


def _defective(kind: str, what: str, value: Any, k: int) -> dict[str, Any]:
    """``GOOD`` with a defect at element ``k`` of ``kind``."""
    doc = json.loads(json.dumps(GOOD))
    element = doc[kind][k]
    if what == "id":
        element["id"] = doc["nodes"][k - 1 if k else 1]["id"]
    elif what == "duplicate":
        doc["links"].append({**element})
    elif value == "its source (a self-loop)":
        element["target"] = element["source"]
    elif what == "cost":
        element.pop("price")
        element["cost"] = value
    else:
        element[what] = value
    return doc


def _message(path: Path) -> tuple[str, str]:
    """The file and the rest of the one-line error of ``inferplan provision`` on ``path``."""
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "1"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    file, rest = line.removeprefix("error: ").split(": ", 1)
    return file, rest


@pytest.mark.parametrize("form", ["parquet", "csv"])
@pytest.mark.parametrize("defect", DEFECTS, ids=lambda d: f"{d[0]}-{d[1]}-{d[2]}")
@pytest.mark.parametrize("k", [0, 2, 3])
def test_tables_report_each_defect_as_the_listed_form_does(tmp_path, defect, k, form):
    kind = defect[0]
    doc = _defective(*defect, k)
    listed = tmp_path / "net.json"
    listed.write_text(json.dumps(doc))
    file, expected = _message(listed)
    assert file == str(listed)
    at = len(doc["links"]) - 1 if defect[1] == "duplicate" else (k or 1) if defect[1] == "id" else k
    assert expected.startswith(f"{kind}[{at}]")
    file, rest = _message(_write_tables(doc, tmp_path, form))
    assert (file, rest) == (str(tmp_path / f"{kind}.{form}"), expected)


@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_link_delays_may_be_left_out_or_empty(tmp_path, form):
    doc = json.loads(json.dumps(GOOD))
    assert inferplan.load_network(_write_tables(doc, tmp_path, form)).link_delay.tolist() == [0] * 4
    doc["links"][1]["delay_s"], doc["links"][3]["delay_s"] = 0.25, 3
    loaded = inferplan.load_network(_write_tables(doc, tmp_path, form))  # empty cells: 0
    assert loaded.link_delay.tolist() == [0.0, 0.25, 0.0, 3.0]
    assert loaded == inferplan.load_network(_saved(loaded, tmp_path, form))


@pytest.mark.parametrize(
    ("rows", "name", "expected"),
    [
        ({"id": ["s"], "capacity": [1.0], "price": [1.0], "speed": [2.0]}, "nodes",
         "unknown column 'speed'"),
        ({"id": ["s"], "price": [1.0]}, "nodes", "missing column 'capacity'"),
        ({"id": ["s"], "capacity": [1.0]}, "nodes",
         "missing column 'price' (give 'price' or 'cost_kind')"),
        ({"source": ["s"], "capacity": [1.0], "price": [1.0]}, "links",
         "missing column 'target'"),
    ],
)  # fmt: skip
def test_bad_columns_are_named(tmp_path, rows, name, expected):
    doc = json.loads(json.dumps(GOOD))
    path = _write_tables(doc, tmp_path, "parquet")
    pq.write_table(pa.table(rows), tmp_path / f"{name}.parquet")
    with pytest.raises(InvalidNetwork) as info:
        inferplan.load_network(path)
    assert str(info.value).startswith(f"{tmp_path / f'{name}.parquet'}: {expected}")


def test_text_in_a_csv_number_column_is_named_like_the_listed_form(tmp_path):
    path = _write_tables(GOOD, tmp_path, "csv")
    text = (tmp_path / "links.csv").read_text().replace("400000000", "fast", 1)
    (tmp_path / "links.csv").write_text(text)
    with pytest.raises(InvalidNetwork) as info:
        inferplan.load_network(path)
    assert str(info.value) == (
        f"{tmp_path / 'links.csv'}: links[1].capacity: Input should be a valid number, got 'fast'"
    )


@pytest.mark.parametrize("name", ["nodes.txt", "missing.parquet"])
def test_unreadable_tables(tmp_path, name):
    path = _write_tables(GOOD, tmp_path, "parquet")
    path.write_text(path.read_text().replace("nodes.parquet", name))
    with pytest.raises(InvalidFile, match=r"must be a \.parquet or \.csv|file not found"):
        inferplan.load_network(path)


def test_text_ids_in_csv_stay_text(tmp_path):
    doc = json.loads(json.dumps(GOOD).replace('"a"', '"007"'))
    net = inferplan.load_network(_write_tables(doc, tmp_path, "csv"))
    assert "007" in net.node_ids


# --- column-wise validation against an element-by-element reference -------------------------


def _reference_error(nodes: list[Node], links: list[Link], source: str, target: str) -> str:
    """The first error, checking one element at a time in file order (as the earlier
    implementation did)."""

    def bad(value: object, low_ok: bool) -> bool:
        if not isinstance(value, int | float):
            return True
        return not (math.isfinite(value) and (value >= 0 if low_ok else value > 0))

    seen: set[str] = set()
    for k, n in enumerate(nodes):
        where = f"nodes[{k}] ({n.id!r})"
        if n.id in seen:
            return f"{where}: duplicate node id {n.id!r}"
        seen.add(n.id)
        if bad(n.capacity, False):
            return (
                f"{where}.capacity: capacity must be a positive finite number, got {n.capacity!r}"
            )
        if bad(n.price, True):
            return f"{where}.price: price must be a non-negative finite number, got {n.price!r}"
    pairs: set[tuple[str, str]] = set()
    for k, e in enumerate(links):
        where = f"links[{k}] ({e.source!r}->{e.target!r})"
        for end in ("source", "target"):
            if getattr(e, end) not in seen:
                return f"{where}: {end} {getattr(e, end)!r} is not a node of the network"
        if e.source == e.target:
            return f"{where}: self-loop: a link must join two different nodes"
        if (e.source, e.target) in pairs:
            return (f"{where}: duplicate link {e.source!r}->{e.target!r} (at most one link per "
                    "direction)")  # fmt: skip
        pairs.add((e.source, e.target))
        if bad(e.capacity, False):
            return (
                f"{where}.capacity: capacity must be a positive finite number, got {e.capacity!r}"
            )
        if bad(e.price, True):
            return f"{where}.price: price must be a non-negative finite number, got {e.price!r}"
    for end, name in (("source", source), ("target", target)):
        if name not in seen:
            return f"{end}: {name!r} is not a node of the network"
    if source == target:
        return f"target: source and target must differ, both are {source!r}"
    graph = nx.DiGraph([(e.source, e.target) for e in links])
    if target not in graph or not nx.has_path(graph, source, target):
        return f"target: target {target!r} is unreachable from source {source!r}"
    return ""


names = st.sampled_from(["a", "b", "c", "d"])
numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3),
                    st.sampled_from([0.0, 1.0, 2.5, -0.0]))  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(st.builds(Node, names, numbers, numbers), max_size=5),
    links=st.lists(st.builds(Link, names, names, numbers, numbers), max_size=7),
    source=names,
    target=names,
)
def test_column_wise_validation_matches_checking_each_element(nodes, links, source, target):
    def outcome(build: Any) -> str:
        try:
            build()
        except InvalidNetwork as exc:
            return str(exc)
        return ""

    assert outcome(lambda: Network(nodes, links, source, target)) == _reference_error(
        nodes, links, source, target
    )
    # columns hold floats: their messages are the reference's on the elements as floats
    nodes = [Node(n.id, float(n.capacity), float(n.price)) for n in nodes]
    links = [Link(e.source, e.target, float(e.capacity), float(e.price)) for e in links]
    assert outcome(lambda: Network.from_columns(
        node_ids=[n.id for n in nodes], node_capacity=[n.capacity for n in nodes],
        node_price=[n.price for n in nodes], link_source=[e.source for e in links],
        link_target=[e.target for e in links], link_capacity=[e.capacity for e in links],
        link_price=[e.price for e in links], source=source, target=target,
    )) == _reference_error(nodes, links, source, target)  # fmt: skip


# --- vectorised compilation against networkx ---------------------------------------------


@settings(max_examples=200, deadline=None)
@given(net=st.one_of(small_dags(max_nodes=8), small_networks(max_nodes=6)),
       shuffle=st.randoms(use_true_random=False))  # fmt: skip
@pytest.mark.parametrize("few_links", [0, 2_000])  # numpy frontiers; a plain search
def test_compiled_order_reachability_and_adjacency_match_networkx(net, shuffle, few_links):
    nodes = list(net.nodes)
    shuffle.shuffle(nodes)  # file order need not be topological
    with mock.patch.object(network_module, "_FEW_LINKS", few_links):
        net = Network(nodes, net.links, net.source, net.target)
        assert net.on_path is not None
    graph = nx.DiGraph([(e.source, e.target) for e in net.links])
    keep = (nx.descendants(graph, net.source) | {net.source}) & (
        nx.ancestors(graph, net.target) | {net.target}
    )
    position = {n.id: k for k, n in enumerate(net.nodes)}
    assert net.on_path_nodes() == tuple(sorted(keep, key=position.__getitem__))
    sub = graph.subgraph(keep)
    inst = compile_instance(net, inferplan.Profile("p", (1.0,), (1.0, 1.0)),
                            require_acyclic=False)  # fmt: skip
    if nx.is_directed_acyclic_graph(sub):
        order = list(nx.lexicographical_topological_sort(sub, key=position.__getitem__))
        assert list(inst.node_ids) == order
        assert inst.acyclic
    else:
        assert list(inst.node_ids) == sorted(keep, key=position.__getitem__)
        assert not inst.acyclic
    ends = zip(inst.link_src.tolist(), inst.link_dst.tolist(), strict=True)
    links = [(inst.node_ids[u], inst.node_ids[v]) for u, v in ends]
    assert links == [(e.source, e.target) for e in net.links if {e.source, e.target} <= keep]
    assert [(e.source, e.target) for e in inst.links] == links
    for v in range(len(inst.node_ids)):
        assert inst.out_links[v].tolist() == [k for k, (a, _) in enumerate(links)
                                              if a == inst.node_ids[v]]  # fmt: skip
        assert inst.in_links[v].tolist() == [k for k, (_, b) in enumerate(links)
                                             if b == inst.node_ids[v]]  # fmt: skip
    assert inst.capacity.tolist() == [net.node_by_id[v].capacity for v in inst.node_ids]
    assert inst.source == inst.node_ids.index(net.source)


def test_lookups_make_one_element_and_networks_stay_immutable():
    net = inferplan.layered_dag(40, 200, seed=2)
    inst = compile_instance(net, inferplan.Profile("p", (1.0,), (1.0, 1.0)))
    assert "links" not in net.__dict__  # no Link object made by compiling
    assert inst.links[-1] == net.links[inst.link_positions[-1]]
    assert len(inst.link_costs) == inst.n_links
    assert inst.node_costs[0].linear_price == net.node_price[inst.node_positions[0]]
    with pytest.raises(AttributeError, match="immutable"):
        net.source = "x"  # type: ignore[misc]
    with pytest.raises(ValueError, match="read-only"):
        net.node_capacity[0] = 1.0
    assert np.array_equal(net.link_capacity, [e.capacity for e in net.links])
    again = pickle.loads(pickle.dumps(inst))  # the lookups pickle with the instance
    assert again.links[2] == inst.links[2] and again.network == net


def test_cli_plans_from_tables_equal_plans_from_json(tmp_path):
    net = inferplan.layered_dag(60, 400, seed=3)
    outputs = set()
    for form in FORMS:
        path = _saved(net, tmp_path, form)
        result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "2",
                                     "--json"])  # fmt: skip
        assert result.exit_code == 0, result.output
        outputs.add(result.stdout)
    assert len(outputs) == 1


@pytest.mark.parametrize(
    ("change", "expected"),
    [({"node_price": [1.0]}, "nodes: node columns of different lengths"),
     ({"link_capacity": [1.0, 2.0]}, "links: link columns of different lengths")],
)  # fmt: skip
def test_columns_of_different_lengths_are_refused(change, expected):
    columns = {
        "node_ids": ["s", "t"], "node_capacity": [1.0, 1.0], "node_price": [1.0, 1.0],
        "link_source": ["s"], "link_target": ["t"], "link_capacity": [1.0], "link_price": [1.0],
    }  # fmt: skip
    with pytest.raises(InvalidNetwork) as info:
        Network.from_columns(**{**columns, **change}, source="s", target="t")
    assert str(info.value) == expected


# --- tables that are not plain tables: repeated columns, special files ---------------------


@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_a_repeated_column_is_named(tmp_path, form):
    path = _write_tables(GOOD, tmp_path, form)
    nodes = tmp_path / f"nodes.{form}"
    if form == "csv":
        lines = nodes.read_text().splitlines()
        nodes.write_text("\n".join(f"{line},{line.split(',')[-1]}" for line in lines) + "\n")
    else:
        table = pq.read_table(nodes)
        pq.write_table(table.append_column(table.field(2), table.column(2)), nodes)
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "1"])
    assert result.exit_code == 2
    assert result.stderr == f"error: {nodes}: column {'price'!r} appears more than once\n"


@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_a_table_that_is_a_fifo_is_refused_without_blocking(tmp_path, form):
    path = _write_tables(GOOD, tmp_path, form)
    links = tmp_path / f"links.{form}"
    links.unlink()
    fifo(links)  # a read would wait for a writer for ever
    with pytest.raises(InvalidFile, match=r"links\.\w+: cannot read file \(a FIFO, not a regular"):
        inferplan.load_network(path)
