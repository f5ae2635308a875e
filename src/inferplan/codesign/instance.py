"""A network and a profile compiled into arrays: the state graph every co-design solver walks.

Only nodes on some source-target path are kept, in a topological order (file order among
equals) when the relevant part of the network is acyclic.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray
from inferplan.errors import NetworkHasCycle
from inferplan.network.costs import CapacityCost, Segments, segments
from inferplan.network.network import Link, Network
from inferplan.profiles.profile import Profile

if TYPE_CHECKING:
    import networkx as nx

__all__ = ["CodesignInstance", "Generation", "Pricing", "compile_instance", "range_sums"]


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
    ``0..E-1``. ``work_between[i, j]`` is ``w(i, j) = Q_(i+1) + ... + Q_j``, the FLOPs of
    blocks ``i+1..j`` rounded once (``inf`` for ``i > j``, which no transition does): every
    solver takes a stage's work from it, never as a difference of prefix sums, which loses a
    small block beside a large one. ``prefix_flops`` is ``S_0..S_N`` (its first row) and
    ``activation_bits`` is ``D_0..D_N``.
    """

    network: Network
    profile: Profile
    node_ids: tuple[str, ...]
    capacity: FloatArray
    node_costs: tuple[CapacityCost, ...]
    links: tuple[Link, ...]
    link_src: IntArray
    link_dst: IntArray
    bandwidth: FloatArray
    link_costs: tuple[CapacityCost, ...]
    in_links: tuple[IntArray, ...]
    out_links: tuple[IntArray, ...]
    work_between: FloatArray
    prefix_flops: FloatArray
    activation_bits: FloatArray
    source: int
    target: int
    acyclic: bool

    @property
    def n_blocks(self) -> int:
        return self.profile.n_blocks

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
        """``w(i, j)``, the FLOPs of blocks ``i+1..j`` (rounded once)."""
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
        return _pricing(self.node_costs)

    @cached_property
    def link_pricing(self) -> Pricing:
        """The links' costs in the arrays the vectorised solvers use."""
        return _pricing(self.link_costs)

    @cached_property
    def node_segments(self) -> tuple[Segments | None, ...]:
        """The piecewise-linear form of each node's cost (``None`` where it has none)."""
        return tuple(segments(c) for c in self.node_costs)

    @cached_property
    def no_transition(self) -> npt.NDArray[np.bool_]:
        """``i > j``: a node cannot send fewer blocks than it received."""
        return np.tri(self.n_blocks + 1, k=-1, dtype=bool)

    @cached_property
    def work_or_zero(self) -> FloatArray:
        """:attr:`work_between` with 0 for ``i > j``."""
        return np.where(self.no_transition, 0.0, self.work_between)

    @cached_property
    def forbidden(self) -> FloatArray:
        """0 for ``i <= j``, ``inf`` for ``i > j``: added to a cost, it rules out the rest."""
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


