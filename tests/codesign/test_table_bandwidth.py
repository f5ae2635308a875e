"""A node table's ``memory_bandwidth`` column: read as the listed form's field, written back,
and each bad value refused with the listed form's one-line error naming the table."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import inferplan
from tests.cli import app, runner

pa = pytest.importorskip("pyarrow")
pa_csv = pytest.importorskip("pyarrow.csv")
pq = pytest.importorskip("pyarrow.parquet")

DOC: dict[str, Any] = {
    "source": "s",
    "target": "t",
    "nodes": [
        {"id": "s", "capacity": 1e10, "price": 1e-9, "memory_bandwidth": 3e11},
        {"id": "a", "capacity": 2e10, "price": 1e-9},
        {"id": "t", "capacity": 3e10, "price": 1e-9, "memory_bandwidth": 2},
    ],
    "links": [
        {"source": "s", "target": "a", "capacity": 1e8, "price": 1e-8},
        {"source": "a", "target": "t", "capacity": 1e8, "price": 1e-8},
    ],
}


def _tables(doc: dict[str, Any], folder: Path, form: str, column: Any = None) -> Path:
    """``doc`` as a network file naming two tables (an empty cell where a node gives no
    bandwidth); ``column``, if given, is the nodes' ``memory_bandwidth`` column."""
    for kind in ("nodes", "links"):
        given = kind == "nodes" and column is not None
        rows = [{n: v for n, v in row.items() if not (given and n == "memory_bandwidth")}
                for row in doc[kind]]  # fmt: skip
        names = list(dict.fromkeys(name for row in rows for name in row))
        table = pa.Table.from_pylist([{n: row.get(n) for n in names} for row in rows])
        if given:
            table = table.append_column("memory_bandwidth", column)
        (pa_csv.write_csv if form == "csv" else pq.write_table)(table, folder / f"{kind}.{form}")
    path = folder / "net.yaml"
    path.write_text(f"source: s\ntarget: t\nnodes: nodes.{form}\nlinks: links.{form}\n")
    return path


@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_the_column_is_read_as_the_listed_field(tmp_path: Path, form: str) -> None:
    listed = tmp_path / "net.json"
    listed.write_text(json.dumps(DOC))
    expected = inferplan.load_network(listed)
    assert expected.node_memory_bandwidth.tolist() == [3e11, math.inf, 2.0]
    loaded = inferplan.load_network(_tables(DOC, tmp_path, form))
    assert loaded.node_memory_bandwidth.tolist() == [3e11, math.inf, 2.0]
    assert loaded == expected


@pytest.mark.parametrize("form", ["parquet", "csv"])
def test_saved_tables_keep_the_bandwidths(tmp_path: Path, form: str) -> None:
    listed = tmp_path / "net.json"
    listed.write_text(json.dumps(DOC))
    network = inferplan.load_network(listed)
    saved = tmp_path / "out" / "net.json"
    saved.parent.mkdir()
    inferplan.save_network(network, saved, tables=form)
    back = inferplan.load_network(saved)
    assert back == network
    assert np.array_equal(back.node_memory_bandwidth, network.node_memory_bandwidth)


def _error(path: Path) -> str:
    """The one-line error of ``inferplan provision`` on ``path`` (exit 2)."""
    result = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "1"])
    assert result.exit_code == 2, result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line.removeprefix("error: ")


@pytest.mark.parametrize("form", ["parquet", "csv"])
@pytest.mark.parametrize("value", [-1.0, 0.0, math.nan, "fast", True])
def test_a_bad_bandwidth_names_the_table_row_and_field(tmp_path: Path, form: str,
                                                       value: Any) -> None:  # fmt: skip
    if form == "csv" and value is True:
        pytest.skip("CSV has no booleans: a 'true' cell is text, the 'fast' case")
    doc = json.loads(json.dumps(DOC))
    doc["nodes"][2]["memory_bandwidth"] = value
    listed = tmp_path / "net.json"
    listed.write_text(json.dumps(doc))
    column = None
    if not isinstance(value, float):  # a column of text or booleans, not of numbers
        column = pa.array([None, None, value], pa.bool_() if value is True else pa.string())
    message = _error(_tables(doc, tmp_path, form, column))
    table = str(tmp_path / f"nodes.{form}")
    assert message.startswith(f"{table}: nodes[2]")
    assert "memory_bandwidth" in message
    if not (isinstance(value, float) and math.isnan(value)):  # JSON files have no NaN
        listed_message = _error(listed)
        assert message == listed_message.replace(str(listed), table, 1)
