"""Network files (JSON or YAML): loading with validation, and saving."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, model_validator

from inferplan.documents import read_document, validate_document, write_document
from inferplan.errors import InferplanError, InvalidNetwork
from inferplan.network.costs import CapacityCost, LinearCost, ModuleCost, TieredCost
from inferplan.network.network import Link, Network, Node

__all__ = ["cost_from_dict", "load_network", "network_from_dict", "save_network"]


# Strict: a boolean or a quoted number in a file is a mistake, not 1.0 (ints are fine).
Number = Annotated[float, Field(strict=True)]
Price = Annotated[float, Field(strict=True, ge=0, allow_inf_nan=False)]
Size = Annotated[float, Field(strict=True, gt=0, allow_inf_nan=False)]


class _LinearCostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["linear"]
    price: Price
    max: Price = math.inf

    def build(self) -> CapacityCost:
        return LinearCost(self.price, self.max)


class _ModuleCostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["modules"]
    size: Size
    price: Price
    max: Price = math.inf

    def build(self) -> CapacityCost:
        return ModuleCost(self.size, self.price, self.max)


class _TieredCostEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    kind: Literal["tiers"]
    upto: list[Size]
    price: Annotated[list[Price], Field(min_length=1)]
    max: Price = math.inf

    @model_validator(mode="after")
    def _consistent(self) -> _TieredCostEntry:
        self.build()  # the tiers' own checks: ordering, one price per tier
        return self

    def build(self) -> CapacityCost:
        return TieredCost(tuple(self.upto), tuple(self.price), self.max)


_CostEntry = Annotated[
    _LinearCostEntry | _ModuleCostEntry | _TieredCostEntry, Field(discriminator="kind")
]


class _NodeEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    capacity: Number
    price: Number | None = None
    cost: _CostEntry | None = None


class _LinkEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str
    target: str
    capacity: Number
    price: Number | None = None
    cost: _CostEntry | None = None


class _CostFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cost: _CostEntry


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
    entry = validate_document(_CostFile, {"cost": data}, source=source, error=InvalidNetwork)
    return entry.cost.build()


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
    cost = entry.cost.build()
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
