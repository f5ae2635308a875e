"""A network and a profile compiled into arrays: the state graph every co-design solver walks.

Only nodes on some source-target path are kept, in a topological order (file order among
equals) when the relevant part of the network is acyclic. Compiling reads the network's
columns and builds every array with numpy: no Python object per node or link (the
:class:`~inferplan.network.network.Link` objects and cost functions of :attr:`links`,
:attr:`node_costs` and :attr:`link_costs` are made when an element is looked up).
"""

from __future__ import annotations

import heapq
import operator
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar, overload

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray
from inferplan.errors import NetworkHasCycle
from inferplan.network.cost_columns import CostColumns, Pieces
from inferplan.network.costs import CapacityCost
from inferplan.network.network import Link, Network, adjacency
from inferplan.profiles.ideals import CutKind, Cuts, cuts_of, range_sums
from inferplan.profiles.profile import Profile

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["CodesignInstance", "Generation", "Pricing", "compile_instance", "range_sums"]

T = TypeVar("T")


class Lookup(Sequence[T]):
    """A read-only sequence whose items are made when looked up (``item(k)``)."""

    def __init__(self, size: int, item: Callable[[int], T]) -> None:
        self._size, self._item = size, item

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
        if not -self._size <= j < self._size:
            raise IndexError(f"index {k} out of range for {self._size} items")
        return self._item(j % self._size)

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
    work_between: FloatArray
    prefix_flops: FloatArray
    activation_bits: FloatArray
    source: int
    target: int
    acyclic: bool
    cuts: Cuts
    own_node_costs: tuple[CapacityCost, ...] | None = None
    """Every node's cost function by index, in place of the network's (see :meth:`priced`)."""
    own_link_costs: tuple[CapacityCost, ...] | None = None
    """Every link's cost function by index, in place of the network's."""

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

    @cached_property
    def out_links(self) -> tuple[IntArray, ...]:
        """The out-links of each node, in increasing order."""
        return _rows(self.out_start, self.out_order)

    @cached_property
    def in_links(self) -> tuple[IntArray, ...]:
        """The in-links of each node, in increasing order."""
        return _rows(self.in_start, self.in_order)

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

    def work(self, i: int, j: int) -> float:
        """``w(i, j)``, the FLOPs of cut ``j`` outside cut ``i`` (rounded once)."""
        return self._work_item(i, j)

    @cached_property
    def _work_item(self) -> Callable[[int, int], float]:
        item: Callable[[int, int], float] = self.work_between.item  # a Python float, quickly
        return item

    @cached_property
    def highest_prices(self) -> tuple[float, float]:
        """The highest unit price of the nodes' and of the links' linear costs (0 if none)."""
        return (float(np.max(self.node_pricing.price, initial=0.0)),
                float(np.max(self.link_pricing.price, initial=0.0)))  # fmt: skip

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
        position = np.empty(len(self.links), dtype=np.int64)
        position[self.sweep_links] = np.arange(self.sweep_links.size)
        return position

    @cached_property
    def generations(self) -> tuple[IntArray, ...]:
        """Nodes grouped by topological generation (acyclic instances only).

        Generation ``g`` holds the nodes whose longest chain of in-links from a node without
        in-links has ``g`` links; no link joins two nodes of one generation, so a solver may
        relax a whole generation at once.
        """
        level = np.zeros(len(self.node_ids), dtype=np.int64)
        for v in range(len(self.node_ids)):
            ins = self.in_links[v]
            if ins.size:
                level[v] = level[self.link_src[ins]].max() + 1
        order = np.argsort(level, kind="stable")
        bounds = np.flatnonzero(np.diff(level[order])) + 1
        return tuple(np.split(order, bounds))

    def link_index(self, u: int, v: int) -> int:
        """Index of the link ``u -> v`` (node indices)."""
        return self._link_of[(u, v)]

    @cached_property
    def _link_of(self) -> dict[tuple[int, int], int]:
        return {
            (u, v): e
            for e, (u, v) in enumerate(zip(self.link_src.tolist(), self.link_dst.tolist(),
                                           strict=True))
        }  # fmt: skip


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
) -> CodesignInstance:
    """Compile ``network`` and ``profile`` for the solvers.

    ``cuts``: the states of the model, ``"chain"`` (between consecutive blocks) or
    ``"graph"`` (every ideal of the profile's layer graph, at most ``max_ideals``); by
    default the graph's when the profile has one within the limits, else the chain's (see
    :func:`~inferplan.profiles.ideals.cuts_of`).

    Raises
    ------
    NetworkHasCycle
        If ``require_acyclic`` and a cycle lies on the way from source to target.
    InvalidArgument
        For ``cuts="graph"`` without a layer graph or beyond the limits.
    """
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
        if require_acyclic:
            kept = [network.node_ids[k] for k in keep.tolist()]
            cycle = " -> ".join(repr(v) for v in _find_cycle(network.graph.subgraph(kept)))
            raise NetworkHasCycle(
                f"cycle {cycle} lies on the way from source to target; PSG, PFP, PWF and T* are "
                "exact only on acyclic networks (method 'milp' solves cyclic ones)",
                field="links",
            )
        topo = np.arange(keep.size, dtype=np.int64)
    rank = np.empty(keep.size, dtype=np.int64)
    rank[topo] = np.arange(keep.size)
    nodes = keep[topo]
    link_src, link_dst = rank[src], rank[dst]
    out_start, out_order = adjacency(link_src, keep.size)
    in_start, in_order = adjacency(link_dst, keep.size)
    ids = network.node_ids
    states = cuts_of(profile, cuts, max_ideals=max_ideals)
    work = states.work_between
    return CodesignInstance(
        network=network,
        profile=profile,
        node_ids=tuple(ids[k] for k in nodes.tolist()),
        capacity=network.node_capacity[nodes],
        link_src=link_src,
        link_dst=link_dst,
        bandwidth=network.link_capacity[kept_links],
        node_positions=nodes,
        link_positions=kept_links,
        out_start=out_start,
        out_order=out_order,
        in_start=in_start,
        in_order=in_order,
        work_between=work,
        prefix_flops=work[0].copy(),
        activation_bits=states.bits,
        source=int(rank[position[network.node_position[network.source]]]),
        target=int(rank[position[network.node_position[network.target]]]),
        acyclic=acyclic,
        cuts=states,
    )
