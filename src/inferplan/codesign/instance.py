"""A network and a profile compiled into arrays: the state graph every co-design solver walks.

Only nodes on some source-target path are kept, in a topological order (file order among
equals) when the relevant part of the network is acyclic. Compiling reads the network's
columns and builds every array with numpy: no Python object per node or link (the
:class:`~inferplan.network.network.Link` objects and cost functions of :attr:`links`,
:attr:`node_costs` and :attr:`link_costs` are made when an element is looked up).

What depends on the network alone (the kept nodes and links, their order, the
:class:`Topology` derived from them) is compiled once per network object, and what depends on
the profile alone (its cuts and their tables, its memory need) once per profile object, each
kept while that object lives (both are immutable): compiling the same network or model again,
for another solve, only assembles the instance from them.
"""

from __future__ import annotations

import dataclasses
import heapq
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar, overload

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray, range_sums, ratio
from inferplan.codesign.timing.stage import (
    FLOPS_OVER_CAPACITY,
    FlopsOverCapacity,
    NodeTimeModel,
    PerNodeTimeModel,
)
from inferplan.errors import InvalidArgument, NetworkHasCycle
from inferplan.memo import KeptFor
from inferplan.network.cost_columns import CostColumns, Pieces
from inferplan.network.costs import CapacityCost, unit_price
from inferplan.network.network import Link, Network, adjacency
from inferplan.profiles.ideals import CutKind, Cuts, cuts_of
from inferplan.profiles.memory import graph_memory_need, graph_pair_need, memory_need
from inferplan.profiles.profile import Profile

if TYPE_CHECKING:
    import networkx as nx

__all__ = [
    "CodesignInstance",
    "Generation",
    "Pricing",
    "Terms",
    "compile_instance",
    "link_cost_table",
    "memory_terms",
    "node_cost_table",
    "range_sums",
]

T = TypeVar("T")


KEPT_ITEMS = 4096
"""How many items a :class:`Lookup` keeps once made."""


class Lookup(Sequence[T]):
    """A read-only sequence whose items are made when looked up (``item(k)``); the first
    :data:`KEPT_ITEMS` made are kept (a solve that prices the same few elements again finds
    them made; a walk over every element of a large network keeps no more than those)."""

    def __init__(self, size: int, item: Callable[[int], T]) -> None:
        self._size, self._item = size, item
        self._made: dict[int, T] = {}

    def __len__(self) -> int:
        return self._size

    @overload
    def __getitem__(self, k: int) -> T: ...
    @overload
    def __getitem__(self, k: slice) -> tuple[T, ...]: ...
    def __getitem__(self, k: int | slice) -> T | tuple[T, ...]:
        if isinstance(k, slice):
            return tuple(self[j] for j in range(*k.indices(self._size)))
        j = operator.index(k)
        try:
            return self._made[j]
        except KeyError:
            pass
        if not -self._size <= j < self._size:
            raise IndexError(f"index {k} out of range for {self._size} items")
        made = self._item(j % self._size)
        if len(self._made) < KEPT_ITEMS:
            self._made[j] = made
        return made

    def __iter__(self) -> Iterator[T]:
        return map(self._item, range(self._size))

    def __repr__(self) -> str:
        return f"<{self._size} items, made when looked up>"


@dataclass(frozen=True)
class Generation:
    """One topological generation: its ``nodes``; their out-links ``links`` sorted by head,
    with the tail of each in ``tails``; the distinct ``heads`` and where each one's links
    start in ``links`` (``first``)."""

    nodes: IntArray
    links: IntArray
    tails: IntArray
    heads: IntArray
    first: IntArray
    rows: slice | IntArray  # ``nodes`` as a slice when they are consecutive (cheaper to index)
    span: slice  # where ``links`` sit in :attr:`CodesignInstance.sweep_links`


@dataclass(frozen=True)
class Pricing:
    """Costs of a set of elements as arrays: the unit ``price`` of each linear cost (0 for
    the ``other`` elements, whose cost functions are called), each ``cap`` on what can be
    added, and the elements whose cap is finite (``capped``)."""

    price: FloatArray
    cap: FloatArray
    capped: IntArray
    other: IntArray

    def cost(
        self, elements: IntArray, amount: FloatArray, costs: Sequence[CapacityCost]
    ) -> FloatArray:
        """The cost of adding ``amount[r, ...]`` (any trailing shape) to each of
        ``elements`` (``inf`` beyond a cap): linear costs priced in one vectorised step,
        others (``costs[element]``, called) one element at a time."""
        spread = (slice(None), *(None,) * (amount.ndim - 1))
        with np.errstate(over="ignore"):  # a price beyond floating point is inf, as a cap is
            cost: FloatArray = self.price[elements][spread] * amount
        if self.capped.size or self.other.size:
            cost[amount > self.cap[elements][spread]] = np.inf
            for r in np.flatnonzero(np.isin(elements, self.other)):
                cost[r] = costs[int(elements[r])](amount[r])
        return cost


NodeRows = Callable[[IntArray], FloatArray]
"""A node term: its values ``term[r, a, b]`` for nodes ``nodes[r]``, ``(len(nodes), W, W)``."""
LinkRows = Callable[[IntArray], FloatArray]
"""A link term: its values ``term[r, b]`` for links ``links[r]``, ``(len(links), W)``."""


