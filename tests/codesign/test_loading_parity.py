"""Loading large networks fast without loosening a check: the column-wise reading of a listed
JSON file gives the network or the error that validating every element with the pydantic
models gives, on random documents with defects of every kind; Parquet tables kept in several
row groups or with dictionary-coded endpoints load as the listed form; the radix order equals
numpy's stable sort; the collector pause restores the collector."""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path
from typing import Any
from unittest import mock

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import InferplanError
from inferplan.arrays import stable_order
from inferplan.documents import collection_paused
from inferplan.network import io

BASES = (inferplan.tiered(seed=1), inferplan.layered_dag(6, 12, seed=3))

# values a JSON file may hold where a field belongs: of the right type or not
WRONG = st.sampled_from([
    "1.5", "s", "", True, False, None, [1.0], {}, {"a": 1}, 0, -1, 3, 2**63, 2**64 + 1,
    -(2**70), 10**400, 0.0, -0.0, -2.5, 1e308, 1e-320,
])  # fmt: skip


EDITS = ("value", "value", "drop", "extra", "element", "endpoint", "repeat", "loop", "delay",
         "memory", "bad number")  # fmt: skip


@st.composite
def defective(draw: st.DrawFn) -> dict[str, Any]:
    """A small network document, often with one or more defects: a field of the wrong
    type, missing, extra or renamed; an element that is not a mapping; an endpoint that is
    no node; a repeated node or link; a self-loop; a bad number; delays and memory fields
    sometimes given."""
    doc = json.loads(json.dumps(draw(st.sampled_from(BASES)).to_dict()))
    kinds = ["nodes", "links"]
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(kinds))
        items = doc[kind]
        k = draw(st.integers(0, len(items) - 1))
        edit = draw(st.sampled_from(EDITS))
        if not isinstance(items[k], dict):
            continue
        fields = ["id", "capacity", "price"] if kind == "nodes" else [
            "source", "target", "capacity", "price"]  # fmt: skip
        if edit == "value":
            items[k][draw(st.sampled_from(fields))] = draw(WRONG)
        elif edit == "drop":
            items[k].pop(draw(st.sampled_from(fields)), None)
        elif edit == "extra":
            items[k][draw(st.sampled_from(["speed", "cost", "memory_bandwidth"]))] = draw(WRONG)
        elif edit == "element":
            items[k] = draw(st.sampled_from([None, 3, "node", [1, 2], []]))
        elif edit == "endpoint" and kind == "links":
            items[k][draw(st.sampled_from(["source", "target"]))] = draw(
                st.sampled_from(["nowhere", "S", "t ", "v0"]))  # fmt: skip
        elif edit == "repeat":
            items.insert(draw(st.integers(0, len(items))), json.loads(json.dumps(items[k])))
        elif edit == "loop" and kind == "links":
            items[k]["target"] = items[k].get("source")
        elif edit == "delay" and kind == "links":
            items[k]["delay_s"] = draw(st.one_of(st.floats(0, 1e-3), WRONG))
        elif edit == "memory" and kind == "nodes":
            items[k][draw(st.sampled_from(["memory", "memory_price"]))] = draw(
                st.one_of(st.floats(1e6, 1e9), WRONG))  # fmt: skip
        elif edit == "bad number":
            items[k][draw(st.sampled_from(["capacity", "price"]))] = draw(
                st.sampled_from([-1.0, 0.0, math.inf, -math.inf, math.nan]))  # fmt: skip
    if draw(st.integers(0, 6)) == 0:
        doc[draw(st.sampled_from(["source", "target"]))] = draw(st.sampled_from(["x", 1, None]))
    if draw(st.integers(0, 6)) == 0:
        doc["edges"] = doc.pop("links")
    return doc


def _outcome(load: Any) -> tuple[str, Any]:
    try:
        net = load()
    except InferplanError as exc:
        return "error", str(exc)
    return "network", (net.to_dict(), net.link_delay.tolist(), net.node_memory.tolist())


def _element_by_element(path: Path) -> tuple[str, Any]:
    """What loading ``path`` gives when every element is validated by the pydantic models."""
    with mock.patch.object(io, "_plain_network", return_value=None):
        return _outcome(lambda: inferplan.load_network(path))


