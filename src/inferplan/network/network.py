"""The :class:`Network` value: compute nodes, directed links, a source and a target.

A network keeps its elements as columns (a list of ids, numpy arrays of numbers and link
endpoints, cost functions as :class:`~inferplan.network.cost_columns.CostColumns`), validated
column-wise: a network of
half a million links costs no Python object per element. :attr:`Network.nodes` and
:attr:`Network.links` build the :class:`Node` and :class:`Link` objects when first asked for.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray, stable_order
from inferplan.errors import InvalidNetwork
from inferplan.network.cost_columns import CostColumns
from inferplan.network.costs import CapacityCost, LinearCost

if TYPE_CHECKING:
    import networkx as nx  # loaded by the conversions only: planning does not need it

__all__ = [
    "NO_MEMORY_FOR_SALE",
    "Labels",
    "Link",
    "Network",
    "Node",
    "adjacency",
    "memory_cost_of",
    "reachable",
]


@dataclass(frozen=True)
class Node:
    """A compute node: ``capacity`` in FLOP/s, ``price`` per FLOP/s of added capacity.

    ``cost``, when given, replaces the linear ``price`` with any capacity cost function.
    ``memory`` is the node's memory in bytes (``None``: unlimited); ``memory_price`` the price
    per byte added (``None``: memory cannot be added), or ``memory_cost`` any cost function of
    the bytes added, as ``cost`` is of the compute. ``memory_bandwidth`` is the bytes/s its
    memory moves (``None``: unlimited), which LLM serving's node time model reads.
    """

    id: str
    capacity: float
    price: float = 0.0
    cost: CapacityCost | None = field(default=None, compare=False)
    memory: float | None = None
    memory_price: float | None = None
    memory_cost: CapacityCost | None = field(default=None, compare=False)
    memory_bandwidth: float | None = None

    @property
    def capacity_cost(self) -> CapacityCost:
        """The cost of added compute: ``cost`` if set, else linear in ``price``."""
        return self.cost if self.cost is not None else LinearCost(self.price)

    @property
    def memory_capacity_cost(self) -> CapacityCost:
        """The cost of added memory: ``memory_cost`` if set, else linear in ``memory_price``,
        else nothing can be added."""
        return memory_cost_of(self.memory_cost, self.memory_price)


NO_MEMORY_FOR_SALE = LinearCost(0.0, 0.0)
"""The memory cost of a node with neither ``memory_price`` nor ``memory_cost``: nothing can be
added."""


def memory_cost_of(cost: CapacityCost | None, price: float | None) -> CapacityCost:
    """A node's memory cost from its ``memory_cost`` and ``memory_price`` (``None`` or NaN
    when not given)."""
    if cost is not None:
        return cost
    if price is None or math.isnan(price):
        return NO_MEMORY_FOR_SALE
    return LinearCost(price)


@dataclass(frozen=True)
class Link:
    """A directed link: ``capacity`` (bandwidth) in bit/s, ``price`` per bit/s added, and
    ``delay_s``, the propagation delay (seconds) every transfer over it takes besides its
    bits' transmission time (no capacity bought shortens it)."""

    source: str
    target: str
    capacity: float
    price: float = 0.0
    cost: CapacityCost | None = field(default=None, compare=False)
    delay_s: float = 0.0

    @property
    def capacity_cost(self) -> CapacityCost:
        """The cost of added bandwidth: ``cost`` if set, else linear in ``price``."""
        return self.cost if self.cost is not None else LinearCost(self.price)

    @property
    def label(self) -> str:
        return f"{self.source!r}->{self.target!r}"


def _floats(values: Sequence[object]) -> FloatArray:
    """``values`` as floats, NaN (which no check accepts) for anything that is not an ``int``
    or ``float`` or is beyond the floating-point range."""
    if set(map(type, values)) <= {float, int}:
        try:
            return np.array(values, dtype=np.float64)
        except OverflowError:
            pass
    out = np.full(len(values), np.nan)
    for k, value in enumerate(values):
        if isinstance(value, int | float):
            with contextlib.suppress(OverflowError):
                out[k] = float(value)
    return out