def _zero_rows(width: int, ndim: int) -> Callable[[IntArray], FloatArray]:
    return lambda elements: np.zeros((elements.size, *(width,) * ndim))


@dataclass(frozen=True, eq=False)
class Terms:
    """Extra cost terms of the state graph's transitions: THE extension point of every
    solver that walks the state graph (both PSG engines, the MILP, T*).

    A transition ``(v, a) -> (z, b)`` over the link ``e = (v, z)`` runs blocks ``a+1..b`` on
    ``v`` and sends cut ``b``'s data over ``e``; it costs its compute term
    ``f_v(max(0, w(a, b) / beta - C_v))``, its link term ``g_e(max(0, D_b / beta - B_e))``,
    and the extra terms ``node(v, a, b) + link(e, b)`` (``inf``: the transition is
    infeasible). The extra terms depend on nothing else, so the state-graph reduction stays
    exact on acyclic networks (docs/model.md). Node memory is their first user
    (:func:`memory_terms`): ``h_v([need(a, b) - memory_v]^+)``.

    Attributes
    ----------
    node
        ``node(nodes)``: the node term of each of ``nodes`` for every ``(a, b)``, shape
        ``(len(nodes), W, W)`` (entries with ``a > b`` are ignored); 0 where a node has none.
    table_nodes
        The nodes whose node term is more than a limit (below): the compiled engine prices
        them into ``(W, W)`` tables, ``O(N^2)`` per node; every other node's term is 0 or,
        beyond its limit, ``inf``.
    limit_need, limit
        A limit: ``(v, a, b)`` is infeasible where ``limit_need[a, b] > limit[v]``
        (``limit_need`` non-increasing in ``a`` and non-decreasing in ``b``, ``limit[v]``
        ``inf`` for none). The compiled engine keeps such a term linear: for each ``b`` the
        feasible ``a`` form a window that only moves right as ``b`` grows. ``node`` includes
        the limit too (``inf`` beyond it), for the engines that take whole tables.
    link, table_links
        ``link(links)``: the link term of each of ``links`` for every ``b``, shape
        ``(len(links), W)``; ``table_links`` the links that have one (priced into the
        compiled engine's link tables).

    Examples
    --------
    A term that forbids node 1 to run more than one block (the compiled engine sees a limit):

    >>> import numpy as np
    >>> need = np.subtract.outer(-np.arange(4.0), -np.arange(4.0))  # b - a
    >>> terms = Terms.limited(need, np.array([np.inf, 1.0]))
    >>> float(terms.node(np.array([1]))[0, 0, 2])
    inf
    """

    node: NodeRows
    table_nodes: IntArray
    limit_need: FloatArray | None
    limit: FloatArray | None
    link: LinkRows
    table_links: IntArray

    @classmethod
    def none(cls, width: int) -> Terms:
        """No extra term (``width = N + 1``)."""
        empty = np.zeros(0, dtype=np.int64)
        return cls(_zero_rows(width, 2), empty, None, None, _zero_rows(width, 1), empty)

    @classmethod
    def limited(cls, need: FloatArray, limit: FloatArray) -> Terms:
        """A limit alone: ``(v, a, b)`` infeasible where ``need[a, b] > limit[v]``."""

        def node(nodes: IntArray) -> FloatArray:
            return np.where(need[None] > limit[nodes][:, None, None], np.inf, 0.0)

        empty = np.zeros(0, dtype=np.int64)
        return cls(node, empty, need, limit, _zero_rows(need.shape[0], 1), empty)

    @property
    def empty(self) -> bool:
        """Whether no transition has an extra term."""
        limited = self.limit is not None and bool(np.isfinite(self.limit).any())
        return not (limited or self.table_nodes.size or self.table_links.size)

    def plus(self, other: Terms) -> Terms:
        """Both terms added. Of two limits the first stays a limit and the nodes the second
        limits are priced into tables."""
        if other.empty:
            return self
        if self.empty:
            return other
        first, second = self.node, other.node

        def node(nodes: IntArray) -> FloatArray:
            return first(nodes) + second(nodes)

        def link(links: IntArray) -> FloatArray:
            return self.link(links) + other.link(links)

        tables = np.union1d(self.table_nodes, other.table_nodes)
        limit_need, limit = self.limit_need, self.limit
        if other.limit is not None:
            if limit is None:
                limit_need, limit = other.limit_need, other.limit
            else:
                tables = np.union1d(tables, np.flatnonzero(np.isfinite(other.limit)))
        links = np.union1d(self.table_links, other.table_links)
        return Terms(node, tables, limit_need, limit, link, links)


