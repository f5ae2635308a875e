"""Cost functions kept as columns: checked column-wise with the messages of the
element-by-element validation, and priced as the cost objects price."""

from __future__ import annotations

import math
import pickle
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import InvalidNetwork
from inferplan.codesign import compile_instance
from inferplan.codesign.engine.compiled import kernel_arrays
from inferplan.network import io, tables
from inferplan.network.cost_columns import CostColumns, RawCosts, check
from inferplan.network.costs import CapacityCost, LinearCost, ModuleCost, TieredCost, segments
from tests.codesign.test_tables import _write_tables
from tests.strategies import capacity_costs

FILE_KINDS = ("linear", "capped", "modules", "tiers")

# --- documents with cost objects, good and bad ---------------------------------------------

values = st.one_of(
    st.sampled_from([0, 1, 2, 0.0, -0.0, 0.5, 3.0, -1.0, -2, math.inf, -math.inf, math.nan,
                     1e308, 10**400, True, "1", None, [1.0]]),
    st.floats(-5, 50),
)  # fmt: skip
lists = st.one_of(
    st.lists(st.sampled_from([1.0, 2, 3.5, 7.0, 0.0, -1.0, math.inf, math.nan, True, "a"]),
             max_size=4),
    st.lists(st.floats(0.5, 20), max_size=4).map(sorted),
    st.sampled_from([None, 3.0, "x", {}]),
)  # fmt: skip


@st.composite
def cost_objects(draw: st.DrawFn, defects: bool) -> object:
    """A cost object as a file may hold it: a valid one, or with ``defects`` often one with
    a defect (unknown or missing kind, a missing or extra field, a bad number or list), or
    not a mapping at all."""
    shape = draw(st.sampled_from(["valid", "valid", "valid", "edited", "tiers", "other"]
                                 if defects else ["valid"]))  # fmt: skip
    if shape == "other":
        return draw(st.sampled_from([None, 3.0, "linear", ["linear"]]))  # None: no cost
    cost: dict[str, Any] = draw(capacity_costs(draw(st.sampled_from(FILE_KINDS)))).to_dict()
    if shape == "valid":
        return cost
    if shape == "tiers":
        return {"kind": "tiers", "upto": draw(lists), "price": draw(lists),
                **({"max": draw(values)} if draw(st.booleans()) else {})}  # fmt: skip
    edit = draw(st.sampled_from(["kind", "drop", "add", "value"]))
    key = draw(st.sampled_from(["kind", "size", "price", "max", "upto", "extra"]))
    if edit == "kind":
        cost["kind"] = draw(st.sampled_from(["linear", "modules", "tiers", "cubic", 1, None]))
    elif edit == "drop":
        cost.pop(key, None)
    else:
        cost[key] = draw(lists if key == "upto" or (key == "price" and draw(st.booleans()))
                         else values)  # fmt: skip
    return cost


@st.composite
def documents(draw: st.DrawFn) -> dict[str, Any]:
    """A small network document whose elements may carry cost objects (and then may lack a
    price), and may have a bad capacity or price too."""
    net = draw(st.sampled_from([inferplan.tiered(seed=1), inferplan.layered_dag(6, 12, seed=3)]))
    doc = net.to_dict()
    defects = draw(st.booleans())
    for kind in ("nodes", "links"):
        for element in doc[kind]:
            if draw(st.integers(0, 2)) == 0:
                element["cost"] = draw(cost_objects(defects))
                if draw(st.booleans()):
                    element.pop("price")
            if defects and draw(st.integers(0, 20)) == 0:
                element[draw(st.sampled_from(["capacity", "price"]))] = draw(
                    st.sampled_from([-1.0, 0.0, math.inf]))  # fmt: skip
    if draw(st.integers(0, 5)) == 0:
        doc["edges"] = doc.pop("links")  # the other name of the links
    return doc


def _outcome(build: Any) -> tuple[str, Any]:
    try:
        net = build()
    except InvalidNetwork as exc:
        return "error", str(exc)
    costs = [net.node_cost(k) for k in range(len(net.node_ids))] + [
        net.link_cost(k) for k in range(net.link_tail.size)
    ]
    return "network", (net.to_dict(), costs)


def _element_by_element(doc: dict[str, Any]) -> tuple[str, Any]:
    """What the pydantic models, one element at a time, make of ``doc``."""
    with mock.patch.object(io, "_plain_network", return_value=None):
        return _outcome(lambda: io.network_from_dict(doc))


@settings(max_examples=150, deadline=None)
@given(doc=documents())
def test_column_wise_costs_match_checking_each_element(doc):
    expected = _element_by_element(doc)
    columns = io._plain_elements(doc["nodes"], io._NODE_FIELDS), io._plain_elements(
        doc.get("links", doc.get("edges")), io._LINK_FIELDS)  # fmt: skip
    if all(c is not None for c in columns):  # the column path takes it, without falling back
        assert _outcome(lambda: io._plain_network(doc) or _no_fallback()) == expected
    assert _outcome(lambda: io.network_from_dict(doc)) == expected


