"""Network files (JSON or YAML, elements listed or in tables): loading with validation, and
saving."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from inferplan.documents import (
    collection_paused,
    read_document,
    validate_document,
    write_document,
)
from inferplan.errors import InferplanError, InvalidNetwork
from inferplan.network.cost_columns import RawCosts, check
from inferplan.network.costs import CapacityCost
from inferplan.network.network import Labels, Network

if TYPE_CHECKING:
    from inferplan.network.schema import LinkEntry, NodeEntry

__all__ = ["cost_from_dict", "load_network", "network_from_dict", "save_network"]


def cost_from_dict(data: object, *, source: str | None = None) -> CapacityCost:
    """Build a cost function from its network-file form (the ``cost`` of a node or link).

    ``{"kind": "linear", "price": p}``, ``{"kind": "modules", "size": s, "price": p}`` or
    ``{"kind": "tiers", "upto": [x1, ...], "price": [p1, ...]}``, each with an optional
    ``"max"`` (the most capacity that can be added).

    Raises
    ------
    InvalidNetwork
        Naming the field and the problem.

    Examples
    --------
    >>> cost_from_dict({"kind": "modules", "size": 10e9, "price": 3.0})
    ModuleCost(size=10000000000.0, price=3.0, max_amount=inf)
    """
    from inferplan.network.schema import CostFile

    entry = validate_document(CostFile, {"cost": data}, source=source, error=InvalidNetwork)
    return entry.cost.build()


def _cost(entry: NodeEntry | LinkEntry, where: str) -> tuple[float, CapacityCost | None]:
    if entry.cost is None:
        if entry.price is None:
            raise InvalidNetwork("missing field (give 'price' or 'cost')", field=f"{where}.price")
        return entry.price, None
    cost = entry.cost.build()
    price = entry.price if entry.price is not None else (cost.linear_price or 0.0)
    return price, cost


def _prices(
    entries: Sequence[NodeEntry | LinkEntry], where: Callable[[int], str]
) -> tuple[list[float], dict[int, CapacityCost]]:
    prices, costs = [], {}
    for k, entry in enumerate(entries):
        price, cost = _cost(entry, where(k))
        prices.append(price)
        if cost is not None:
            costs[k] = cost
    return prices, costs


_NODE_FIELDS = ("id", "capacity", "price")
_LINK_FIELDS = ("source", "target", "capacity", "price")
_LINK_OPTIONAL = ("delay_s",)  # fields an element may leave out: 0 then
_TEXT_FIELDS = ("id", "source", "target")
_ENDPOINTS = ("source", "target")


def _plain_elements(
    items: object,
    fields: tuple[str, ...],
    optional: tuple[str, ...] = (),
    nodes: Sequence[str] | None = None,
) -> dict[str, Any] | None:
    """The columns of a list of elements that each have ``fields`` (``price`` may give way
    to a ``cost``), any of the ``optional`` fields (0 where left out) and nothing else, of
    the types the file format asks for (text ids, numbers within the floating-point range),
    or ``None`` when any element differs: then the elements are validated one by one. The
    cost objects are read, not checked, into ``"cost"``
    (:class:`~inferplan.network.cost_columns.RawCosts`) when any element has one. With the
    ``nodes``' ids, a column of links' endpoints that are all among them comes as
    :class:`~inferplan.network.network.Labels` of their positions (each found once here,
    which also shows it is text: no other value equals a text id)."""
    if not isinstance(items, list) or set(map(type, items)) - {dict}:
        return None
    lengths = np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    # every element of just the fields' length gives no optional one, or is not plain: the
    # column reads below refuse it then (a missing field), without looking for the optional
    bare = bool(optional) and bool(np.all(lengths == len(fields)))
    given = {name: _has(items, name) for name in ([] if bare else optional)}
    given = {name: has for name, has in given.items() if has.any()}
    for has in given.values():
        lengths -= has
    columns: dict[str, list[Any]] | None = None
    if np.all(lengths == len(fields)):
        try:
            columns = {name: [item[name] for item in items] for name in fields}
        except KeyError:
            columns = None
    out: dict[str, Any] = {}
    if columns is None:  # some element gives a cost
        has_cost, has_price = _has(items, "cost"), _has(items, "price")
        if not has_cost.any() or not np.array_equal(
            lengths, len(fields) - 1 + has_price + has_cost
        ):
            return None
        has_cost[has_cost] = [items[k]["cost"] is not None for k in np.flatnonzero(has_cost)]
        try:
            columns = {name: [item[name] for item in items] for name in fields if name != "price"}
        except KeyError:
            return None
        columns["price"] = [item.get("price") for item in items]
        rows = np.flatnonzero(has_cost)
        out["cost"] = RawCosts.from_objects(rows, [items[k]["cost"] for k in rows.tolist()])
        priced = np.array([p is not None for p in columns["price"]], dtype=bool)
        if not (priced | has_cost).all():
            return None  # neither price nor cost: the message of the element-by-element path
        out["priced"] = priced
        columns["price"] = [p if p is not None else 0.0 for p in columns["price"]]
    for name in given:
        columns[name] = [item.get(name, 0.0) for item in items]
    index = {} if nodes is None else dict(zip(nodes, range(len(nodes)), strict=True))
    for name, column in columns.items():
        if nodes is not None and name in _ENDPOINTS:
            try:
                found = map(index.__getitem__, column)
                out[name] = Labels(np.fromiter(found, np.int64, count=len(column)), nodes)
                continue
            except (KeyError, TypeError):  # not a node, or a list or mapping: checked below
                pass
        if name in _TEXT_FIELDS:
            if not set(map(type, column)) <= {str}:
                return None
            out[name] = column
            continue
        if not set(map(type, column)) <= {int, float}:
            return None
        try:
            out[name] = np.fromiter(column, dtype=np.float64, count=len(column))
        except OverflowError:
            return None
    return out


def _has(items: list[dict[str, Any]], name: str) -> Any:
    """Whether each of ``items`` has the field ``name`` (one pass in C)."""
    found = map(operator.contains, items, repeat(name))
    return np.fromiter(found, dtype=bool, count=len(items))


def _element_error(kind: str, k: int, element: object) -> None:
    """Raise the error of element ``k`` of ``kind`` (``nodes``, or ``links`` or ``edges`` as
    the file names them) as validating the whole file would report it, by validating that
    element alone; return if it passes."""
    from inferplan.network.schema import LinkEntry, NodeEntry

    model = NodeEntry if kind == "nodes" else LinkEntry
    try:
        validate_document(model, element, source=None, error=InvalidNetwork)
    except InvalidNetwork as exc:
        raise InvalidNetwork(exc.message, field=f"{kind}[{k}]" + (
            f".{exc.field}" if exc.field else "")) from None  # fmt: skip


def _checked_costs(
    elements: dict[str, dict[str, Any]], element: Callable[[str, int], object]
) -> bool:
    """Check the cost objects of the ``nodes`` and ``links`` columns column-wise: raise the
    error of the first element (nodes first) whose cost is refused, as the element-by-element
    validation reports it (``element(kind, k)`` gives the element). Set each kind's
    ``"costs"`` (columns) and fill the prices of elements without one. ``False`` if the
    column check refused a cost the element's own validation accepts (then validate element
    by element)."""
    for kind, columns in elements.items():
        raw: RawCosts | None = columns.get("cost")
        if raw is None:
            continue
        bad = check(raw)
        if bad.any():
            k = int(raw.rows[int(bad.argmax())])
            _element_error(kind, k, element(kind, k))
            return False
    for columns in elements.values():
        raw = columns.pop("cost", None)
        if raw is None:
            continue
        costs = raw.columns()
        columns["costs"] = costs
        unpriced = ~columns.pop("priced")[raw.rows]
        price = columns["price"].copy()
        price[raw.rows[unpriced]] = costs.default_price()[unpriced]
        columns["price"] = price
    return True


def _plain_network(data: object) -> Network | None:
    """The network of a document in the plain shape (every field as :func:`_plain_elements`
    wants it, cost objects checked column-wise), built column-wise; ``None`` for any other
    document."""
    if not isinstance(data, dict) or len(data) != 4:
        return None
    links_key = "links" if "links" in data else "edges"
    if set(data) != {"source", "target", "nodes", links_key}:
        return None
    source, target = data["source"], data["target"]
    memory = _plain_memory(data["nodes"])
    if memory is None:
        return None
    stripped, memory_columns = memory
    nodes = _plain_elements(stripped, _NODE_FIELDS)
    if nodes is None:
        return None
    links = _plain_elements(data[links_key], _LINK_FIELDS, _LINK_OPTIONAL, nodes["id"])
    if not (isinstance(source, str) and isinstance(target, str) and nodes and links):
        return None
    items = {"nodes": data["nodes"], links_key: data[links_key]}
    if not _checked_costs({"nodes": nodes, links_key: links}, lambda kind, k: items[kind][k]):
        return None
    if memory_columns is not None:
        checked = _checked_memory(memory_columns, nodes["id"], lambda k: items["nodes"][k])
        if checked is None:
            return None
        nodes["memory"] = checked
    return _from_plain(nodes, links, source, target)


_MEMORY_FIELDS = ("memory", "memory_price", "memory_cost")


def _plain_memory(items: object) -> tuple[object, dict[str, Any] | None] | None:
    """The nodes of a document without their memory fields and those fields as read (a
    ``memory`` and a ``memory_price`` per node, ``None`` where not given, and the memory
    cost objects as :class:`~inferplan.network.cost_columns.RawCosts`), or ``(items, None)``
    when no node gives one; ``None`` when a memory or memory price is not a number (then the
    nodes are validated one by one)."""
    if not isinstance(items, list) or set(map(type, items)) - {dict}:
        return items, None
    if not any(any(map(operator.contains, items, repeat(name))) for name in _MEMORY_FIELDS):
        return items, None
    memory = [item.get("memory") for item in items]
    price = [item.get("memory_price") for item in items]
    if not set(map(type, memory)) | set(map(type, price)) <= {int, float, type(None)}:
        return None
    rows = np.array([k for k, item in enumerate(items) if item.get("memory_cost") is not None],
                    dtype=np.int64)  # fmt: skip
    raw = RawCosts.from_objects(rows, [items[k]["memory_cost"] for k in rows.tolist()])
    stripped = [{k: v for k, v in item.items() if k not in _MEMORY_FIELDS} for item in items]
    return stripped, {"memory": memory, "memory_price": price, "costs": raw}


def _checked_memory(
    read: dict[str, Any], ids: Sequence[str], element: Callable[[int], object]
) -> dict[str, Any] | None:
    """``from_columns``' memory arguments from the memory fields read (see
    :func:`_plain_memory`): a refused memory cost raises its element's error (``element(k)``
    gives the element); ``None`` when the column check refuses what the element's own
    validation accepts, or a number is beyond the floating-point range."""
    raw: RawCosts = read["costs"]
    bad = check(raw)
    if bad.any():
        k = int(raw.rows[int(bad.argmax())])
        _element_error("nodes", k, element(k))
        return None
    try:
        return _memory_columns(read["memory"], read["memory_price"], raw.columns(), ids)
    except OverflowError:
        return None


def _from_plain(nodes: dict[str, Any], links: dict[str, Any], source: str, target: str) -> Network:
    """The network of plain columns (see :func:`_plain_elements`), with their checked
    ``costs`` and the nodes' ``memory`` and ``memory_bandwidth`` columns if any."""
    return Network.from_columns(
        node_ids=nodes["id"],
        node_capacity=nodes["capacity"],
        node_price=nodes["price"],
        link_source=links["source"],
        link_target=links["target"],
        link_capacity=links["capacity"],
        link_price=links["price"],
        source=source,
        target=target,
        node_costs=nodes.get("costs"),
        link_costs=links.get("costs"),
        **nodes.get("memory", {}),
        link_delay=links.get("delay_s"),
        node_memory_bandwidth=nodes.get("memory_bandwidth"),
    )