@dataclass(frozen=True, eq=False)
class Topology:
    """The kept nodes and links of a network in the solvers' order (see
    :class:`CodesignInstance`), and what the solvers derive from them alone: compiled once per
    network (:func:`compile_instance` keeps it while the network lives) and shared by every
    instance compiled from it. Its arrays are read-only."""

    n_nodes: int
    link_src: IntArray
    link_dst: IntArray
    out_start: IntArray
    out_order: IntArray
    in_start: IntArray
    in_order: IntArray

    @cached_property
    def out_links(self) -> tuple[IntArray, ...]:
        """The out-links of each node, in increasing order."""
        return _rows(self.out_start, self.out_order)

    @cached_property
    def in_links(self) -> tuple[IntArray, ...]:
        """The in-links of each node, in increasing order."""
        return _rows(self.in_start, self.in_order)

    @cached_property
    def sweep(self) -> tuple[Generation, ...]:
        """Each generation with its out-links grouped by head, as the relaxation needs them."""
        out, done = [], 0
        for nodes in self.generations:
            outs = np.concatenate([self.out_links[v] for v in nodes])
            outs = outs[np.argsort(self.link_dst[outs], kind="stable")]
            heads = self.link_dst[outs]
            first = np.flatnonzero(np.r_[True, heads[1:] != heads[:-1]]) if outs.size else outs
            consecutive = bool(np.all(np.diff(nodes) == 1))
            rows = slice(int(nodes[0]), int(nodes[-1]) + 1) if consecutive else nodes
            span = slice(done, done + outs.size)
            done += outs.size
            out.append(Generation(nodes, outs, self.link_src[outs], heads[first], first, rows,
                                  span))  # fmt: skip
        return tuple(out)

    @cached_property
    def sweep_links(self) -> IntArray:
        """The links in the order of :attr:`sweep`: by generation of their tail, then head."""
        return np.concatenate([g.links for g in self.sweep])

    @cached_property
    def sweep_position(self) -> IntArray:
        """Where each link sits in :attr:`sweep_links`."""
        position = np.empty(self.link_src.size, dtype=np.int64)
        position[self.sweep_links] = np.arange(self.sweep_links.size)
        return position

    @cached_property
    def generations(self) -> tuple[IntArray, ...]:
        """Nodes grouped by topological generation (acyclic networks only).

        Generation ``g`` holds the nodes whose longest chain of in-links from a node without
        in-links has ``g`` links; no link joins two nodes of one generation, so a solver may
        relax a whole generation at once.
        """
        level = np.zeros(self.n_nodes, dtype=np.int64)
        for v in range(self.n_nodes):
            ins = self.in_links[v]
            if ins.size:
                level[v] = level[self.link_src[ins]].max() + 1
        order = np.argsort(level, kind="stable")
        bounds = np.flatnonzero(np.diff(level[order])) + 1
        return tuple(np.split(order, bounds))

    @cached_property
    def link_of(self) -> dict[tuple[int, int], int]:
        """Each link's index by its ``(tail, head)`` nodes."""
        return {
            (u, v): e
            for e, (u, v) in enumerate(zip(self.link_src.tolist(), self.link_dst.tolist(),
                                           strict=True))
        }  # fmt: skip