def _no_fallback() -> None:
    raise AssertionError("the column path fell back to element-by-element validation")


def test_the_column_path_validates_at_most_the_failing_element():
    doc = inferplan.tiered(seed=1).to_dict()
    for k, node in enumerate(doc["nodes"]):
        node["cost"] = {"kind": "modules", "size": 1e9, "price": 2.0 if k != 3 else -2.0}
    calls = []
    real = io.validate_document

    def spy(model: Any, data: Any, **kwargs: Any) -> Any:
        calls.append(model.__name__)
        return real(model, data, **kwargs)

    with mock.patch.object(io, "validate_document", spy), pytest.raises(InvalidNetwork) as info:
        io.network_from_dict(doc)
    assert calls == ["NodeEntry"]
    assert str(info.value) == (
        "nodes[3].cost.price: Input should be greater than or equal to 0, got -2.0"
    )


# --- columns price as the objects do ----------------------------------------------------------


@st.composite
def cost_lists(draw: st.DrawFn) -> list[CapacityCost]:
    return draw(st.lists(st.sampled_from(FILE_KINDS).flatmap(capacity_costs), max_size=8))


def _columns(costs: list[CapacityCost | None]) -> CostColumns:
    rows = np.array([k for k, c in enumerate(costs) if c is not None], dtype=np.int64)
    raw = RawCosts.from_objects(rows, [costs[k].to_dict() for k in rows.tolist()])
    assert not check(raw).any()
    return raw.columns()


@settings(max_examples=300, deadline=None)
@given(costs=st.lists(st.one_of(st.none(), st.sampled_from(FILE_KINDS).flatmap(capacity_costs)),
                      max_size=8),
       prices=st.lists(st.floats(0, 5), min_size=8, max_size=8),
       data=st.data())  # fmt: skip
def test_columns_price_exactly_as_the_cost_objects(costs, prices, data):
    columns = _columns(costs)
    column = np.array(prices[: len(costs)])
    made = [columns.get(k) for k in range(len(costs))]
    assert made == costs  # the objects made from the columns are the file's
    amounts = np.array([0.0, 0.5, 3.0, 40.0, 100.0, 250.0, 1e4])
    for again, cost in zip(made, costs, strict=True):
        if isinstance(cost, TieredCost):  # made from parts: the parts the constructor makes
            assert again._knots.tolist() == cost._knots.tolist()
            assert again._values.tolist() == cost._values.tolist()
        if cost is not None:
            assert again(amounts).tolist() == cost(amounts).tolist()
    own = {k: c for k, c in enumerate(costs) if c is not None}
    positions = np.array(data.draw(st.permutations(range(len(costs)))), dtype=np.int64)
    for costs_here in (columns, CostColumns.of(own)):  # columns; the objects themselves
        price, cap, other = costs_here.pricing(column, positions)
        every = [own.get(int(k), LinearCost(column[k])) for k in positions.tolist()]
        assert price.tolist() == [0.0 if c.linear_price is None else c.linear_price
                                  for c in every]  # fmt: skip
        assert cap.tolist() == [c.max_amount for c in every]
        assert other.tolist() == [r for r, c in enumerate(every) if c.linear_price is None]
        pieces = costs_here.pieces(column, positions)
        for r, cost in enumerate(every):
            where = slice(int(pieces.ptr[r]), int(pieces.ptr[r + 1]))
            expected = segments(cost)
            if expected is None:
                assert pieces.table[r] and where.start == where.stop
                assert pieces.cap[r] == cost.max_amount
                continue
            assert not pieces.table[r]
            assert tuple(pieces.starts[where].tolist()) == expected.starts
            assert tuple(pieces.slopes[where].tolist()) == expected.slopes
            assert tuple(pieces.values[where].tolist()) == expected.values
            assert pieces.cap[r] == expected.cap