def _first(mask: npt.NDArray[np.bool_]) -> int:
    """The first index where ``mask`` holds, or its length if none."""
    k = int(mask.argmax()) if mask.size else 0
    return k if mask.size and mask[k] else mask.size


def _first_repeat(values: Sequence[Any]) -> int:
    """The first index whose value occurred before, or the length if none."""
    seen: set[Any] = set()
    for k, value in enumerate(values):
        if value in seen:
            return k
        seen.add(value)
    return len(values)


class Labels(Sequence[str]):
    """Text stored as codes into a list of distinct ``values`` (``values[codes[k]]`` is item
    ``k``): how tables store the endpoints of half a million links among a few thousand
    node ids, looked up once per distinct id."""

    def __init__(self, codes: IntArray, values: Sequence[str]) -> None:
        self.codes, self.values = codes, values

    def __len__(self) -> int:
        return self.codes.size

    @overload
    def __getitem__(self, k: int) -> str: ...
    @overload
    def __getitem__(self, k: slice) -> Sequence[str]: ...
    def __getitem__(self, k: int | slice) -> str | Sequence[str]:
        if isinstance(k, slice):
            return [self.values[c] for c in self.codes[k].tolist()]
        return self.values[int(self.codes[k])]


def _positions(names: Sequence[str], index: Mapping[str, int]) -> IntArray:
    """The position of each name in ``index``, ``-1`` for a name it lacks."""
    if isinstance(names, Labels):
        return _positions(names.values, index)[names.codes]
    if not names:
        return np.zeros(0, dtype=np.int64)
    try:
        return np.fromiter(map(index.__getitem__, names), dtype=np.int64, count=len(names))
    except (KeyError, TypeError):
        return np.array([index.get(v, -1) for v in names], dtype=np.int64)


def _bad_capacity(values: FloatArray) -> npt.NDArray[np.bool_]:
    return ~(np.isfinite(values) & (values > 0))


def _bad_price(values: FloatArray) -> npt.NDArray[np.bool_]:
    return ~(np.isfinite(values) & (values >= 0))


_bad_delay = _bad_price  # a delay, like a price, is a non-negative finite number


def adjacency(ends: IntArray, n: int) -> tuple[IntArray, IntArray]:
    """Compressed rows of links by one end (``ends``, a node ``0..n-1`` per link): the links
    whose end is node ``v`` are ``order[start[v]:start[v + 1]]``, in increasing order."""
    if bool(np.all(ends[1:] >= ends[:-1])):  # already grouped, as files often are
        order = np.arange(ends.size, dtype=np.int64)
    else:
        order = stable_order(ends)
    start = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(np.bincount(ends, minlength=n), out=start[1:])
    return start, order


_FEW_LINKS = 2_000


def reachable(start: IntArray, heads: IntArray, origin: int) -> npt.NDArray[np.bool_]:
    """Nodes reachable from ``origin`` (included) along links whose heads, in the order of
    the compressed rows ``start`` (see :func:`adjacency`), are ``heads``: one breadth-first
    frontier at a time, each expanded by numpy at once (a plain search for a few links)."""
    if heads.size <= _FEW_LINKS:  # a few links: one Python step per link beats numpy's calls
        first, to = start.tolist(), heads.tolist()
        found, stack = [False] * (start.size - 1), [origin]
        found[origin] = True
        while stack:
            v = stack.pop()
            for w in to[first[v] : first[v + 1]]:
                if not found[w]:
                    found[w] = True
                    stack.append(w)
        return np.array(found, dtype=bool)
    seen = np.zeros(start.size - 1, dtype=bool)
    seen[origin] = True
    stamp = np.zeros(start.size - 1, dtype=np.int64)
    frontier = np.array([origin], dtype=np.int64)
    while frontier.size:
        first = start[frontier]
        counts = start[frontier + 1] - first
        total = int(counts.sum())
        if not total:
            break
        # the links of every frontier node, as one index array
        offsets = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(total)
        nxt = heads[offsets]
        nxt = nxt[~seen[nxt]]
        seen[nxt] = True
        # each new node once, without sorting: keep the occurrence whose stamp survives
        stamp[nxt] = np.arange(nxt.size)
        frontier = nxt[stamp[nxt] == np.arange(nxt.size)]
    return seen


