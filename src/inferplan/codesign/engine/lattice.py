"""T* on the ideals of a layer graph without tables of pairs: reachability over the lattice
of ideals inside a search over the interval.

Cut at ideals, the state graph has ``K`` states per node and a transition between every two
ideals ``I ⊆ J``: the all-pairs step of :mod:`~inferplan.codesign.engine.throughput` costs
``O(K^2)`` per node and ``K x K`` tables, more than a machine holds past a few thousand ideals.
T* needs neither:

- **Whether an interval** ``beta`` **can be met** is reachability: the states ``(v, J)``
  that some deployment reaches with every stage so far within ``beta``. Node ``v`` turns a
  reached ``(v, I)`` into ``(v, J)``, ``I ⊆ J``, when ``w(I, J) / C_v <= beta``. Work is
  additive, ``w(I, J) = W(J) - W(I)``, so of all the reached ``I`` inside ``J`` the one with
  the most work is the best start, and it is found for every ``J`` in one pass over the Hasse
  diagram in size order: ``best(J)`` is ``J`` itself when reached, else the best of
  ``best(J')`` over the ideals ``J'`` that are ``J`` less one of its maximal layers (every
  ideal strictly inside ``J`` lies inside one of them). ``O(H)`` per node for the ``H`` pairs
  of the diagram (``H <= K d``, ``d`` the graph's width) and ``O(K)`` per link (``D_J / B_e
  <= beta``); a topological generation of nodes at once, one size of ideals at a time.
- **The interval** ``T*`` is the least ``beta`` that can be met, one of the stage delays:
  bisection on the bit patterns of the floats (non-negative floats order as their bits), at
  most 64 sweeps, each sweep that meets ``beta`` lowering the upper end to the interval of
  the deployment it found.

Exact: the delay compared is that of the start with the most exact (integer) work, the least
of all starts' delays since rounding is monotone, formed as the table forms it; so ``beta``
can be met here exactly when the all-pairs step's ``T* <= beta``, and the interval found is
its ``T*`` bit for bit. Among several optimal deployments the one read back from the target
is, at each node, the one whose start has the most work (the earlier nodes do all that
``beta`` lets them) and, among in-links, the earliest in file order: the deployment may differ
from the all-pairs step's, its interval never does.

Memory limits are not kept here: a limit between two ideals is no function of their work
alone, and the all-pairs step runs when a node's memory is finite.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray, ratio
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.stages import stages

__all__ = ["Lattice", "lattice_throughput"]

Bools = npt.NDArray[np.bool_]


@dataclass(frozen=True, eq=False)
class Lattice:
    """The ideals of an instance as the sweeps need them: the Hasse diagram by size, each
    ideal's rank by exact work, and the work as floats when those are exact."""

    inst: CodesignInstance

    @cached_property
    def levels(self) -> list[tuple[int, int, IntArray, IntArray]]:
        """For each size of ideals after the empty one: the ideals ``a..b-1`` of that size,
        their lower covers side by side and where each ideal's start (``reduceat``
        offsets)."""
        lower, first = self.inst.cuts.lower_covers
        sizes = self.inst.cuts.sizes
        bounds = np.flatnonzero(np.diff(sizes)) + 1
        ends = [*bounds.tolist(), sizes.size]
        out = []
        for a, b in itertools.pairwise(ends):
            lo, hi = int(first[a]), int(first[b])
            out.append((a, b, lower[lo:hi], first[a:b] - lo))
        return out

    @cached_property
    def by_rank(self) -> IntArray:
        """The ideals by exact work, then index: ``rank`` inverted."""
        exact = self.inst.cuts.exact_work
        return np.array(sorted(range(len(exact)), key=exact.__getitem__), dtype=np.int64)

    @cached_property
    def rank(self) -> IntArray:
        """Each ideal's place in :attr:`by_rank`: more work, higher rank."""
        rank = np.empty_like(self.by_rank)
        rank[self.by_rank] = np.arange(rank.size)
        return rank

    @cached_property
    def work_floats(self) -> FloatArray | None:
        """Each ideal's work as a float when every one is exact (then a difference of two is
        rounded once, as the table's entry), else ``None``."""
        cuts = self.inst.cuts
        floats = [ratio(x, cuts.unit) for x in cuts.exact_work]
        if all(float(f) * cuts.unit == x for f, x in zip(floats, cuts.exact_work, strict=True)):
            return np.array(floats)
        return None

    def best_starts(self, reached: Bools) -> IntArray:
        """For rows of reached ideals ``(r, K)``: the reached ideal inside each ideal with the
        most work (by rank; -1 where none is)."""
        best = np.where(reached, self.rank[None, :], -1)
        for a, b, lower, offsets in self.levels:
            inner = np.maximum.reduceat(best[:, lower], offsets, axis=1)
            np.maximum(best[:, a:b], inner, out=best[:, a:b])
        return best

    def work_from(self, start: IntArray) -> FloatArray:
        """``w(start[r, J], J)`` for rows of starts (indices, each inside its column's ideal;
        entries of no start are ignored)."""
        floats = self.work_floats
        if floats is not None:
            found: FloatArray = floats[None, :] - floats[start]
            return found
        exact, unit = self.inst.cuts.exact_work, self.inst.cuts.unit
        return np.array([[ratio(exact[j] - exact[i], unit) for j, i in enumerate(row)]
                         for row in start.tolist()])  # fmt: skip

    def computed(self, reached: Bools, capacity: FloatArray, beta: float) -> tuple[Bools, IntArray]:
        """After the compute step of nodes of ``capacity`` (rows): which ideals they can have
        done within ``beta``, and from which start (an index, -1 for none)."""
        best = self.best_starts(reached)
        some = best >= 0
        start = np.where(some, self.by_rank[np.maximum(best, 0)], 0)
        delay = self.work_from(start) / capacity[:, None]
        return some & (delay <= beta), np.where(some, start, -1)


