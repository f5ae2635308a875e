"""The cuts of a model, the states of the co-design state graph: prefixes of a block chain,
or the ideals (down-closed sets) of a layer graph.

A deployment runs ``J_l \\ J_(l-1)`` on the ``l``-th node of its path for a chain of cuts
``{} = J_0 ⊆ J_1 ⊆ ... ⊆ J_L = all``, and the link after it carries the boundary of ``J_l``.
:class:`Cuts` holds what the solvers need of every cut: the work between two of them (``inf``
unless the first is inside the second), the bits of each boundary and the parameters of each
cut. Cuts are numbered by size, then by their members, so ``I ⊂ J`` implies that ``I`` comes
first: a solver may relax them in index order. A chain is the special case whose cuts are the
prefixes ``0..N``: its tables are the block-range sums
(:func:`~inferplan.arrays.range_sums`), entry for entry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray, exact_differences, ratio, scaled_exactly
from inferplan.errors import InvalidArgument
from inferplan.memo import KeptFor
from inferplan.profiles.graph import INPUT, LayerGraph
from inferplan.profiles.profile import Profile

__all__ = [
    "CUT_KINDS",
    "DEFAULT_MAX_IDEALS",
    "MAX_IDEALS",
    "MAX_STATE_CUTS",
    "MAX_SUBSET_CUTS",
    "CutKind",
    "Cuts",
    "chain_cuts",
    "count_ideals",
    "cuts_of",
    "graph_cuts",
]

CutKind = Literal["chain", "graph"]
CUT_KINDS: tuple[CutKind, ...] = ("chain", "graph")

DEFAULT_MAX_IDEALS = 100_000
"""How many ideals a layer graph may have before enumerating them is refused."""

MAX_IDEALS = 1_000_000
"""The most ideals a limit may allow: each one enumerated takes some hundred bytes, and
T*'s lattice engine sweeps them dozens of times (``max_ideals`` is refused above this)."""

MAX_STATE_CUTS = 4_096
"""How many cuts the planners that hold tables of every pair of cuts take (``K x K`` floats,
134 MB at this size): all but T*'s lattice engine."""


MAX_SUBSET_CUTS = 32_768
"""How many cuts PSG's subset step takes (:mod:`~inferplan.codesign.engine.subsets`: no table
of pairs, but the ideals inside each ideal as bits, ``K x K / 8`` bytes: 134 MB at this size,
as the tables of pairs at :data:`MAX_STATE_CUTS`)."""