def network_from_dict(
    data: object, *, source: str | None = None, folder: str | Path | None = None
) -> Network:
    """Build a :class:`Network` from network-file data, naming ``source`` in errors.

    ``nodes`` and ``links`` are lists of elements, or both names of tables (Parquet or CSV
    files, relative to ``folder``, the current directory by default; see
    :func:`load_network`).
    """
    try:
        if isinstance(data, dict) and any(
            isinstance(data.get(key), str) for key in ("nodes", "links", "edges")
        ):
            return _from_tables(data, source, Path(folder or "."))
        plain = _plain_network(data)
        if plain is not None:
            return plain
        from inferplan.network.schema import NetworkFile

        doc = validate_document(NetworkFile, data, source=source, error=InvalidNetwork)
        node_price, node_costs = _prices(doc.nodes, lambda k: f"nodes[{k}] ({doc.nodes[k].id!r})")
        link_price, link_costs = _prices(
            doc.links, lambda k: f"links[{k}] ({doc.links[k].source!r}->{doc.links[k].target!r})"
        )
        return Network.from_columns(
            node_ids=[n.id for n in doc.nodes],
            node_capacity=[n.capacity for n in doc.nodes],
            node_price=node_price,
            link_source=[e.source for e in doc.links],
            link_target=[e.target for e in doc.links],
            link_capacity=[e.capacity for e in doc.links],
            link_price=link_price,
            source=doc.source,
            target=doc.target,
            node_costs=node_costs,
            link_costs=link_costs,
            **_listed_memory(doc.nodes),
            link_delay=[e.delay_s for e in doc.links],
            node_memory_bandwidth=[math.inf if n.memory_bandwidth is None else n.memory_bandwidth
                                   for n in doc.nodes],
        )  # fmt: skip
    except InferplanError as exc:
        raise (exc.located(source) if source else exc) from None