class Network:
    """A directed compute network with a source and a target.

    Validated on construction: unique node ids, links between known nodes, no self-loops or
    duplicate links, positive finite capacities, non-negative finite prices, distinct source
    and target, and a path from source to target. Nodes and links off every source-target path
    are legal and ignored by the planners. Immutable.

    Build it from :class:`Node` and :class:`Link` objects, or from columns with
    :meth:`from_columns` (no object per element; what loading large files and
    :func:`~inferplan.network.generators.layered_dag` use).

    Examples
    --------
    >>> net = Network(
    ...     nodes=(Node("s", 1e9, 1e-9), Node("t", 1e10, 1e-10)),
    ...     links=(Link("s", "t", 1e8, 1e-8),),
    ...     source="s", target="t")
    >>> net.on_path_nodes()
    ('s', 't')
    """

    node_ids: tuple[str, ...]
    """Node ids in file order."""
    node_capacity: FloatArray
    """Compute capacity of each node (FLOP/s), in file order."""
    node_price: FloatArray
    """Price per FLOP/s added of each node (its linear price)."""
    link_tail: IntArray
    """Position (in :attr:`node_ids`) of each link's source, in file order."""
    link_head: IntArray
    """Position of each link's target."""
    link_capacity: FloatArray
    """Bandwidth of each link (bit/s)."""
    link_price: FloatArray
    """Price per bit/s added of each link (its linear price)."""
    link_delay: FloatArray
    """Propagation delay of each link (s), 0 unless given."""
    node_costs: CostColumns
    """The nodes that have a cost function, by position (the others cost their price): a
    mapping whose objects are made when looked up."""
    link_costs: CostColumns
    """The links that have a cost function, by position."""
    node_memory: FloatArray
    """Memory of each node (bytes), ``inf`` where unlimited (not given)."""
    node_memory_price: FloatArray
    """Price per byte of memory added of each node, NaN where not given."""
    node_memory_costs: CostColumns
    """The nodes that have a memory cost function, by position."""
    node_memory_bandwidth: FloatArray
    """Memory bandwidth of each node (bytes/s), ``inf`` where unlimited (not given)."""
    source: str
    target: str

    def __init__(
        self, nodes: Iterable[Node], links: Iterable[Link], source: str, target: str
    ) -> None:
        nodes, links = tuple(nodes), tuple(links)
        raw: dict[str, Sequence[object]] = {
            "nodes.capacity": [n.capacity for n in nodes],
            "nodes.price": [n.price for n in nodes],
            "links.capacity": [e.capacity for e in links],
            "links.price": [e.price for e in links],
            "nodes.memory": [n.memory for n in nodes],
            "nodes.memory_price": [n.memory_price for n in nodes],
            "links.delay_s": [e.delay_s for e in links],
        }
        memory = (
            _floats([math.inf if n.memory is None else n.memory for n in nodes]),
            _floats([math.nan if n.memory_price is None else n.memory_price for n in nodes]),
            CostColumns.of({k: n.memory_cost for k, n in enumerate(nodes)
                            if n.memory_cost is not None}),
        )  # fmt: skip
        self._build(
            [n.id for n in nodes],
            _floats(raw["nodes.capacity"]),
            _floats(raw["nodes.price"]),
            [e.source for e in links],
            [e.target for e in links],
            _floats(raw["links.capacity"]),
            _floats(raw["links.price"]),
            source,
            target,
            CostColumns.of({k: n.cost for k, n in enumerate(nodes) if n.cost is not None}),
            CostColumns.of({k: e.cost for k, e in enumerate(links) if e.cost is not None}),
            raw,
            _floats(raw["links.delay_s"]),
            memory,
            _floats([math.inf if n.memory_bandwidth is None else n.memory_bandwidth
                     for n in nodes]),
        )  # fmt: skip
        self.__dict__["nodes"], self.__dict__["links"] = nodes, links

    @classmethod
    def from_columns(
        cls,
        *,
        node_ids: Sequence[str],
        node_capacity: npt.ArrayLike,
        node_price: npt.ArrayLike,
        link_source: Sequence[str],
        link_target: Sequence[str],
        link_capacity: npt.ArrayLike,
        link_price: npt.ArrayLike,
        source: str,
        target: str,
        node_costs: Mapping[int, CapacityCost] | None = None,
        link_costs: Mapping[int, CapacityCost] | None = None,
        link_delay: npt.ArrayLike | None = None,
        node_memory: npt.ArrayLike | None = None,
        node_memory_price: npt.ArrayLike | None = None,
        node_memory_costs: Mapping[int, CapacityCost] | None = None,
        node_memory_bandwidth: npt.ArrayLike | None = None,
    ) -> Network:
        """A network from columns: one entry per node (``node_*``) and per link (``link_*``,
        endpoints by node id; ``link_delay`` the propagation delays in seconds, all 0 when not
        given), and the cost functions of the elements that have one, by position (a mapping,
        or :class:`~inferplan.network.cost_columns.CostColumns`). ``node_memory`` (bytes,
        ``inf`` for unlimited) and ``node_memory_price`` (per byte, NaN where memory cannot be
        added) are unlimited and not for sale when not given, ``node_memory_bandwidth``
        (bytes/s) unlimited. Validated as the constructor
        validates, with the same messages.

        Examples
        --------
        >>> net = Network.from_columns(
        ...     node_ids=["s", "t"], node_capacity=[1e9, 1e10], node_price=[1e-9, 1e-10],
        ...     link_source=["s"], link_target=["t"], link_capacity=[1e8], link_price=[1e-8],
        ...     source="s", target="t")
        >>> net.links[0]
        Link(source='s', target='t', capacity=100000000.0, price=1e-08, cost=None, delay_s=0.0)
        """
        net = cls.__new__(cls)
        net._build(
            list(node_ids),
            np.asarray(node_capacity, dtype=np.float64),
            np.asarray(node_price, dtype=np.float64),
            link_source,
            link_target,
            np.asarray(link_capacity, dtype=np.float64),
            np.asarray(link_price, dtype=np.float64),
            source,
            target,
            CostColumns.of(node_costs),
            CostColumns.of(link_costs),
            {},
            None if link_delay is None else np.asarray(link_delay, dtype=np.float64),
            (
                np.full(len(node_ids), np.inf) if node_memory is None
                else np.asarray(node_memory, dtype=np.float64),
                np.full(len(node_ids), np.nan) if node_memory_price is None
                else np.asarray(node_memory_price, dtype=np.float64),
                CostColumns.of(node_memory_costs),
            ),
            None if node_memory_bandwidth is None
            else np.asarray(node_memory_bandwidth, dtype=np.float64),
        )  # fmt: skip
        return net

    def _build(
        self,
        ids: list[str],
        node_capacity: FloatArray,
        node_price: FloatArray,
        link_source: Sequence[str],
        link_target: Sequence[str],
        link_capacity: FloatArray,
        link_price: FloatArray,
        source: str,
        target: str,
        node_costs: CostColumns,
        link_costs: CostColumns,
        raw: Mapping[str, Sequence[object]],
        link_delay: FloatArray | None = None,
        memory: tuple[FloatArray, FloatArray, CostColumns] | None = None,
        memory_bandwidth: FloatArray | None = None,
    ) -> None:
        """Validate the columns (the first bad element in file order, checked as one element
        at a time would be) and set them; no ``link_delay`` is no delay on any link."""

        def numbers(
            kind: str, where: Callable[[int], str], capacity: FloatArray, price: FloatArray
        ) -> list[tuple[int, Callable[[int], InvalidNetwork]]]:
            """The checks of the ``capacity`` and ``price`` columns of nodes or links."""

            def shown(column: str, values: FloatArray, k: int) -> object:
                name = f"{kind}.{column}"
                return raw[name][k] if name in raw else float(values[k])

            return [
                (_first(_bad_capacity(capacity)), lambda k: InvalidNetwork(
                    "capacity must be a positive finite number, got "
                    f"{shown('capacity', capacity, k)!r}", field=f"{where(k)}.capacity")),
                (_first(_bad_price(price)), lambda k: InvalidNetwork(
                    "price must be a non-negative finite number, got "
                    f"{shown('price', price, k)!r}", field=f"{where(k)}.price")),
            ]  # fmt: skip

        n = len(ids)
        index = dict(zip(ids, range(n), strict=True))

        def node_where(k: int) -> str:
            return f"nodes[{k}] ({ids[k]!r})"

        def link_where(k: int) -> str:
            return f"links[{k}] ({link_source[k]!r}->{link_target[k]!r})"

        if memory is None:  # unlimited and not for sale
            memory = (np.full(len(ids), np.inf), np.full(len(ids), np.nan), CostColumns.of(None))
        node_memory, node_memory_price, node_memory_costs = memory
        if memory_bandwidth is None:
            memory_bandwidth = np.full(len(ids), np.inf)
        if not n == node_capacity.size == node_price.size == node_memory.size == (
                node_memory_price.size) == memory_bandwidth.size:  # fmt: skip
            raise InvalidNetwork("node columns of different lengths", field="nodes")
        _raise_first(n, [
            (n if len(index) == n else _first_repeat(ids),
             lambda k: InvalidNetwork(f"duplicate node id {ids[k]!r}", field=node_where(k))),
            *numbers("nodes", node_where, node_capacity, node_price),
            *_memory_checks(memory, node_where, raw),
            (_first(np.isnan(memory_bandwidth) | (memory_bandwidth <= 0)),
             lambda k: InvalidNetwork(
                 "memory_bandwidth must be a positive number of bytes/s, got "
                 f"{float(memory_bandwidth[k])!r}", field=f"{node_where(k)}.memory_bandwidth")),
        ])  # fmt: skip
        if link_delay is None:
            link_delay = np.zeros(link_capacity.size)
        if not (len(link_source) == len(link_target) == link_capacity.size == link_price.size
                == link_delay.size):  # fmt: skip
            raise InvalidNetwork("link columns of different lengths", field="links")
        tail, head = _positions(link_source, index), _positions(link_target, index)
        key = tail * max(n, 1) + head
        repeated = np.zeros(key.size, dtype=bool)
        if not np.all(key[1:] > key[:-1]):  # links in increasing order have no repeats
            order = stable_order(key)
            repeated[order[1:][key[order][1:] == key[order][:-1]]] = True
        _raise_first(len(link_source), [
            (_first(tail < 0), lambda k: InvalidNetwork(
                f"source {link_source[k]!r} is not a node of the network", field=link_where(k))),
            (_first(head < 0), lambda k: InvalidNetwork(
                f"target {link_target[k]!r} is not a node of the network", field=link_where(k))),
            (_first(tail == head), lambda k: InvalidNetwork(
                "self-loop: a link must join two different nodes", field=link_where(k))),
            (_first(repeated), lambda k: InvalidNetwork(
                f"duplicate link {link_source[k]!r}->{link_target[k]!r} (at most one link per "
                "direction)", field=link_where(k))),
            *numbers("links", link_where, link_capacity, link_price),
            (_first(_bad_delay(link_delay)), lambda k: InvalidNetwork(
                "delay_s must be a non-negative finite number of seconds, got "
                f"{raw['links.delay_s'][k] if 'links.delay_s' in raw else float(link_delay[k])!r}",
                field=f"{link_where(k)}.delay_s")),
        ])  # fmt: skip
        with np.errstate(over="ignore"):
            total_delay = float(np.sum(link_delay))
        if not math.isfinite(total_delay):  # a path's delays and its latency must add up
            raise InvalidNetwork(
                "the links' delay_s add up beyond floating point (above 1.8e308 s): check the "
                "units", field="links")  # fmt: skip
        for end, name in (("source", source), ("target", target)):
            if name not in index:
                raise InvalidNetwork(f"{name!r} is not a node of the network", field=end)
        if source == target:
            raise InvalidNetwork(f"source and target must differ, both are {source!r}",
                                field="target")  # fmt: skip
        values = {
            "node_ids": tuple(ids),
            "node_capacity": node_capacity,
            "node_price": node_price,
            "link_tail": tail,
            "link_head": head,
            "link_capacity": link_capacity,
            "link_price": link_price,
            "link_delay": link_delay,
            "node_costs": node_costs,
            "link_costs": link_costs,
            "node_memory": node_memory,
            "node_memory_price": node_memory_price,
            "node_memory_costs": node_memory_costs,
            "node_memory_bandwidth": memory_bandwidth,
            "source": source,
            "target": target,
            "node_position": index,
        }
        self.__dict__.update(values)
        for array in (node_capacity, node_price, tail, head, link_capacity, link_price,
                      link_delay, node_memory, node_memory_price,
                      memory_bandwidth):  # fmt: skip
            array.flags.writeable = False
        if not self.from_source[index[target]]:
            raise InvalidNetwork(f"target {target!r} is unreachable from source {source!r}",
                                field="target")  # fmt: skip

    def with_endpoints(self, source: str, target: str) -> Network:
        """The same nodes and links with another ``source`` and ``target``, validated as the
        constructor validates (both nodes of the network, distinct, the target reachable).

        Examples
        --------
        >>> net = Network(
        ...     nodes=(Node("a", 1e9, 1e-9), Node("b", 1e9, 1e-9), Node("c", 1e9, 1e-9)),
        ...     links=(Link("a", "b", 1e8, 1e-8), Link("b", "c", 1e8, 1e-8)),
        ...     source="a", target="c")
        >>> net.with_endpoints("b", "c").on_path_nodes()
        ('b', 'c')
        """
        return Network.from_columns(
            node_ids=self.node_ids,
            node_capacity=self.node_capacity,
            node_price=self.node_price,
            link_source=Labels(self.link_tail, self.node_ids),
            link_target=Labels(self.link_head, self.node_ids),
            link_capacity=self.link_capacity,
            link_price=self.link_price,
            source=source,
            target=target,
            node_costs=self.node_costs,
            link_costs=self.link_costs,
            node_memory=self.node_memory,
            node_memory_price=self.node_memory_price,
            node_memory_costs=self.node_memory_costs,
            link_delay=self.link_delay,
            node_memory_bandwidth=self.node_memory_bandwidth,
        )

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"Network is immutable: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"Network is immutable: cannot delete {name!r}")

    def __eq__(self, other: object) -> bool:
        """Equal ids, endpoints, capacities, memories, prices and delays, source and target (as
        :class:`Node` and :class:`Link` compare, cost functions are not compared)."""
        if not isinstance(other, Network):
            return NotImplemented
        ends = (self.source, self.target, self.node_ids)
        return (
            ends == (other.source, other.target, other.node_ids)
            and all(
                np.array_equal(getattr(self, a), getattr(other, a))
                for a in ("node_capacity", "node_price", "link_tail", "link_head",
                          "link_capacity", "link_price", "link_delay")
            )
            and np.array_equal(self.node_memory, other.node_memory)
            and np.array_equal(self.node_memory_bandwidth, other.node_memory_bandwidth)
            and np.array_equal(self.node_memory_price, other.node_memory_price, equal_nan=True)
        )  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.source, self.target, self.node_ids, self.link_tail.size))

    def __repr__(self) -> str:
        return (
            f"Network(<{len(self.node_ids)} nodes>, <{self.link_tail.size} links>, "
            f"source={self.source!r}, target={self.target!r})"
        )

    def node(self, k: int) -> Node:
        """The node at position ``k`` (file order)."""
        if "nodes" in self.__dict__:
            node: Node = self.__dict__["nodes"][k]
            return node
        memory, price = float(self.node_memory[k]), float(self.node_memory_price[k])
        bandwidth = float(self.node_memory_bandwidth[k])
        return Node(self.node_ids[k], float(self.node_capacity[k]), float(self.node_price[k]),
                    self.node_costs.get(k), None if math.isinf(memory) else memory,
                    None if math.isnan(price) else price, self.node_memory_costs.get(k),
                    None if math.isinf(bandwidth) else bandwidth)  # fmt: skip

    def link(self, k: int) -> Link:
        """The link at position ``k`` (file order)."""
        if "links" in self.__dict__:
            link: Link = self.__dict__["links"][k]
            return link
        ids = self.node_ids
        return Link(ids[self.link_tail[k]], ids[self.link_head[k]], float(self.link_capacity[k]),
                    float(self.link_price[k]), self.link_costs.get(k),
                    float(self.link_delay[k]))  # fmt: skip

    def node_cost(self, k: int) -> CapacityCost:
        """The cost function of the node at position ``k``."""
        cost = self.node_costs.get(k)
        return cost if cost is not None else LinearCost(float(self.node_price[k]))

    def node_memory_cost(self, k: int) -> CapacityCost:
        """The memory cost function of the node at position ``k``."""
        return memory_cost_of(self.node_memory_costs.get(k), float(self.node_memory_price[k]))

    @cached_property
    def has_memory(self) -> bool:
        """Whether any node's memory is limited."""
        return bool(np.isfinite(self.node_memory).any())

    def link_cost(self, k: int) -> CapacityCost:
        """The cost function of the link at position ``k``."""
        cost = self.link_costs.get(k)
        return cost if cost is not None else LinearCost(float(self.link_price[k]))

    @cached_property
    def nodes(self) -> tuple[Node, ...]:
        """The nodes as :class:`Node` objects (built on first use)."""
        return tuple(self.node(k) for k in range(len(self.node_ids)))

    @cached_property
    def links(self) -> tuple[Link, ...]:
        """The links as :class:`Link` objects (built on first use)."""
        return tuple(self.link(k) for k in range(self.link_tail.size))

    @cached_property
    def node_position(self) -> Mapping[str, int]:
        """The position of each node id."""
        return {v: k for k, v in enumerate(self.node_ids)}

    @cached_property
    def graph(self) -> nx.DiGraph:
        """The network as a networkx ``DiGraph`` (nodes and links carry their attributes)."""
        return self.to_networkx()

    @cached_property
    def node_by_id(self) -> dict[str, Node]:
        return {node.id: node for node in self.nodes}

    @cached_property
    def from_source(self) -> npt.NDArray[np.bool_]:
        """Whether each node (file order) is reachable from the source."""
        start, order = adjacency(self.link_tail, len(self.node_ids))
        return reachable(start, self.link_head[order], self.node_position[self.source])

    @cached_property
    def on_path(self) -> npt.NDArray[np.bool_]:
        """Whether each node (file order) lies on some source-target path."""
        start, order = adjacency(self.link_head, len(self.node_ids))
        to_target = reachable(start, self.link_tail[order], self.node_position[self.target])
        return self.from_source & to_target

    def on_path_nodes(self) -> tuple[str, ...]:
        """Ids of the nodes on some source-target path, in file order."""
        return tuple(self.node_ids[k] for k in np.flatnonzero(self.on_path).tolist())

    def to_networkx(self) -> nx.DiGraph:
        """Nodes with ``capacity``/``price`` (and ``cost``) attributes, and ``memory``,
        ``memory_price``, ``memory_cost`` where given; links likewise, and their ``delay_s``."""
        import networkx as nx

        graph = nx.DiGraph(source=self.source, target=self.target)
        for node in self.nodes:
            graph.add_node(node.id, capacity=node.capacity, price=node.price, cost=node.cost,
                           **_memory_attributes(node))  # fmt: skip
        for link in self.links:
            graph.add_edge(link.source, link.target, capacity=link.capacity, price=link.price,
                           cost=link.cost, delay_s=link.delay_s)  # fmt: skip
        return graph

    @classmethod
    def from_networkx(
        cls, graph: nx.DiGraph, source: str | None = None, target: str | None = None
    ) -> Network:
        """Build from a ``DiGraph`` whose nodes and edges carry ``capacity`` and ``price``
        (and optionally ``cost``; nodes ``memory``, ``memory_price`` and ``memory_cost``;
        edges ``delay_s``, 0 when absent).

        ``source`` and ``target`` default to the graph attributes of the same names.
        """
        source = source if source is not None else graph.graph.get("source")
        target = target if target is not None else graph.graph.get("target")
        if source is None or target is None:
            raise InvalidNetwork("source and target must be given or set as graph attributes")
        try:
            nodes = tuple(
                Node(
                    str(v),
                    d["capacity"],
                    d.get("price", 0.0),
                    d.get("cost"),
                    d.get("memory"),
                    d.get("memory_price"),
                    d.get("memory_cost"),
                )
                for v, d in graph.nodes(data=True)
            )
            links = tuple(
                Link(
                    str(u),
                    str(v),
                    d["capacity"],
                    d.get("price", 0.0),
                    d.get("cost"),
                    d.get("delay_s", 0.0),
                )
                for u, v, d in graph.edges(data=True)
            )
        except KeyError as exc:
            raise InvalidNetwork(f"every node and edge needs a {exc.args[0]!r} attribute") from None
        return cls(nodes=nodes, links=links, source=str(source), target=str(target))

    def to_dict(self) -> dict[str, Any]:
        """The network in the network-file format."""
        ids = self.node_ids
        nodes = [
            {"id": v, "capacity": c, "price": p}
            for v, c, p in zip(
                ids, self.node_capacity.tolist(), self.node_price.tolist(), strict=True
            )
        ]
        links = [{"source": ids[u], "target": ids[v], "capacity": c, "price": p}
                 for u, v, c, p in zip(self.link_tail.tolist(), self.link_head.tolist(),
                                       self.link_capacity.tolist(), self.link_price.tolist(),
                                       strict=True)]  # fmt: skip
        for elements, costs in ((nodes, self.node_costs), (links, self.link_costs)):
            for k, cost in costs.items():
                elements[k]["cost"] = cost.to_dict()
        for k in np.flatnonzero(np.isfinite(self.node_memory)).tolist():
            nodes[k]["memory"] = float(self.node_memory[k])
        for k in np.flatnonzero(~np.isnan(self.node_memory_price)).tolist():
            nodes[k]["memory_price"] = float(self.node_memory_price[k])
        for k, cost in self.node_memory_costs.items():
            nodes[k]["memory_cost"] = cost.to_dict()
        for k in np.flatnonzero(np.isfinite(self.node_memory_bandwidth)).tolist():
            nodes[k]["memory_bandwidth"] = float(self.node_memory_bandwidth[k])
        for k in np.flatnonzero(self.link_delay).tolist():  # a delay of 0 is the default
            links[k]["delay_s"] = float(self.link_delay[k])
        return {"source": self.source, "target": self.target, "nodes": nodes, "links": links}