@dataclass(frozen=True, eq=False)
class CodesignInstance:
    """Arrays of one co-design problem (SI units).

    Nodes are indexed ``0..V-1`` in topological order (``source`` first when acyclic), links
    ``0..E-1``, the model's cuts ``0..K-1`` (:attr:`cuts`: the prefixes ``0..N`` of the
    blocks, or the ideals of a layer graph; ``K - 1`` holds everything). ``work_between[i,
    j]`` is ``w(i, j)``, the FLOPs of cut ``j`` outside cut ``i`` (``Q_(i+1) + ... + Q_j`` on
    a chain) rounded once, ``inf`` where cut ``i`` is not inside cut ``j`` (no transition
    does that): every solver takes a stage's work from it, never as a difference of prefix
    sums, which loses a small block beside a large one. ``prefix_flops`` is the work of each
    cut (its first row, ``S_0..S_N`` on a chain) and ``activation_bits`` the bits of each
    cut's boundary (``D_0..D_N``).
    """

    network: Network
    profile: Profile
    node_ids: tuple[str, ...]
    capacity: FloatArray
    link_src: IntArray
    link_dst: IntArray
    bandwidth: FloatArray
    node_positions: IntArray
    """Where each node sits in the network (its position in ``network.nodes``)."""
    link_positions: IntArray
    """Where each link sits in the network (its position in ``network.links``)."""
    out_start: IntArray
    """The out-links of node ``v`` are ``out_order[out_start[v]:out_start[v + 1]]``."""
    out_order: IntArray
    in_start: IntArray
    """The in-links of node ``v`` are ``in_order[in_start[v]:in_start[v + 1]]``."""
    in_order: IntArray
    activation_bits: FloatArray
    source: int
    target: int
    acyclic: bool
    cuts: Cuts
    memory: FloatArray
    """Each node's memory (bytes), ``inf`` where unlimited."""
    topology: Topology
    """The kept nodes and links and what is derived from them alone, shared by every instance
    compiled from the same network."""
    own_node_costs: tuple[CapacityCost, ...] | None = None
    """Every node's cost function by index, in place of the network's (see :meth:`priced`)."""
    own_link_costs: tuple[CapacityCost, ...] | None = None
    """Every link's cost function by index, in place of the network's."""
    own_memory_costs: tuple[CapacityCost, ...] | None = None
    """Every node's memory cost function by index, in place of the network's."""
    extra_terms: Terms | None = None
    """Extra transition terms besides memory's (see :meth:`with_terms`)."""
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY
    """How long a stage takes on a node (:mod:`~inferplan.codesign.timing`): the model
    :attr:`node_loads` (and :attr:`work_between`, when every node shares it) is compiled
    from."""

    def priced(
        self,
        capacity: FloatArray,
        node_costs: Sequence[CapacityCost],
        bandwidth: FloatArray,
        link_costs: Sequence[CapacityCost],
    ) -> CodesignInstance:
        """This instance with every node's capacity and cost function and every link's
        bandwidth and cost function replaced (by index): the same state graph, nothing
        compiled again. Capacities may be any finite numbers here (a residual capacity)."""
        return replace(
            self,
            capacity=np.asarray(capacity, dtype=np.float64),
            bandwidth=np.asarray(bandwidth, dtype=np.float64),
            own_node_costs=tuple(node_costs),
            own_link_costs=tuple(link_costs),
        )

    def with_memory(
        self, memory: FloatArray, memory_costs: Sequence[CapacityCost] | None = None
    ) -> CodesignInstance:
        """This instance with every node's memory (and memory cost function, when given)
        replaced by index: the same state graph, nothing compiled again."""
        return replace(
            self,
            memory=np.asarray(memory, dtype=np.float64),
            own_memory_costs=self.own_memory_costs if memory_costs is None
            else tuple(memory_costs),
        )  # fmt: skip

    def with_terms(self, terms: Terms) -> CodesignInstance:
        """This instance with ``terms`` added to every transition (to those it already has):
        the hook for any cost or feasibility of a transition that depends on ``(v, a, b)``
        or ``(e, b)`` only. Nothing is compiled again."""
        extra = terms if self.extra_terms is None else self.extra_terms.plus(terms)
        return replace(self, extra_terms=extra)

    @cached_property
    def terms(self) -> Terms:
        """Every extra term of the transitions: memory's and :attr:`extra_terms`."""
        own = memory_terms(self)
        return own if self.extra_terms is None else own.plus(self.extra_terms)

    @cached_property
    def memory_need(self) -> FloatArray:
        """``need[a, b]``, the bytes a node running blocks ``a+1..b`` (the layers of cut ``b``
        outside cut ``a``) holds (:func:`~inferplan.profiles.memory.memory_need`,
        :func:`~inferplan.profiles.memory.graph_memory_need`; ``inf`` where no transition
        goes). Read-only, and made once for the profile's cuts: every instance of the same
        profile shares it."""
        return self._needs[0]

    def need(self, a: int, b: int) -> float:
        """``need[a, b]``: an entry of :attr:`memory_need`, formed alone when the table is
        not (a lattice solver's)."""
        if "memory_need" not in self.__dict__ and not self.cuts.is_chain:
            return graph_pair_need(self.profile, self.cuts, a, b)
        return float(self.memory_need[a, b])

    @cached_property
    def most_need(self) -> float:
        """The largest entry of :attr:`memory_need`: the whole model's on a chain; between
        ideals a node that only forwards may hold more (a boundary of several tensors) than
        the whole model's. A node with this much memory is never limited."""
        return self._needs[1]

    @cached_property
    def _needs(self) -> tuple[FloatArray, float]:
        """:attr:`memory_need` and :attr:`most_need`, kept with the cuts (by profile: the
        cuts :func:`compile_instance` finds are the profile's own, kept with it)."""
        profile, cuts = self.profile, self.cuts
        return _NEEDS.get(cuts, id(profile), lambda: _needs(profile, cuts))

    @cached_property
    def memory_costs(self) -> Sequence[CapacityCost]:
        """Each node's memory cost function (made when looked up)."""
        if self.own_memory_costs is not None:
            return self.own_memory_costs
        return Lookup(len(self.node_ids), self._memory_cost)

    def _memory_cost(self, v: int) -> CapacityCost:
        return self.network.node_memory_cost(int(self.node_positions[v]))

    @cached_property
    def memory_pricing(self) -> Pricing:
        """The nodes' memory costs in the arrays the vectorised solvers use (a cap of 0
        where memory cannot be added)."""
        if self.own_memory_costs is not None:
            own = CostColumns.of(dict(enumerate(self.own_memory_costs)))
            return _pricing(own, np.zeros(len(self.node_ids)), np.arange(len(self.node_ids)))
        positions = self.node_positions
        given = self.network.node_memory_price
        pricing = _pricing(self.network.node_memory_costs, np.nan_to_num(given, nan=0.0),
                           positions)  # fmt: skip
        cap = pricing.cap.copy()
        costs = self.network.node_memory_costs
        for_sale = ~np.isnan(given[positions]) | (costs.lookup(positions) >= 0)
        if costs.objects:
            for_sale |= np.isin(positions, list(costs.objects))
        cap[~for_sale] = 0.0
        return Pricing(price=pricing.price, cap=cap, capped=np.flatnonzero(np.isfinite(cap)),
                       other=pricing.other)  # fmt: skip

    @property
    def n_blocks(self) -> int:
        return self.profile.n_blocks

    @property
    def n_cuts(self) -> int:
        """``K``, the number of states per node (``N + 1`` on a chain)."""
        return self.cuts.n_cuts

    @property
    def last_cut(self) -> int:
        """The cut holding the whole model (``N`` on a chain), which reaches the target."""
        return self.cuts.last

    @property
    def n_links(self) -> int:
        return self.link_src.size

    @cached_property
    def links(self) -> Sequence[Link]:
        """Each link as a :class:`~inferplan.network.network.Link` (made when looked up)."""
        return Lookup(self.n_links, self._link)

    @cached_property
    def link_delay(self) -> FloatArray:
        """Each link's propagation delay (s)."""
        return self.network.link_delay[self.link_positions]

    @cached_property
    def node_costs(self) -> Sequence[CapacityCost]:
        """Each node's cost function (made when looked up)."""
        if self.own_node_costs is not None:
            return self.own_node_costs
        return Lookup(len(self.node_ids), self._node_cost)

    @cached_property
    def link_costs(self) -> Sequence[CapacityCost]:
        """Each link's cost function (made when looked up)."""
        if self.own_link_costs is not None:
            return self.own_link_costs
        return Lookup(self.n_links, self._link_cost)

    def _link(self, e: int) -> Link:
        return self.network.link(int(self.link_positions[e]))

    def _node_cost(self, v: int) -> CapacityCost:
        return self.network.node_cost(int(self.node_positions[v]))

    def _link_cost(self, e: int) -> CapacityCost:
        return self.network.link_cost(int(self.link_positions[e]))

    @property
    def out_links(self) -> tuple[IntArray, ...]:
        """The out-links of each node, in increasing order."""
        return self.topology.out_links

    @property
    def in_links(self) -> tuple[IntArray, ...]:
        """The in-links of each node, in increasing order."""
        return self.topology.in_links

    def check_acyclic(self, solver: str) -> None:
        """Raise :class:`NetworkHasCycle` if ``solver`` (which needs a DAG) got a cycle."""
        if not self.acyclic:
            raise NetworkHasCycle(
                f"{solver} needs an acyclic network and a cycle lies on the way from source to "
                "target (use the MILP)",
                field="links",
            )

    @cached_property
    def scalars(self) -> tuple[list[float], list[float], list[float]]:
        """``activation_bits``, ``capacity`` and ``bandwidth`` as lists of Python floats, for
        the scalar code that handles one path."""
        return self.activation_bits.tolist(), self.capacity.tolist(), self.bandwidth.tolist()

    @property
    def shared_work(self) -> bool:
        """Whether every node has the same loads (:attr:`work_between`): ``False`` for a
        :class:`~inferplan.codesign.timing.stage.PerNodeTimeModel`."""
        # the default model is known at once; the protocol's check inspects every attribute
        return isinstance(self.node_time, FlopsOverCapacity) or self._not_per_node

    @cached_property
    def _not_per_node(self) -> bool:
        return not isinstance(self.node_time, PerNodeTimeModel)

    def refuse_per_node(self, planner: str) -> None:
        """Refuse a per-node time model in a planner that reads one shared load table.

        Raises
        ------
        InvalidArgument
            If :attr:`node_time` gives each node its own loads.
        """
        if not self.shared_work:
            raise InvalidArgument(
                f"{planner} reads one load table shared by every node and the node time model "
                f"gives each node its own (every planner takes it: read node_loads)",
                field="node_time",
            )

    @cached_property
    def work_between(self) -> FloatArray:
        """``w(i, j)`` for every pair of cuts (see the class docstring), the load of
        :attr:`node_time` every node shares.

        Raises
        ------
        InvalidArgument
            If the model gives each node its own loads (read :attr:`node_loads`).
        """
        self.refuse_per_node("this planner")
        model: NodeTimeModel = self.node_time  # type: ignore[assignment]
        return model.work_table(self.cuts)

    @cached_property
    def node_loads(self) -> FloatArray:
        """``w_v(i, j)`` of every node, to broadcast against a node axis: shape ``(1, K, K)``
        (:attr:`work_between`) when every node shares it, else ``(V, K, K)``."""
        if self.shared_work:
            return self.work_between[None]
        model: PerNodeTimeModel = self.node_time  # type: ignore[assignment]
        found = model.node_work_table(
            self.cuts, self.node_ids, self.network.node_capacity[self.node_positions]
        )
        want = (len(self.node_ids), self.n_cuts, self.n_cuts)
        if found.shape != want or not bool(np.all(np.isinf(found[:, self.no_transition]))):
            raise InvalidArgument(f"the node time model's loads must have shape {want} and be "
                                  "inf where no transition goes", field="node_time")  # fmt: skip
        ok = found[:, ~self.no_transition]
        if not bool(np.all((ok >= 0) & (ok < np.inf))):
            raise InvalidArgument("the node time model's loads must be finite and >= 0 where "
                                  "a transition goes", field="node_time")  # fmt: skip
        return found

    def loads_of(self, rows: slice | IntArray) -> FloatArray:
        """:attr:`node_loads` of the nodes ``rows`` (all of it when shared: one row)."""
        return self.node_loads if self.shared_work else self.node_loads[rows]

    def loads_or_zero_of(self, rows: slice | IntArray) -> FloatArray:
        """:meth:`loads_of` with 0 where no transition goes."""
        if self.shared_work:
            return self._shared_or_zero
        return np.where(self.no_transition, 0.0, self.node_loads[rows])

    def work_or_zero_at(self, v: IntArray, i: IntArray, j: IntArray) -> FloatArray:
        """``w_v(i, j)`` (0 where no transition goes) at each triple of index arrays: an
        entry of :attr:`work_or_zero` when every node shares the loads (``v`` unread), else of
        node ``v``'s :attr:`node_loads`."""
        if self.shared_work:
            return self.work_or_zero[i, j]
        return np.where(self.no_transition[i, j], 0.0, self.node_loads[v, i, j])

    @cached_property
    def _shared_or_zero(self) -> FloatArray:
        return self.work_or_zero[None]

    @cached_property
    def most_work(self) -> float:
        """The largest load of the whole model on any node (the work of the last cut when
        every node shares the loads)."""
        if self.shared_work:
            return self.work(0, self.last_cut)
        return float(np.max(self.node_loads[:, 0, self.last_cut], initial=0.0))

    @cached_property
    def prefix_flops(self) -> FloatArray:
        """The work of each cut (``S_0..S_N`` on a chain), rounded once."""
        exact, unit = self.cuts.exact_work, self.cuts.unit
        return np.array([ratio(x, unit) for x in exact])

    def work(self, i: int, j: int, v: int | None = None) -> float:
        """``w(i, j)``, the FLOPs of cut ``j`` outside cut ``i`` (rounded once): an entry of
        :attr:`work_between`, formed alone when the table is not (a lattice solver's); node
        ``v``'s, ``w_v(i, j)`` of :attr:`node_loads`, when the model gives each node its own
        (``v`` is then needed)."""
        if not self.shared_work:
            if v is None:
                self.refuse_per_node("the load of a stage on no given node")
            return float(self.node_loads[v, i, j])
        if "work_between" not in self.__dict__ and not self.cuts.is_chain:
            model: NodeTimeModel = self.node_time  # type: ignore[assignment]
            return model.work(self.cuts, i, j)
        return self._work_item(i, j)

    @cached_property
    def _work_item(self) -> Callable[[int, int], float]:
        item: Callable[[int, int], float] = self.work_between.item  # a Python float, quickly
        return item

    @cached_property
    def highest_prices(self) -> tuple[float, float]:
        """The highest unit price of the nodes' and of the links' costs (0 if none): linear
        prices, and :func:`~inferplan.network.costs.unit_price` of the other cost functions."""

        def highest(pricing: Pricing, costs: Sequence[CapacityCost]) -> float:
            others = (unit_price(costs[k]) for k in pricing.other.tolist())
            return max(float(np.max(pricing.price, initial=0.0)), *others, 0.0)

        return (highest(self.node_pricing, self.node_costs),
                highest(self.link_pricing, self.link_costs))  # fmt: skip

    @cached_property
    def node_pricing(self) -> Pricing:
        """The nodes' costs in the arrays the vectorised solvers use."""
        return _pricing(*self._node_costs)

    @cached_property
    def link_pricing(self) -> Pricing:
        """The links' costs in the arrays the vectorised solvers use."""
        return _pricing(*self._link_costs)

    @cached_property
    def _node_costs(self) -> tuple[CostColumns, FloatArray, IntArray]:
        """The nodes' cost functions, linear prices and positions in them."""
        if self.own_node_costs is not None:
            own = CostColumns.of(dict(enumerate(self.own_node_costs)))
            return own, np.zeros(len(self.node_ids)), np.arange(len(self.node_ids))
        return self.network.node_costs, self.network.node_price, self.node_positions

    @cached_property
    def _link_costs(self) -> tuple[CostColumns, FloatArray, IntArray]:
        """The links' cost functions, linear prices and positions in them."""
        if self.own_link_costs is not None:
            own = CostColumns.of(dict(enumerate(self.own_link_costs)))
            return own, np.zeros(self.n_links), np.arange(self.n_links)
        return self.network.link_costs, self.network.link_price, self.link_positions

    @cached_property
    def node_pieces(self) -> Pieces:
        """Each node's cost as piecewise-linear pieces (see
        :class:`~inferplan.network.cost_columns.Pieces`), or marked as priced into tables:
        built column-wise."""
        costs, prices, positions = self._node_costs
        return costs.pieces(prices, positions)

    @cached_property
    def link_pieces(self) -> Pieces:
        """Each link's cost as piecewise-linear pieces, or marked as priced into tables (as
        :attr:`node_pieces`)."""
        costs, prices, positions = self._link_costs
        return costs.pieces(prices, positions)

    @cached_property
    def no_transition(self) -> npt.NDArray[np.bool_]:
        """Cut ``i`` not inside cut ``j`` (``i > j`` on a chain): a node cannot send less
        than it received."""
        return ~self.cuts.subset

    @cached_property
    def work_or_zero(self) -> FloatArray:
        """:attr:`work_between` with 0 where no transition goes."""
        return np.where(self.no_transition, 0.0, self.work_between)

    @cached_property
    def forbidden(self) -> FloatArray:
        """0 where a transition goes, ``inf`` elsewhere: added to a cost, it rules out the
        rest."""
        return np.where(self.no_transition, np.inf, 0.0)

    @property
    def sweep(self) -> tuple[Generation, ...]:
        """Each generation with its out-links grouped by head, as the relaxation needs them
        (:attr:`Topology.sweep`)."""
        return self.topology.sweep

    @property
    def sweep_links(self) -> IntArray:
        """The links in the order of :attr:`sweep`: by generation of their tail, then head."""
        return self.topology.sweep_links

    @property
    def sweep_position(self) -> IntArray:
        """Where each link sits in :attr:`sweep_links`."""
        return self.topology.sweep_position

    @property
    def generations(self) -> tuple[IntArray, ...]:
        """Nodes grouped by topological generation (:attr:`Topology.generations`)."""
        return self.topology.generations

    def link_index(self, u: int, v: int) -> int:
        """Index of the link ``u -> v`` (node indices)."""
        return self.topology.link_of[(u, v)]