@dataclass(frozen=True, eq=False)
class Cuts:
    """The cuts of a model (see the module docstring).

    Attributes
    ----------
    kind
        ``"chain"`` (the prefixes of the blocks) or ``"graph"`` (the ideals of the layers).
    units
        The blocks' or layers' names; a graph's in a topological order.
    members
        ``(K, n)``: which units each cut holds (``None`` for a chain, whose cut ``k`` holds the
        first ``k`` units).
    bits
        ``(K,)``: bits of each cut's boundary (``D_0..D_N`` for a chain).
    params
        ``(K,)``: parameters of each cut's units.
    exact_work
        Each cut's FLOPs as an exact integer multiple of ``unit``.
    sends
        ``(K, n + 1)``: which tensors leave each cut, the input first, then each unit's output
        (``None`` for a chain, whose cut ``k`` sends the output of unit ``k``, or the input).
    covers
        ``(2, H)``: the Hasse diagram, each pair ``(i, j)`` a cut ``i`` that is cut ``j`` less
        one unit, sorted by ``j`` (``None`` for a chain, whose covers are ``(k - 1, k)``).
    """

    kind: CutKind
    units: tuple[str, ...]
    members: npt.NDArray[np.bool_] | None
    bits: FloatArray
    params: IntArray
    exact_work: tuple[int, ...]
    unit: int
    sends: npt.NDArray[np.bool_] | None = None
    covers: IntArray | None = None

    @property
    def n_cuts(self) -> int:
        """``K``, the number of cuts (``N + 1`` for a chain)."""
        return int(self.bits.size)

    @property
    def last(self) -> int:
        """The index of the cut holding every unit."""
        return self.n_cuts - 1

    @cached_property
    def is_chain(self) -> bool:
        """Whether cut ``k`` is the first ``k`` units for every ``k`` (the linear-time
        kernels' case)."""
        if self.members is None:
            return True
        K, n = self.members.shape
        return n + 1 == K and bool(np.array_equal(self.members, np.tri(K, n, k=-1, dtype=bool)))

    @cached_property
    def subset(self) -> npt.NDArray[np.bool_]:
        """``subset[i, j]``: cut ``i`` lies inside cut ``j`` (a transition from ``i`` to ``j``
        exists), the root of every table of pairs.

        Raises
        ------
        InvalidArgument
            For more than :data:`MAX_STATE_CUTS` ideals (a chain's table is always formed).
        """
        if self.members is None or self.is_chain:
            return ~np.tri(self.n_cuts, k=-1, dtype=bool)
        if self.n_cuts > MAX_STATE_CUTS:
            raise _too_many_for_planners(self.n_cuts)
        words = _packed(self.members)
        inside = np.ones((self.n_cuts, self.n_cuts), dtype=bool)
        for w in range(words.shape[1]):
            col = words[:, w]
            inside &= (col[:, None] & ~col[None, :]) == 0
        return inside

    @cached_property
    def work_between(self) -> FloatArray:
        """``w(i, j)``: FLOPs of the units of cut ``j`` outside cut ``i``, rounded once
        (``inf`` where ``i`` is not inside ``j``)."""
        sums = exact_differences(self.exact_work, self.unit)
        sums[~self.subset] = np.inf
        sums.flags.writeable = False  # shared by every instance compiled from these cuts
        return sums

    def inside(self, i: int, j: int) -> bool:
        """One entry of :attr:`subset`, formed without the table."""
        return self.members is None or not bool((self.members[i] & ~self.members[j]).any())

    def work(self, i: int, j: int) -> float:
        """One entry of :attr:`work_between`, formed without the table."""
        if not self.inside(i, j):
            return math.inf
        return ratio(self.exact_work[j] - self.exact_work[i], self.unit)

    @cached_property
    def lower_covers(self) -> tuple[IntArray, IntArray]:
        """:attr:`covers` as ``(lower, first)``: the cuts one unit smaller than cut ``j`` are
        ``lower[first[j]:first[j + 1]]`` (none for the empty cut, at least one for every
        other)."""
        if self.covers is None:
            lower = np.arange(self.n_cuts - 1, dtype=np.int64)
            return lower, np.r_[0, np.arange(self.n_cuts, dtype=np.int64)]
        first = np.searchsorted(self.covers[1], np.arange(self.n_cuts + 1))
        return self.covers[0], first.astype(np.int64)

    @cached_property
    def sizes(self) -> IntArray:
        """How many units each cut holds (non-decreasing: the cuts are numbered by size)."""
        if self.members is None:
            return np.arange(self.n_cuts, dtype=np.int64)
        sizes: IntArray = self.members.sum(axis=1, dtype=np.int64)
        return sizes

    def units_between(self, i: int, j: int) -> tuple[str, ...]:
        """The names of the units of cut ``j`` outside cut ``i``, in order."""
        if self.members is None:
            return self.units[i:j]
        fresh = self.members[j] & ~self.members[i]
        return tuple(self.units[k] for k in np.flatnonzero(fresh).tolist())

    def boundary(self, k: int) -> tuple[str, ...]:
        """The tensors that leave cut ``k``, in a fixed order (``input`` first, then by unit):
        what a link after it carries."""
        if self.sends is None:
            return (INPUT,) if k == 0 else (self.units[k - 1],)
        names = (INPUT, *self.units)
        return tuple(names[x] for x in np.flatnonzero(self.sends[k]).tolist())

    def params_between(self, i: int, j: int) -> int:
        """Parameters of the units of cut ``j`` outside cut ``i``."""
        return int(self.params[j] - self.params[i])