def _sweep(
    lattice: Lattice, C: FloatArray, B: FloatArray, beta: float
) -> tuple[list[int], list[int]] | None:
    """A deployment whose every stage takes at most ``beta``, or ``None``."""
    inst = lattice.inst
    D, K = inst.activation_bits, inst.n_cuts
    reach = np.zeros((len(inst.node_ids), K), dtype=bool)
    reach[inst.source, 0] = True
    done = np.zeros_like(reach)
    for gen in inst.sweep:
        rows = reach[gen.rows]
        if not rows.any():
            continue
        done[gen.rows], _ = lattice.computed(rows, C[gen.rows], beta)
        if gen.first.size:
            sent = done[gen.tails] & (D[None, :] / B[gen.links, None] <= beta)
            reach[gen.heads] |= np.logical_or.reduceat(sent, gen.first, axis=0)
    if not done[inst.target, inst.last_cut]:
        return None
    return _read_back(lattice, reach, done, C, B, beta)


def _read_back(
    lattice: Lattice, reach: Bools, done: Bools, C: FloatArray, B: FloatArray, beta: float
) -> tuple[list[int], list[int]]:
    """The path and partition from the target back to the source (the rules of the module
    docstring), forming again the starts of the path's nodes alone."""
    inst = lattice.inst
    D = inst.activation_bits
    v, j = inst.target, inst.last_cut
    path, partition = [v], [j]
    while True:
        _, start = lattice.computed(reach[v][None, :], C[v : v + 1], beta)
        i = int(start[0, j])
        if v == inst.source and i == 0:
            break
        for e in inst.in_links[v].tolist():  # the earliest link offering (v, i)
            u = int(inst.link_src[e])
            if done[u, i] and D[i] / B[e] <= beta:
                break
        v, j = u, i
        path.append(v)
        partition.append(j)
    return path[::-1], partition[::-1]


def lattice_throughput(
    inst: CodesignInstance, C: FloatArray, B: FloatArray
) -> tuple[list[int], list[int]]:
    """The path and partition of a T*-optimal deployment under ``C`` and ``B`` (the module
    docstring): bisection over the floats' bits with a reachability sweep at each."""
    lattice = Lattice(inst)
    found = _sweep(lattice, C, B, np.inf)
    assert found is not None  # positive capacities: every deployment meets an infinite beta
    best = found
    high = _bits(stages(inst, *best).interval(C, B))
    low = -1  # no interval known to be out of reach
    while high - low > 1:
        middle = (low + high) // 2
        found = _sweep(lattice, C, B, float(np.int64(middle).view(np.float64)))
        if found is None:
            low = middle
        else:
            best = found
            high = _bits(stages(inst, *best).interval(C, B))
    return best


def _bits(x: float) -> int:
    """The bit pattern of a non-negative float, an integer that orders as the floats do."""
    return int(np.float64(x).view(np.int64))