@settings(max_examples=300, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(doc=defective())
def test_listed_files_load_as_validating_each_element(tmp_path, doc):
    path = tmp_path / "net.json"
    path.write_text(json.dumps(doc, allow_nan=True))
    assert _outcome(lambda: inferplan.load_network(path)) == _element_by_element(path)
    assert gc.isenabled()


def test_endpoints_found_by_position_keep_their_messages(tmp_path):
    doc = inferplan.tiered(seed=1).to_dict()
    doc["links"][2]["target"] = ["s"]  # unhashable: the element's own validation names it
    path = tmp_path / "net.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InferplanError) as info:
        inferplan.load_network(path)
    assert str(info.value) == (
        f"{path}: links[2].target: Input should be a valid string, got ['s']"
    )
    doc["links"][2]["target"] = doc["links"][2]["source"]
    path.write_text(json.dumps(doc))
    with pytest.raises(InferplanError, match=r"links\[2\] \('\w+'->'\w+'\): self-loop"):
        inferplan.load_network(path)


# --- Parquet: row groups and dictionary-coded endpoints -------------------------------------


def _parquet(net: inferplan.Network, folder: Path, rows: int, coded: bool) -> Path:
    """``net``'s tables written by pyarrow directly, ``rows`` to a row group, the endpoints
    dictionary-coded or plain text."""
    doc = net.to_dict()
    for kind in ("nodes", "links"):
        table = pa.Table.from_pylist(doc[kind])
        if coded and kind == "links":
            for name in ("source", "target"):
                index = table.column_names.index(name)
                table = table.set_column(index, name, table[name].dictionary_encode())
        pq.write_table(table, folder / f"{kind}.parquet", row_group_size=rows)
    path = folder / "net.json"
    path.write_text(json.dumps({"source": net.source, "target": net.target,
                                "nodes": "nodes.parquet", "links": "links.parquet"}))  # fmt: skip
    return path


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(seed=st.integers(0, 50), rows=st.integers(1, 40), coded=st.booleans())
def test_parquet_row_groups_load_as_the_listed_form(tmp_path_factory, seed, rows, coded):
    net = inferplan.layered_dag(12, 40, seed=seed)
    path = _parquet(net, tmp_path_factory.mktemp("tables"), rows, coded)
    assert inferplan.load_network(path) == net


def test_parquet_endpoints_that_are_no_nodes_are_named(tmp_path):
    net = inferplan.tiered(seed=1)
    doc = net.to_dict()
    doc["links"][3]["source"] = "nowhere"
    listed = tmp_path / "listed.json"
    listed.write_text(json.dumps(doc))
    with pytest.raises(InferplanError) as expected:
        inferplan.load_network(listed)
    table = pa.Table.from_pylist(doc["links"])
    pq.write_table(table, tmp_path / "links.parquet", row_group_size=2)
    pq.write_table(pa.Table.from_pylist(doc["nodes"]), tmp_path / "nodes.parquet")
    path = tmp_path / "net.json"
    path.write_text(json.dumps({"source": "s", "target": "t", "nodes": "nodes.parquet",
                                "links": "links.parquet"}))  # fmt: skip
    with pytest.raises(InferplanError) as info:
        inferplan.load_network(path)
    assert str(info.value) == str(expected.value).replace(
        str(listed), str(tmp_path / "links.parquet")
    )


# --- the radix order and the collector pause ----------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(keys=st.lists(st.one_of(st.integers(0, 5), st.integers(0, 2**17), st.integers(0, 2**62),
                               st.integers(-3, 3)), max_size=60))  # fmt: skip
def test_stable_order_is_numpys_stable_sort(keys):
    array = np.array(keys, dtype=np.int64)
    assert stable_order(array).tolist() == np.argsort(array, kind="stable").tolist()


def test_the_collector_resumes_as_it_was():
    assert gc.isenabled()
    with pytest.raises(ValueError), collection_paused():
        assert not gc.isenabled()
        raise ValueError
    assert gc.isenabled()
    gc.disable()
    try:
        with collection_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it did not run before: it does not run after
    finally:
        gc.enable()
