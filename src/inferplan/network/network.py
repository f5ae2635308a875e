"""The :class:`Network` value: compute nodes, directed links, a source and a target."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from inferplan.errors import InvalidNetwork
from inferplan.network.costs import CapacityCost, LinearCost

if TYPE_CHECKING:
    import networkx as nx  # loaded by the conversions only: planning does not need it

__all__ = ["Link", "Network", "Node"]


def _check_capacity(value: float, where: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
        raise InvalidNetwork(
            f"capacity must be a positive finite number, got {value!r}", field=where
        )


def _check_price(value: float, where: str) -> None:
    if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
        raise InvalidNetwork(
            f"price must be a non-negative finite number, got {value!r}", field=where
        )


@dataclass(frozen=True)
class Node:
    """A compute node: ``capacity`` in FLOP/s, ``price`` per FLOP/s of added capacity.

    ``cost``, when given, replaces the linear ``price`` with any capacity cost function.
    """

    id: str
    capacity: float
    price: float = 0.0
    cost: CapacityCost | None = field(default=None, compare=False)

    @property
    def capacity_cost(self) -> CapacityCost:
        """The cost of added compute: ``cost`` if set, else linear in ``price``."""
        return self.cost if self.cost is not None else LinearCost(self.price)


@dataclass(frozen=True)
class Link:
    """A directed link: ``capacity`` (bandwidth) in bit/s, ``price`` per bit/s added."""

    source: str
    target: str
    capacity: float
    price: float = 0.0
    cost: CapacityCost | None = field(default=None, compare=False)

    @property
    def capacity_cost(self) -> CapacityCost:
        """The cost of added bandwidth: ``cost`` if set, else linear in ``price``."""
        return self.cost if self.cost is not None else LinearCost(self.price)

    @property
    def label(self) -> str:
        return f"{self.source!r}->{self.target!r}"


@dataclass(frozen=True)
class Network:
    """A directed compute network with a source and a target.

    Validated on construction: unique node ids, links between known nodes, no self-loops or
    duplicate links, positive finite capacities, non-negative finite prices, distinct source
    and target, and a path from source to target. Nodes and links off every source-target path
    are legal and ignored by the planners.

    Examples
    --------
    >>> net = Network(
    ...     nodes=(Node("s", 1e9, 1e-9), Node("t", 1e10, 1e-10)),
    ...     links=(Link("s", "t", 1e8, 1e-8),),
    ...     source="s", target="t")
    >>> net.on_path_nodes()
    ('s', 't')
    """

    nodes: tuple[Node, ...]
    links: tuple[Link, ...]
    source: str
    target: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "nodes", tuple(self.nodes))
        object.__setattr__(self, "links", tuple(self.links))
        seen: set[str] = set()
        for k, node in enumerate(self.nodes):
            where = f"nodes[{k}] ({node.id!r})"
            if node.id in seen:
                raise InvalidNetwork(f"duplicate node id {node.id!r}", field=where)
            seen.add(node.id)
            _check_capacity(node.capacity, f"{where}.capacity")
            _check_price(node.price, f"{where}.price")
        pairs: set[tuple[str, str]] = set()
        for k, link in enumerate(self.links):
            where = f"links[{k}] ({link.label})"
            for end in ("source", "target"):
                if getattr(link, end) not in seen:
                    raise InvalidNetwork(
                        f"{end} {getattr(link, end)!r} is not a node of the network", field=where
                    )
            if link.source == link.target:
                raise InvalidNetwork("self-loop: a link must join two different nodes", field=where)
            if (link.source, link.target) in pairs:
                raise InvalidNetwork(
                    f"duplicate link {link.label} (at most one link per direction)", field=where
                )
            pairs.add((link.source, link.target))
            _check_capacity(link.capacity, f"{where}.capacity")
            _check_price(link.price, f"{where}.price")
        for end in ("source", "target"):
            if getattr(self, end) not in seen:
                raise InvalidNetwork(
                    f"{getattr(self, end)!r} is not a node of the network", field=end
                )
        if self.source == self.target:
            raise InvalidNetwork(f"source and target must differ, both are {self.source!r}",
                                 field="target")  # fmt: skip
        if self.target not in self._reachable(self.source, forward=True):
            raise InvalidNetwork(
                f"target {self.target!r} is unreachable from source {self.source!r}",
                field="target",
            )

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The network as a networkx ``DiGraph`` (nodes and links carry their attributes)."""
        return self.to_networkx()

    @cached_property
    def node_by_id(self) -> dict[str, Node]:
        return {node.id: node for node in self.nodes}

    def on_path_nodes(self) -> tuple[str, ...]:
        """Ids of the nodes on some source-target path, in file order."""
        keep = self._reachable(self.source, forward=True)
        keep &= self._reachable(self.target, forward=False)
        return tuple(node.id for node in self.nodes if node.id in keep)

    def _reachable(self, start: str, *, forward: bool) -> set[str]:
        """The nodes reachable from ``start`` along the links (against them if not
        ``forward``), ``start`` included."""
        step: dict[str, list[str]] = {}
        for link in self.links:
            tail, head = (link.source, link.target) if forward else (link.target, link.source)
            step.setdefault(tail, []).append(head)
        seen, stack = {start}, [start]
        while stack:
            for w in step.get(stack.pop(), ()):
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return seen

    def to_networkx(self) -> nx.DiGraph:
        """Nodes with ``capacity``/``price`` (and ``cost``) attributes; links likewise."""
        import networkx as nx

        graph = nx.DiGraph(source=self.source, target=self.target)
        for node in self.nodes:
            graph.add_node(node.id, capacity=node.capacity, price=node.price, cost=node.cost)
        for link in self.links:
            graph.add_edge(
                link.source, link.target, capacity=link.capacity, price=link.price, cost=link.cost
            )
        return graph

    @classmethod
    def from_networkx(
        cls, graph: nx.DiGraph, source: str | None = None, target: str | None = None
    ) -> Network:
        """Build from a ``DiGraph`` whose nodes and edges carry ``capacity`` and ``price``.

        ``source`` and ``target`` default to the graph attributes of the same names.
        """
        source = source if source is not None else graph.graph.get("source")
        target = target if target is not None else graph.graph.get("target")
        if source is None or target is None:
            raise InvalidNetwork("source and target must be given or set as graph attributes")
        try:
            nodes = tuple(
                Node(str(v), d["capacity"], d.get("price", 0.0), d.get("cost"))
                for v, d in graph.nodes(data=True)
            )
            links = tuple(
                Link(str(u), str(v), d["capacity"], d.get("price", 0.0), d.get("cost"))
                for u, v, d in graph.edges(data=True)
            )
        except KeyError as exc:
            raise InvalidNetwork(f"every node and edge needs a {exc.args[0]!r} attribute") from None
        return cls(nodes=nodes, links=links, source=str(source), target=str(target))

    def to_dict(self) -> dict[str, Any]:
        """The network in the network-file format."""

        def element(base: dict[str, Any], cost: CapacityCost | None) -> dict[str, Any]:
            if cost is not None:
                base["cost"] = cost.to_dict()
            return base

        return {
            "source": self.source,
            "target": self.target,
            "nodes": [
                element({"id": n.id, "capacity": n.capacity, "price": n.price}, n.cost)
                for n in self.nodes
            ],
            "links": [
                element(
                    {"source": e.source, "target": e.target, "capacity": e.capacity,
                     "price": e.price},
                    e.cost,
                )
                for e in self.links
            ],
        }  # fmt: skip