def _listed_memory(nodes: Sequence[NodeEntry]) -> dict[str, Any]:
    """The memory columns of validated node entries (none when no node gives memory)."""
    if not any(n.memory is not None or n.memory_price is not None or n.memory_cost is not None
               for n in nodes):  # fmt: skip
        return {}
    return _memory_columns(
        [n.memory for n in nodes],
        [n.memory_price for n in nodes],
        {k: n.memory_cost.build() for k, n in enumerate(nodes) if n.memory_cost is not None},
        [n.id for n in nodes],
    )


def _memory_columns(
    memory: Sequence[float | None], price: Sequence[float | None], costs: Any,
    ids: Sequence[str],
) -> dict[str, Any]:  # fmt: skip
    """``from_columns``' memory arguments from a memory and a memory price per node
    (``None``: not given), the memory cost functions and the node ids; a NaN memory price is
    refused here (NaN is how the column says "not given")."""
    prices = np.array([math.nan if p is None else p for p in price], dtype=np.float64)
    given = np.array([p is not None for p in price], dtype=bool)
    bad = np.flatnonzero(given & np.isnan(prices))
    if bad.size:
        k = int(bad[0])
        raise InvalidNetwork("memory_price must be a non-negative finite number, got nan",
                             field=f"nodes[{k}] ({ids[k]!r}).memory_price")  # fmt: skip
    return {
        "node_memory": np.array([math.inf if m is None else m for m in memory], dtype=np.float64),
        "node_memory_price": prices,
        "node_memory_costs": costs,
    }