def node_cost_table(
    inst: CodesignInstance, nodes: IntArray, beta: float, terms: FloatArray | None = None
) -> FloatArray:
    """``f_v(max(0, w(i, j) / beta - C_v))`` plus the extra node terms (memory, see
    :class:`~inferplan.codesign.instance.Terms`) for each of ``nodes`` and ``(i, j)`` (``inf``
    for ``i > j`` and beyond a cap or a limit). Linear costs are priced in one vectorised
    step, others one node at a time. ``terms``, when given, are the extra node terms of
    ``nodes`` formed beforehand."""
    rho = np.maximum(0.0, inst.loads_or_zero_of(nodes) / beta - inst.capacity[nodes][:, None, None])
    cost = inst.node_pricing.cost(nodes, rho, inst.node_costs)
    if terms is not None:  # the extra terms of these nodes, formed once (they keep no beta)
        cost += terms
    elif not inst.terms.empty:
        cost += inst.terms.node(nodes)
    cost += inst.forbidden
    return cost


def link_cost_table(inst: CodesignInstance, links: IntArray, beta: float) -> FloatArray:
    """``g_e(max(0, D_j / beta - B_e))`` plus the extra link terms for each of ``links``
    (rows) and each ``j`` (columns), ``inf`` beyond a cap."""
    sigma = np.maximum(0.0, inst.activation_bits[None, :] / beta - inst.bandwidth[links, None])
    cost = inst.link_pricing.cost(links, sigma, inst.link_costs)
    extra = inst.extra_terms  # memory's terms have no link part (nor are its needs formed)
    if extra is not None and extra.table_links.size:
        cost += extra.link(links)
    return cost