def _memory_attributes(node: Node) -> dict[str, Any]:
    """The memory attributes a node gives (none of ``memory``, ``memory_price`` and
    ``memory_cost`` when not given)."""
    given = {"memory": node.memory, "memory_price": node.memory_price,
             "memory_cost": node.memory_cost}  # fmt: skip
    return {name: value for name, value in given.items() if value is not None}


def _memory_checks(
    memory: tuple[FloatArray, FloatArray, CostColumns],
    where: Callable[[int], str],
    raw: Mapping[str, Sequence[object]],
) -> list[tuple[int, Callable[[int], InvalidNetwork]]]:
    """The checks of the nodes' memory columns: a memory is a non-negative number (``inf``:
    unlimited), a memory price a non-negative finite number (NaN: not given)."""
    size, price, _ = memory

    def shown(column: str, values: FloatArray, k: int) -> object:
        name = f"nodes.{column}"
        return raw[name][k] if name in raw else float(values[k])

    return [
        (_first(~(size >= 0)), lambda k: InvalidNetwork(
            "memory must be a non-negative number of bytes, got "
            f"{shown('memory', size, k)!r}", field=f"{where(k)}.memory")),
        (_first(~np.isnan(price) & _bad_price(price)), lambda k: InvalidNetwork(
            "memory_price must be a non-negative finite number, got "
            f"{shown('memory_price', price, k)!r}", field=f"{where(k)}.memory_price")),
    ]  # fmt: skip


def _raise_first(size: int, checks: list[tuple[int, Callable[[int], InvalidNetwork]]]) -> None:
    """Raise the error of the check that fails at the lowest index below ``size`` (the
    earliest check among those failing there), if any fails: the error that checking one
    element at a time would raise. Each check gives its first failing index, or ``size``."""
    k, error = min(checks, key=lambda check: check[0])
    if k < size:
        raise error(k)