def range_sums(values: Sequence[float]) -> FloatArray:
    """``sums[i, j] = values[i] + ... + values[j - 1]`` rounded once to the nearest float, for
    ``0 <= i <= j <= n`` (0 on the diagonal, ``inf`` below it): equal to
    ``math.fsum(values[i:j])``.

    The sums are formed exactly as integers (in units of the finest power of two among the
    values), so no value is lost beside a much larger one, as ``S_j - S_i`` of floating-point
    prefix sums loses it (``[1e14, 1e-3]``: ``S_2 - S_1 = 0``). When every exact prefix sum is
    a float already (integer FLOP counts below ``2**53``, for instance), one vectorised
    subtraction of them is rounded once too and gives the same table.

    Examples
    --------
    >>> float(range_sums([1e14, 1e-3])[1, 2])
    0.001
    """
    ratios = [float(v).as_integer_ratio() for v in values]
    shift = max((den.bit_length() - 1 for _, den in ratios), default=0)
    unit = 1 << shift
    exact = [0]
    for num, den in ratios:
        exact.append(exact[-1] + num * (unit // den))
    prefix = [_ratio(p, unit) for p in exact]
    n = len(exact)
    below = np.tri(n, k=-1, dtype=bool)
    if all(_represents(f, p, unit) for f, p in zip(prefix, exact, strict=True)):
        S = np.array(prefix)
        sums: FloatArray = S[None, :] - S[:, None]
    else:
        P = np.array(exact, dtype=object)
        diff = np.where(below, 0, P[None, :] - P[:, None])
        sums = np.frompyfunc(lambda d: _ratio(d, unit), 1, 1)(diff).astype(np.float64)
    sums[below] = np.inf
    return sums


def _ratio(num: int, den: int) -> float:
    """``num / den`` rounded once (``inf`` beyond the largest float)."""
    try:
        return num / den
    except OverflowError:
        return math.inf


def _represents(value: float, num: int, den: int) -> bool:
    """Whether the float ``value`` equals ``num / den`` exactly (``den`` a power of two)."""
    if not math.isfinite(value):
        return False
    a, b = value.as_integer_ratio()
    return b <= den and a * (den // b) == num


def _pricing(costs: tuple[CapacityCost, ...]) -> Pricing:
    prices = [c.linear_price for c in costs]
    cap = np.array([c.max_amount for c in costs], dtype=np.float64)
    return Pricing(
        price=np.array([0.0 if p is None else p for p in prices], dtype=np.float64),
        cap=cap,
        capped=np.flatnonzero(np.isfinite(cap)),
        other=np.array([k for k, p in enumerate(prices) if p is None], dtype=np.int64),
    )


def _find_cycle(graph: nx.DiGraph) -> list[str]:
    import networkx as nx  # only to name the cycle in an error

    cycle = nx.find_cycle(graph)
    return [str(u) for u, _ in cycle] + [str(cycle[0][0])]


def _topological_order(n: int, src: IntArray, dst: IntArray) -> list[int] | None:
    """Kahn's algorithm taking the lowest index first (file order among equals); ``None`` if
    the graph has a cycle."""
    indegree = np.bincount(dst, minlength=n).tolist()
    outs = _group(src, n)
    ready = [v for v in range(n) if indegree[v] == 0]
    heapq.heapify(ready)
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        order.append(v)
        for z in dst[outs[v]].tolist():
            indegree[z] -= 1
            if indegree[z] == 0:
                heapq.heappush(ready, z)
    return order if len(order) == n else None


def _group(keys: IntArray, n: int) -> tuple[IntArray, ...]:
    """Indices of ``keys`` equal to ``0..n-1``, each in increasing order."""
    order = np.argsort(keys, kind="stable")
    bounds = np.searchsorted(keys[order], np.arange(n + 1))
    return tuple(order[bounds[k] : bounds[k + 1]] for k in range(n))


def compile_instance(
    network: Network, profile: Profile, *, require_acyclic: bool = True
) -> CodesignInstance:
    """Compile ``network`` and ``profile`` for the solvers.

    Raises
    ------
    NetworkHasCycle
        If ``require_acyclic`` and a cycle lies on the way from source to target.
    """
    keep = network.on_path_nodes()
    position = {v: k for k, v in enumerate(keep)}
    kept_links = [e for e in network.links if e.source in position and e.target in position]
    src = np.array([position[e.source] for e in kept_links], dtype=np.int64)
    dst = np.array([position[e.target] for e in kept_links], dtype=np.int64)
    topo = _topological_order(len(keep), src, dst)
    acyclic = topo is not None
    if topo is None and require_acyclic:
        cycle = " -> ".join(repr(v) for v in _find_cycle(network.graph.subgraph(keep)))
        raise NetworkHasCycle(
            f"cycle {cycle} lies on the way from source to target; PSG, PFP, PWF and T* are "
            "exact only on acyclic networks (method 'milp' solves cyclic ones)",
            field="links",
        )
    order = [keep[k] for k in topo] if topo is not None else list(keep)
    index = {v: k for k, v in enumerate(order)}
    links = tuple(kept_links)
    link_src = np.array([index[e.source] for e in links], dtype=np.int64)
    link_dst = np.array([index[e.target] for e in links], dtype=np.int64)
    nodes = [network.node_by_id[v] for v in order]
    work = range_sums(profile.flops)
    in_links = _group(link_dst, len(order))
    out_links = _group(link_src, len(order))
    return CodesignInstance(
        network=network,
        profile=profile,
        node_ids=tuple(order),
        capacity=np.array([n.capacity for n in nodes], dtype=np.float64),
        node_costs=tuple(n.capacity_cost for n in nodes),
        links=links,
        link_src=link_src,
        link_dst=link_dst,
        bandwidth=np.array([e.capacity for e in links], dtype=np.float64),
        link_costs=tuple(e.capacity_cost for e in links),
        in_links=in_links,
        out_links=out_links,
        work_between=work,
        prefix_flops=work[0].copy(),
        activation_bits=np.asarray(profile.activation_bits, dtype=np.float64),
        source=index[network.source],
        target=index[network.target],
        acyclic=acyclic,
    )