def memory_terms(inst: CodesignInstance) -> Terms:
    """The memory term of every transition of ``inst`` (none when every node's memory holds
    the whole model, or is unlimited)."""
    W = inst.n_cuts
    if not np.isfinite(inst.memory).any():  # the needs are not even formed
        return Terms.none(W)
    need = inst.memory_need
    short = np.flatnonzero(inst.memory < inst.most_need)
    if not short.size:
        return Terms.none(W)
    pricing = inst.memory_pricing
    limit = inst.memory + pricing.cap  # what a node can hold at most (inf where unbounded)
    priced = short[pricing.cap[short] > 0]
    need_or_zero = np.where(np.isfinite(need), need, 0.0)

    def node(nodes: IntArray) -> FloatArray:
        extra = np.maximum(0.0, need_or_zero[None] - inst.memory[nodes][:, None, None])
        cost = pricing.cost(nodes, extra, inst.memory_costs)
        cost[extra == 0.0] = 0.0  # every cost is zero at zero (a callable's too)
        return cost

    empty = np.zeros(0, dtype=np.int64)
    return Terms(node, priced, need, limit, Terms.none(W).link, empty)


def _pricing(costs: CostColumns, prices: FloatArray, positions: IntArray) -> Pricing:
    """Pricing of the elements at ``positions`` of a network column of linear ``prices``,
    some of which have cost functions (``costs``, by position), built column-wise."""
    price, cap, other = costs.pricing(prices, positions)
    return Pricing(price=price, cap=cap, capped=np.flatnonzero(np.isfinite(cap)), other=other)