def load_network(path: str | Path) -> Network:
    """Read a network file (JSON or YAML), its elements listed or in tables.

    A network file lists its ``nodes`` and ``links``, or names two tables (Parquet or CSV
    files, relative to the network file; reading them needs pyarrow,
    ``pip install 'inferplan[tables]'``) that hold them one row each: see
    :func:`save_network` and ``docs/codesign-scale.md``. Either way every element is
    validated, and an error names the file, the element and what is wrong.

    Examples
    --------
    >>> import inferplan, pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "net.json"
    >>> _ = f.write_text('{"source": "s", "target": "t", '
    ...     '"nodes": [{"id": "s", "capacity": 1e9, "price": 1e-9}, '
    ...     '{"id": "t", "capacity": 1e10, "price": 1e-10}], '
    ...     '"links": [{"source": "s", "target": "t", "capacity": 1e8, "price": 1e-8}]}')
    >>> inferplan.load_network(f).target
    't'
    """
    path = Path(path)
    found: list[Network] = []

    def plain(data: object) -> bool:  # the common shape, built as it is checked
        try:
            network = _plain_network(data)
        except InferplanError as exc:
            raise exc.located(str(path)) from None
        found.extend([network] if network is not None else [])
        return network is not None

    # a listed network is half a million objects or more: no collection passes over them
    with collection_paused():
        data = read_document(path, shallow=plain)
        if found:
            del data  # freed while the collector is paused
            return found[0]
    return network_from_dict(data, source=str(path), folder=path.parent)