def _packed(members: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint64]:
    """Each row of ``members`` as 64-bit words."""
    K, n = members.shape
    padded = np.zeros((K, -(-n // 64) * 64), dtype=bool)
    padded[:, :n] = members
    return np.packbits(padded, axis=1, bitorder="little").view(np.uint64)


def chain_cuts(profile: Profile) -> Cuts:
    """The prefixes of ``profile``'s blocks as cuts."""
    scaled, unit = scaled_exactly(profile.flops)
    exact = [0]
    for x in scaled:
        exact.append(exact[-1] + x)
    return Cuts(
        kind="chain",
        units=profile.blocks,
        members=None,
        bits=np.asarray(profile.activation_bits, dtype=np.float64),
        params=np.concatenate(([0], np.cumsum(profile.params, dtype=np.int64))),
        exact_work=tuple(exact),
        unit=unit,
    )


def _enumerate(
    graph: LayerGraph, limit: int
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int]]] | None:
    """Every ideal of ``graph`` as ``(bitmask over the topological order, exact work, params)``
    by size, then bitmask, and the Hasse diagram (pairs of indices, the second ideal the first
    and one layer more); ``None`` past ``limit`` ideals.

    Each ideal keeps the layers that may join it (those outside whose inputs are all in), so
    growing it by one of them updates that set from the layer's successors alone:
    ``O(K (d + s))`` steps for ``K`` ideals of at most ``d`` such layers, ``s`` successors each.
    """
    order = graph.order
    position = {v: k for k, v in enumerate(order)}
    needs = [sum(1 << position[u] for u in graph.predecessors[v]) for v in order]
    after: list[list[int]] = [[] for _ in order]
    for v in order:
        for u in graph.predecessors[v]:
            after[position[u]].append(position[v])
    scaled, _ = scaled_exactly(graph.flops)
    work = [scaled[v] for v in order]
    params = [graph.params[v] for v in order]
    ready = sum(1 << k for k, need in enumerate(needs) if need == 0)
    level: list[tuple[int, int, int, int]] = [(0, 0, 0, ready)]  # mask, work, params, ready
    out = [(0, 0, 0)]
    covers: list[tuple[int, int]] = []
    for _ in range(graph.n_layers):
        grown: dict[int, tuple[int, int, int]] = {}
        below: list[tuple[int, int]] = []  # (index of the smaller ideal, mask of the larger)
        base = len(out) - len(level)
        for r, (mask, w, p, free) in enumerate(level):
            rest = free
            while rest:
                bit = rest & -rest
                rest ^= bit
                child = mask | bit
                below.append((base + r, child))
                if child not in grown:
                    k = bit.bit_length() - 1
                    joins = sum(1 << z for z in after[k] if needs[z] & child == needs[z])
                    grown[child] = (w + work[k], p + params[k], (free & ~bit) | joins)
        masks = sorted(grown)
        index = {m: len(out) + r for r, m in enumerate(masks)}
        level = [(m, *grown[m]) for m in masks]
        out.extend((m, w, p) for m, w, p, _ in level)
        covers.extend(sorted((i, index[m]) for i, m in below))
        if len(out) > limit:
            return None
    covers.sort(key=lambda pair: pair[1])
    return out, covers


def count_ideals(graph: LayerGraph, limit: int = DEFAULT_MAX_IDEALS) -> int | None:
    """The number of ideals of ``graph`` (the empty set and all layers included), or
    ``None`` when there are more than ``limit``.

    Examples
    --------
    >>> g = LayerGraph(("a", "b"), flops=(1.0, 1.0), output_bits=(8.0, 8.0),
    ...                edges=(("input", "a"), ("input", "b")), input_bits=8.0)
    >>> count_ideals(g)  # {}, {a}, {b}, {a, b}
    4
    """
    found = _enumerate(graph, limit)
    return None if found is None else len(found[0])


def graph_cuts(graph: LayerGraph, *, max_ideals: int = DEFAULT_MAX_IDEALS) -> Cuts:
    """The ideals of ``graph`` as cuts, in the order of the module docstring.

    Raises
    ------
    InvalidArgument
        If ``graph`` has more than ``max_ideals`` ideals.

    Examples
    --------
    >>> g = LayerGraph(("a", "b", "c"), flops=(1.0, 2.0, 3.0), output_bits=(8.0, 4.0, 2.0),
    ...                edges=(("input", "a"), ("input", "b"), ("a", "c"), ("b", "c")),
    ...                input_bits=16.0)
    >>> cuts = graph_cuts(g)
    >>> cuts.n_cuts, [cuts.units_between(0, k) for k in range(cuts.n_cuts)][1:3]
    (5, [('a',), ('b',)])
    >>> cuts.bits.tolist()  # {}: the input; {a}: input + a; {b}: input + b; {a, b}; all
    [16.0, 24.0, 20.0, 12.0, 2.0]
    """
    _check_limit(max_ideals)
    enumerated = _enumerate(graph, max_ideals)
    if enumerated is None:
        raise InvalidArgument(
            f"the layer graph has more than {max_ideals} ideals (cuts): cut the model between "
            "its blocks (chain cuts), give a coarser layer graph (granularity: blocks, or a "
            "smaller depth), or raise the limit",
            field="max_ideals",
        )
    found, covers = enumerated
    n = graph.n_layers
    masks = [m for m, _, _ in found]
    nbytes = -(-n // 8)
    raw = np.frombuffer(b"".join(m.to_bytes(nbytes, "little") for m in masks), dtype=np.uint8)
    unpacked = np.unpackbits(raw.reshape(len(masks), nbytes), axis=1, bitorder="little")
    members: npt.NDArray[np.bool_] = unpacked[:, :n].astype(bool)
    order = graph.order
    position = {v: k for k, v in enumerate(order)}
    outputs = set(graph.sinks)
    leaving = np.zeros_like(members)
    for v in order:  # a layer's output leaves an ideal holding it that a reader is outside of
        u = position[v]
        readers = [position[z] for z in graph.successors[v]]
        unread = ~members[:, readers].all(axis=1) if readers else np.zeros(len(masks), bool)
        leaving[:, u] = members[:, u] & (unread | (v in outputs))
    first = [position[v] for v in graph.input_readers]
    input_sent = np.logical_not(members[:, first].all(axis=1))
    out_bits = np.array([graph.output_bits[v] for v in order])
    bits = [
        math.fsum([graph.input_bits] * bool(sent) + out_bits[row].tolist())
        for sent, row in zip(list(input_sent), leaving, strict=True)
    ]
    _, unit = scaled_exactly(graph.flops)
    return Cuts(
        kind="graph",
        units=tuple(graph.layers[v] for v in order),
        members=members,
        bits=np.array(bits),
        params=np.array([p for _, _, p in found], dtype=np.int64),
        exact_work=tuple(w for _, w, _ in found),
        unit=unit,
        sends=np.column_stack((input_sent, leaving)),
        covers=np.array(covers, dtype=np.int64).reshape(-1, 2).T.copy(),
    )


def cuts_of(
    profile: Profile,
    cuts: CutKind | None = None,
    *,
    max_ideals: int | None = None,
    pairs: bool = True,
    held: int | None = None,
) -> Cuts:
    """The cuts the planners search for ``profile``: ``"chain"`` (its blocks), ``"graph"``
    (the ideals of its layer graph, at most ``max_ideals``, :data:`DEFAULT_MAX_IDEALS` when
    not given), or, when not given, the graph's when the profile has one whose ideals the
    planner holds, else the chain's. ``pairs``: whether the planner keeps tables of every pair
    of cuts, so that it holds at most :data:`MAX_STATE_CUTS` ideals; ``held``: the most a
    planner without them holds (PSG's subset step, :data:`MAX_SUBSET_CUTS`; ``None``: every
    one up to ``max_ideals``, as T*'s lattice engine, :mod:`~inferplan.codesign.engine.lattice`).

    The cuts of one profile object and the same arguments are made once and kept while the
    profile lives (it is immutable), their tables (:attr:`Cuts.work_between`, ...) with them:
    compiling the same model for another network or solve finds them made.

    Raises
    ------
    InvalidArgument
        For ``cuts="graph"`` on a profile without a layer graph, or one with more ideals than
        ``max_ideals`` or than the planner holds. Past :data:`MAX_STATE_CUTS` ideals the tables
        of pairs refuse when a planner asks for them (:attr:`Cuts.subset`).
    """
    if cuts not in (None, *CUT_KINDS):
        raise InvalidArgument(f"must be 'chain' or 'graph', got {cuts!r}", field="cuts")
    limits = (max_ideals, pairs, held, DEFAULT_MAX_IDEALS, MAX_STATE_CUTS, MAX_SUBSET_CUTS)
    made = lambda: _frozen(_made_cuts(profile, cuts, max_ideals, pairs, held))  # noqa: E731
    return _KEPT.get(profile, (cuts, *limits), made)


_KEPT: KeptFor[Profile, Cuts] = KeptFor()
"""The cuts :func:`cuts_of` made, by profile and arguments."""


def _frozen(cuts: Cuts) -> Cuts:
    """``cuts`` with its arrays read-only: kept, they are shared by every instance."""
    for array in (cuts.members, cuts.bits, cuts.params, cuts.sends, cuts.covers):
        if array is not None:
            array.flags.writeable = False
    return cuts


def _made_cuts(profile: Profile, cuts: CutKind | None, max_ideals: int | None,
               pairs: bool, held: int | None) -> Cuts:  # fmt: skip
    """:func:`cuts_of`, made afresh."""
    max_ideals = DEFAULT_MAX_IDEALS if max_ideals is None else max_ideals
    if cuts == "chain" or (cuts is None and profile.graph is None):
        return chain_cuts(profile)
    if profile.graph is None:
        raise InvalidArgument(
            f"profile {profile.name!r} has no layer graph: its cuts are its blocks' (chain)",
            field="cuts",
        )
    most = MAX_STATE_CUTS if pairs else held
    if cuts is None:
        try:
            return graph_cuts(profile.graph, max_ideals=min(max_ideals, most or max_ideals))
        except InvalidArgument:
            return chain_cuts(profile)
    if most is not None and max_ideals > most:  # enumerate no more than the planner holds
        try:
            return graph_cuts(profile.graph, max_ideals=most)
        except InvalidArgument:
            _check_limit(max_ideals)
            raise _too_many_for_planners(f"more than {most}", most) from None
    return graph_cuts(profile.graph, max_ideals=max_ideals)


def _check_limit(max_ideals: int) -> None:
    if not 2 <= max_ideals <= MAX_IDEALS:
        raise InvalidArgument(f"must be from 2 to {MAX_IDEALS:,}, got {max_ideals}",
                              field="max_ideals")  # fmt: skip


def _too_many_for_planners(n_cuts: int | str, most: int = MAX_STATE_CUTS) -> InvalidArgument:
    tables = "it keeps a table of every pair; " if most == MAX_STATE_CUTS else ""
    return InvalidArgument(
        f"{n_cuts} cuts are more than this planner holds ({most}: {tables}PSG takes up to "
        f"{MAX_SUBSET_CUTS}, T*, PFP and PWF without memory limits more): cut the model "
        "between its blocks (chain cuts) or give a coarser layer graph",
        field="cuts",
    )