def _rows(start: IntArray, order: IntArray) -> tuple[IntArray, ...]:
    return tuple(np.split(order, start[1:-1]))


def _find_cycle(graph: nx.DiGraph) -> list[str]:
    import networkx as nx  # only to name the cycle in an error

    cycle = nx.find_cycle(graph)
    return [str(u) for u, _ in cycle] + [str(cycle[0][0])]


def _topological_order(n: int, src: IntArray, dst: IntArray) -> IntArray | None:
    """Kahn's algorithm taking the lowest index first (file order among equals); ``None`` if
    the graph has a cycle. When every link goes from a lower index to a higher one (a file
    written in a topological order, as the generators and most tools write them), that order
    is the identity, found without the loop."""
    if bool(np.all(src < dst)):
        return np.arange(n, dtype=np.int64)
    indegree = np.bincount(dst, minlength=n).tolist()
    start, order = adjacency(src, n)
    first, heads = start.tolist(), dst[order].tolist()
    ready = [v for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    done: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        done.append(v)
        for z in heads[first[v] : first[v + 1]]:
            indegree[z] -= 1
            if indegree[z] == 0:
                heapq.heappush(ready, z)
    return np.array(done, dtype=np.int64) if len(done) == n else None


def compile_instance(
    network: Network,
    profile: Profile,
    *,
    require_acyclic: bool = True,
    cuts: CutKind | None = None,
    max_ideals: int | None = None,
    pairs: bool = True,
    held: int | None = None,
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY,
) -> CodesignInstance:
    """Compile ``network`` and ``profile`` for the solvers.

    ``cuts``: the states of the model, ``"chain"`` (between consecutive blocks) or
    ``"graph"`` (every ideal of the profile's layer graph, at most ``max_ideals``); by
    default the graph's when the profile has one within the limits of the solver (``pairs``:
    one that keeps tables of every pair of cuts; ``held``: the most ideals one without them
    holds, ``None`` for every one), else the chain's (see
    :func:`~inferplan.profiles.ideals.cuts_of`). The tables of pairs
    (:attr:`~CodesignInstance.work_between` and those made from it) are formed when a solver
    first asks for them, from ``node_time``, how long a stage takes on a node
    (:mod:`~inferplan.codesign.timing`; by default its FLOPs over the node's capacity; a
    :class:`~inferplan.codesign.timing.stage.PerNodeTimeModel` gives each node its own).

    Raises
    ------
    NetworkHasCycle
        If ``require_acyclic`` and a cycle lies on the way from source to target.
    InvalidArgument
        For ``cuts="graph"`` without a layer graph or beyond the limits.
    """
    layout = _LAYOUTS.get(network, "layout", lambda: _layout(network))
    if not layout.acyclic and require_acyclic:
        kept = [network.node_ids[k] for k in np.sort(layout.node_positions).tolist()]
        cycle = " -> ".join(repr(v) for v in _find_cycle(network.graph.subgraph(kept)))
        raise NetworkHasCycle(
            f"cycle {cycle} lies on the way from source to target; PSG, PFP, PWF and T* are "
            "exact only on acyclic networks (method 'milp' solves cyclic ones)",
            field="links",
        )
    states = cuts_of(profile, cuts, max_ideals=max_ideals, pairs=pairs, held=held)
    # Every field set at once: the frozen dataclass's __init__ sets its 27 fields one
    # object.__setattr__ at a time, which takes longer than a small chain's whole solve.
    inst = object.__new__(CodesignInstance)
    inst.__dict__.update(layout.fields, network=network, profile=profile, cuts=states,
                         activation_bits=states.bits, node_time=node_time)  # fmt: skip
    return inst


_NEEDS: KeptFor[Cuts, tuple[FloatArray, float]] = KeptFor()
"""Each profile's memory need table and its largest entry, by its cuts."""


def _needs(profile: Profile, cuts: Cuts) -> tuple[FloatArray, float]:
    """:attr:`CodesignInstance.memory_need` and :attr:`~CodesignInstance.most_need` made."""
    need = graph_memory_need(profile, cuts) if cuts.kind == "graph" else memory_need(profile)
    need.flags.writeable = False
    if cuts.is_chain:
        return need, float(need[0, -1])
    return need, float(np.max(need, where=np.isfinite(need), initial=0.0))


@dataclass(frozen=True, eq=False)
class _Layout:
    """The fields of an instance that depend on its network alone (:func:`_layout`)."""

    node_ids: tuple[str, ...]
    capacity: FloatArray
    link_src: IntArray
    link_dst: IntArray
    bandwidth: FloatArray
    node_positions: IntArray
    link_positions: IntArray
    out_start: IntArray
    out_order: IntArray
    in_start: IntArray
    in_order: IntArray
    source: int
    target: int
    acyclic: bool
    memory: FloatArray
    topology: Topology

    @cached_property
    def fields(self) -> dict[str, object]:
        """These fields, and those of an instance that take their defaults, by name: every
        field of :class:`CodesignInstance` but ``network``, ``profile``, ``cuts``,
        ``activation_bits`` and ``node_time``."""
        own = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        defaults = {f.name: f.default for f in dataclasses.fields(CodesignInstance)
                    if f.default is not dataclasses.MISSING and f.name != "node_time"}  # fmt: skip
        return {**own, **defaults}


_LAYOUTS: KeptFor[Network, _Layout] = KeptFor()
"""What :func:`compile_instance` takes from each network alone (:func:`_layout`)."""


def _layout(network: Network) -> _Layout:
    """The fields of an instance that depend on ``network`` alone, its arrays read-only:
    every instance compiled from the network shares them."""
    on_path = network.on_path
    keep = np.flatnonzero(on_path)  # network positions of the kept nodes, in file order
    kept_links = np.flatnonzero(on_path[network.link_tail] & on_path[network.link_head])
    position = np.full(on_path.size, -1, dtype=np.int64)
    position[keep] = np.arange(keep.size)
    src = position[network.link_tail[kept_links]]
    dst = position[network.link_head[kept_links]]
    topo = _topological_order(keep.size, src, dst)
    acyclic = topo is not None
    if topo is None:
        topo = np.arange(keep.size, dtype=np.int64)
    rank = np.empty(keep.size, dtype=np.int64)
    rank[topo] = np.arange(keep.size)
    nodes = keep[topo]
    link_src, link_dst = rank[src], rank[dst]
    out_start, out_order = adjacency(link_src, keep.size)
    in_start, in_order = adjacency(link_dst, keep.size)
    capacity, bandwidth = network.node_capacity[nodes], network.link_capacity[kept_links]
    memory = network.node_memory[nodes]
    for array in (capacity, link_src, link_dst, bandwidth, nodes, kept_links, out_start,
                  out_order, in_start, in_order, memory):  # fmt: skip
        array.flags.writeable = False
    ids = network.node_ids
    return _Layout(
        node_ids=tuple(ids[k] for k in nodes.tolist()),
        capacity=capacity,
        link_src=link_src,
        link_dst=link_dst,
        bandwidth=bandwidth,
        node_positions=nodes,
        link_positions=kept_links,
        out_start=out_start,
        out_order=out_order,
        in_start=in_start,
        in_order=in_order,
        source=int(rank[position[network.node_position[network.source]]]),
        target=int(rank[position[network.node_position[network.target]]]),
        acyclic=acyclic,
        memory=memory,
        topology=Topology(keep.size, link_src, link_dst, out_start, out_order, in_start, in_order),
    )