def test_a_network_of_columns_makes_each_cost_when_looked_up(tmp_path):
    net = inferplan.layered_dag(30, 90, seed=2)
    doc = net.to_dict()
    for k, node in enumerate(doc["nodes"]):
        node["cost"] = {"kind": "tiers", "upto": [1e9 * (k + 1)], "price": [1e-9, 2e-9]}
    doc["links"][4]["cost"] = {"kind": "modules", "size": 1e6, "price": 0.5, "max": 5e6}
    path = tmp_path / "net.json"
    inferplan.save_network(inferplan.network_from_dict(doc), path)
    back = inferplan.load_network(path)
    assert isinstance(back.node_costs, CostColumns)
    inst = compile_instance(back, inferplan.vgg16())
    arrays = kernel_arrays(inst)
    assert not back.node_costs._made and not back.link_costs._made  # no cost object made
    assert arrays.table_nodes.size == 0
    assert inst.link_positions[arrays.table_links].tolist() == [4]
    assert back.link_costs[4] == ModuleCost(1e6, 0.5, 5e6)
    assert back.nodes[2].cost == TieredCost((3e9,), (1e-9, 2e-9))
    assert 5 not in back.link_costs and back.link_cost(5) == LinearCost(back.link_price[5])
    assert list(back.link_costs) == [4] and len(back.node_costs) == 30
    again = pickle.loads(pickle.dumps(back))  # the columns pickle, without the objects made
    assert again.node_costs.rows.tolist() == list(range(30)) and not again.node_costs._made
    assert [again.node_cost(k) for k in range(30)] == [back.node_cost(k) for k in range(30)]
    moved = back.with_endpoints("v1", "t")  # the same columns, not copied into objects
    assert moved.node_costs is back.node_costs and moved.link_costs is back.link_costs


# --- tables: the same outcome as reading their rows element by element ------------------------


def _table_outcome(path: Any) -> tuple[str, Any]:
    return _outcome(lambda: inferplan.load_network(path))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(doc=documents(), form=st.sampled_from(["parquet", "csv"]))
def test_tables_with_costs_load_as_their_rows_element_by_element(tmp_path_factory, doc, form):
    representable = all(
        isinstance(e.get("cost"), dict) and set(e["cost"]) <= {"kind", *TABLE_KEYS}
        and "kind" in e["cost"] and isinstance(e["cost"]["kind"], str)
        and all(isinstance(v, list) == (k in ("upto", "price") and e["cost"]["kind"] == "tiers")
                for k, v in e["cost"].items() if k != "kind")
        for kind in ("nodes", "links") for e in doc.get(kind, doc.get("edges")) if "cost" in e
    )  # fmt: skip
    assume(representable and "links" in doc)
    folder = tmp_path_factory.mktemp("tables")
    try:
        path = _write_tables(doc, folder, form)
    except (pa.ArrowException, TypeError, ValueError):
        assume(False)  # mixed types in one column: not a table
    with (
        mock.patch.object(io, "_plain_network", return_value=None),
        mock.patch.object(tables, "plain_columns", return_value=None),
    ):
        expected = _table_outcome(path)
    assert _table_outcome(path) == expected


TABLE_KEYS = ("size", "price", "max", "upto")


@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_tables_with_costs_are_read_column_wise(tmp_path, form):
    net = inferplan.layered_dag(40, 160, seed=5)
    doc = net.to_dict()
    for k, link in enumerate(doc["links"]):
        link.pop("price")
        link["cost"] = ({"kind": "tiers", "upto": [1e8, 3e8], "price": [1e-8, 2e-8, 4e-8]}
                        if k % 2 else {"kind": "linear", "price": 1e-8, "max": 1e9})  # fmt: skip
    doc["nodes"][7]["cost"] = {"kind": "modules", "size": 1e9, "price": 3.0}
    path = _write_tables(doc, tmp_path, form)
    rows = []
    real = tables.table_elements

    def spy(table: Any, *args: Any, **kwargs: Any) -> Any:
        rows.append(len(table))
        return real(table, *args, **kwargs)

    with mock.patch.object(tables, "table_elements", spy):
        back = inferplan.load_network(path)
    assert rows == []  # no row read as an element
    assert back == inferplan.network_from_dict(doc)
    assert [back.link_cost(k) for k in range(160)] == [
        io.cost_from_dict(e["cost"]) for e in doc["links"]
    ]
    assert back.node_costs[7] == ModuleCost(1e9, 3.0) and list(back.node_costs) == [7]
    doc["links"][101]["cost"]["upto"] = [3e8, 1e8]
    path = _write_tables(doc, tmp_path, form)
    with mock.patch.object(tables, "table_elements", spy), pytest.raises(InvalidNetwork) as info:
        inferplan.load_network(path)
    assert rows == [1]  # the failing row only, for its message
    assert str(info.value) == (
        f"{tmp_path / ('links.' + form)}: links[101].cost: 'upto' must be positive and strictly "
        "increasing, got [300000000.0, 100000000.0]"
    )


def test_one_tier_without_bound_is_linear_in_every_form():
    doc = inferplan.tiered(seed=2).to_dict()
    doc["nodes"][1]["cost"] = {"kind": "tiers", "upto": [], "price": [2e-9]}
    net = io.network_from_dict(doc)
    assert net.node_cost(1) == TieredCost((), (2e-9,))
    assert net.node_cost(1)(np.array([0.0, 3e9])).tolist() == [0.0, 6.0]
    assert _element_by_element(doc) == _outcome(lambda: net)
    assert net.node_costs.pricing(net.node_price, np.array([1]))[0].tolist() == [2e-9]
