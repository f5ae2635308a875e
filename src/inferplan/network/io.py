"""Network files (JSON or YAML): loading with validation, and saving."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

from inferplan.codesign.costs import CapacityCost, cost_from_dict
from inferplan.documents import read_document, validate_document, write_document
from inferplan.errors import InferplanError, InvalidNetwork
from inferplan.network.network import Link, Network, Node

__all__ = ["load_network", "network_from_dict", "save_network"]


# Strict: a boolean or a quoted number in a file is a mistake, not 1.0 (ints are fine).
Number = Annotated[float, Field(strict=True)]


class _NodeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    capacity: Number
    price: Number | None = None
    cost: dict[str, Any] | None = None


class _LinkEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    capacity: Number
    price: Number | None = None
    cost: dict[str, Any] | None = None


class _NetworkFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    nodes: list[_NodeEntry]
    links: list[_LinkEntry] = Field(validation_alias=AliasChoices("links", "edges"))


def _cost(entry: _NodeEntry | _LinkEntry, where: str) -> tuple[float, CapacityCost | None]:
    if entry.cost is None:
        if entry.price is None:
            raise InvalidNetwork("missing field (give 'price' or 'cost')", field=f"{where}.price")
        return entry.price, None
    try:
        cost = cost_from_dict(entry.cost)
    except ValueError as exc:
        raise InvalidNetwork(str(exc), field=f"{where}.cost") from None
    price = entry.price if entry.price is not None else (cost.linear_price or 0.0)
    return price, cost


def network_from_dict(data: object, *, source: str | None = None) -> Network:
    """Build a :class:`Network` from network-file data, naming ``source`` in errors."""
    doc = validate_document(_NetworkFile, data, source=source, error=InvalidNetwork)
    try:
        nodes = []
        for k, n in enumerate(doc.nodes):
            price, cost = _cost(n, f"nodes[{k}] ({n.id!r})")
            nodes.append(Node(n.id, n.capacity, price, cost))
        links = []
        for k, e in enumerate(doc.links):
            price, cost = _cost(e, f"links[{k}] ({e.source!r}->{e.target!r})")
            links.append(Link(e.source, e.target, e.capacity, price, cost))
        return Network(nodes=tuple(nodes), links=tuple(links), source=doc.source, target=doc.target)
    except InferplanError as exc:
        raise (exc.located(source) if source else exc) from None


def load_network(path: str | Path) -> Network:
    """Read a network file (JSON or YAML).

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
    return network_from_dict(read_document(path), source=str(path))


def save_network(network: Network, path: str | Path) -> None:
    """Write ``network`` in the network-file format (JSON or YAML by suffix)."""
    write_document(network.to_dict(), path)