def save_network(
    network: Network, path: str | Path, *, tables: bool | Literal["parquet", "csv"] = False
) -> None:
    """Write ``network`` in the network-file format (JSON or YAML by suffix).

    With ``tables`` (``True`` or ``"parquet"``, or ``"csv"``) the nodes and links go to two
    tables beside the file, ``<stem>.nodes.parquet`` and ``<stem>.links.parquet`` (or
    ``.csv``), which the file names: the form for large networks (needs pyarrow).

    Examples
    --------
    >>> import inferplan, pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "net.yaml"
    >>> net = inferplan.tiered(seed=1)
    >>> inferplan.save_network(net, f, tables=True)
    >>> print(f.read_text())
    links: net.links.parquet
    nodes: net.nodes.parquet
    source: s
    target: t
    <BLANKLINE>
    >>> inferplan.load_network(f) == net
    True
    """
    if not tables:
        write_document(network.to_dict(), path)
        return
    from inferplan.network.tables import write_tables

    path = Path(path)
    nodes, links = write_tables(network, path, "csv" if tables == "csv" else "parquet")
    write_document(
        {"source": network.source, "target": network.target, "nodes": nodes, "links": links},
        path,
    )


def _from_tables(data: dict[str, Any], source: str | None, folder: Path) -> Network:
    """The network whose elements are in the tables ``data`` names; an element's error
    names its table."""
    from inferplan.network import tables
    from inferplan.network.schema import TablesFile

    doc = validate_document(TablesFile, data, source=source, error=InvalidNetwork)
    files = {"nodes": folder / doc.nodes, "links": folder / doc.links}
    read = {
        "nodes": tables.read_table(files["nodes"], tables.NODE_COLUMNS),
        "links": tables.read_table(files["links"], tables.LINK_COLUMNS),
    }
    csv = {kind: files[kind].suffix.lower() == ".csv" for kind in files}
    columns = {"nodes": tables.NODE_COLUMNS, "links": tables.LINK_COLUMNS}
    try:
        nodes = tables.plain_columns(read["nodes"], columns["nodes"], csv=csv["nodes"])
        links = tables.plain_columns(read["links"], columns["links"], csv=csv["links"])

        def element(kind: str, k: int) -> object:
            return tables.table_elements(read[kind].slice(k, 1), columns[kind], csv=csv[kind])[0]

        memory = tables.memory_fields(read["nodes"], csv["nodes"])
        bandwidth = tables.memory_bandwidths(read["nodes"])
        if nodes is not None:
            nodes = None if bandwidth is None else {**nodes, "memory_bandwidth": bandwidth}
        if nodes is not None and memory:
            checked = _checked_memory(memory, nodes["id"], lambda k: element("nodes", k))
            nodes = None if checked is None else {**nodes, "memory": checked}
        if (
            nodes is not None
            and links is not None
            and memory is not None
            and _checked_costs({"nodes": nodes, "links": links}, element)
        ):
            return _from_plain(nodes, links, doc.source, doc.target)
        listed = {
            "source": doc.source,
            "target": doc.target,
            **{kind: tables.table_elements(read[kind], columns[kind], csv=csv[kind])
               for kind in files},
        }  # fmt: skip
        return network_from_dict(listed)
    except InferplanError as exc:
        kind = (exc.field or "").split("[")[0]
        if kind in files:
            exc.located(str(files[kind]))
        raise
