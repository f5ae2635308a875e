"""PSG's compute step on the ideals of a layer graph without tables of pairs.

Cut at ideals, PSG's compute step at node ``v`` is

    A_v[J] = min over I ⊆ J of label[v, I] + f_v(max(0, w(I, J) / beta - C_v)) + m_v(I, J)

with ``m_v`` the memory term (:mod:`~inferplan.codesign.memory`). The all-pairs step
(:mod:`~inferplan.codesign.engine.psg`) prices every ``(I, J)`` in a ``K x K`` table, which a
machine holds up to :data:`~inferplan.profiles.ideals.MAX_STATE_CUTS` ideals. This step visits
only the comparable pairs ``I ⊆ J``, with no table: for each ``J`` a walk down the Hasse
diagram's lower covers reaches every ideal inside ``J`` once (``O(width)`` per ideal reached),
and an ``I`` whose label is no better than the best so far is not priced (every term is
non-negative). Its cost is the number of comparable pairs: ``(L + 1)(L + 2)(L + 3)(L + 4) /
24``-ish for the two-stack model of ``(L + 1)(L + 2) / 2`` ideals, about ``K^2 / 6``; at most
``K^2 / 2`` (a chain). The link step is the all-pairs engine's, ``O(K)`` per link.

Exact as the table is: the work between two ideals is the sum of the differences of two
float limbs of each ideal's exact work (:func:`~inferplan.arrays.exact_limbs`), rounded once
as the table's entry; the memory need likewise (parameter bytes rounded once, plus the
largest working set of a layer outside ``I``); the costs are added in the table's order; ties
go to the smallest ``I``, as the table's ``argmin``. So the labels, costs and plans equal the
all-pairs engine's for linear and capped-linear costs bit for bit (piecewise costs are priced
from their pieces, as the compiled engine does).

What it takes (:func:`subset_refusal` names what it does not): node costs with a
piecewise-linear form (linear, capped, tiered), memory costs that are linear (or none: a
limit), no extra terms besides memory, the FLOPs-over-capacity node time, and works below
``2**105`` units. Needs numba (the ``fast`` extra).
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray, IntArray, exact_limbs
from inferplan.codesign.engine.compiled import Engine
from inferplan.codesign.instance import CodesignInstance, Generation
from inferplan.errors import InvalidArgument
from inferplan.profiles import ideals
from inferplan.profiles.memory import graph_layer_terms, graph_most_need

__all__ = [
    "AUTO_PAIRS",
    "SubsetStep",
    "subset_engine",
    "subset_fits",
    "subset_refusal",
    "subset_step_of",
]


# Below this many priced pairs ``V K^2`` the all-pairs step takes no more than loading numba
# (a few tenths of a second): ``"auto"`` runs it there.
AUTO_PAIRS = 20_000_000


def subset_engine(engine: Engine, inst: CodesignInstance) -> bool:
    """Whether PSG's compute step on ``inst`` is the subset step: cuts at the ideals of a
    layer graph that are no chain, ``engine`` not ``"numpy"``, and either more ideals than the
    all-pairs tables hold (:data:`~inferplan.profiles.ideals.MAX_STATE_CUTS`), or ``engine``
    ``"compiled"``, or at least :data:`AUTO_PAIRS` pairs of nodes and ideals; the all-pairs
    step otherwise.

    Raises
    ------
    InvalidArgument
        Past the all-pairs tables' ideals, if the subset step cannot take ``inst`` either
        (:func:`subset_refusal`) or it has more than :data:`MAX_SUBSET_CUTS` ideals.
    """
    K = inst.n_cuts
    if engine == "numpy" or inst.cuts.is_chain:
        return False
    large = K > ideals.MAX_STATE_CUTS
    if not large and engine == "auto" and len(inst.node_ids) * K * K < AUTO_PAIRS:
        return False
    why = subset_refusal(inst)
    if why is None and K > ideals.MAX_SUBSET_CUTS:
        why = f"it has more than {ideals.MAX_SUBSET_CUTS:,} ideals"
    if why is not None and large:
        raise InvalidArgument(
            f"PSG on {K:,} ideals (more than the {ideals.MAX_STATE_CUTS:,} its tables of pairs "
            f"hold) runs without the tables, which this instance does not allow: {why}; cut the "
            "model between its blocks (chain cuts) or lower max_ideals",
            field="max_ideals",
        )
    return why is None


def subset_refusal(inst: CodesignInstance) -> str | None:
    """Why the subset step cannot take ``inst`` (``None`` when it can)."""
    if inst.cuts.is_chain:
        return "its cuts are a chain"
    if not inst.shared_work or not inst.node_time.additive:
        return "its node time model is not the FLOPs between cuts"
    if inst.extra_terms is not None:
        return "it has extra transition terms besides memory"
    if bool(inst.node_pieces.table.any()):
        return "a node's cost has no piecewise-linear form (modules or a function)"
    if exact_limbs(inst.cuts.exact_work, inst.cuts.unit) is None:
        return "a work is too wide for two float limbs"
    limited = subset_step_of(inst).limited
    if (
        limited.size
        and inst.memory_pricing.other.size
        and bool(np.isin(limited, inst.memory_pricing.other).any())
    ):
        return "a node's memory cost is not linear"
    try:
        import numba  # noqa: F401
    except ImportError:
        return "it needs numba (pip install 'inferplan[fast]')"
    return None


@dataclass(frozen=True, eq=False)
class SubsetStep:
    """PSG's compute step of an instance cut at ideals, node by node (the module docstring)."""

    inst: CodesignInstance

    @cached_property
    def work(self) -> tuple[FloatArray, FloatArray]:
        """The two float limbs of each ideal's work."""
        limbs = exact_limbs(self.inst.cuts.exact_work, self.inst.cuts.unit)
        assert limbs is not None  # subset_refusal
        return limbs

    @cached_property
    def down(self) -> npt.NDArray[np.uint64]:
        """The ideals inside each ideal as bits, ``K x K / 8`` bytes."""
        from inferplan.codesign.engine.subset_kernel import down_sets

        K = self.inst.n_cuts
        lower, first = self.inst.cuts.lower_covers
        down = np.zeros((K, -(-K // 64)), dtype=np.uint64)
        down_sets(lower, first, down)
        return down

    @cached_property
    def limited(self) -> IntArray:
        """The nodes whose memory may fall short of a transition's need."""
        inst = self.inst
        if not np.isfinite(inst.memory).any():
            return np.zeros(0, dtype=np.int64)
        return np.flatnonzero(inst.memory < graph_most_need(inst.profile, inst.cuts))

    @cached_property
    def memory_arrays(
        self,
    ) -> tuple[FloatArray, FloatArray, FloatArray, npt.NDArray[np.uint64], FloatArray]:
        """What the memory need is formed from: the two limbs of each ideal's parameter bytes,
        each ideal's forwarded bytes, its layers as bits in decreasing order of their working
        sets, and those working sets (empty when no node is limited)."""
        inst = self.inst
        if not self.limited.size:
            empty = np.zeros(0)
            return empty, empty, empty, np.zeros((1, 1), dtype=np.uint64), empty
        cuts = inst.cuts
        exact, unit, working = graph_layer_terms(inst.profile, cuts, range(cuts.n_cuts))
        limbs = exact_limbs(exact, unit)
        assert limbs is not None  # parameter bytes are integers below 2**105 in practice
        order = np.argsort(-np.asarray(working), kind="stable")
        members = cuts.members
        assert members is not None
        words = _packed(members[:, order])
        return (*limbs, cuts.bits / 8.0, words, np.asarray(working)[order])

    def fits(self, limit: FloatArray) -> bool:
        """Whether some deployment's every node needs at most ``limit`` bytes (per node):
        :func:`~inferplan.codesign.memory.fits_somewhere` by this step (no compute or link
        cost, no memory to buy)."""
        from inferplan.codesign.engine.subset_kernel import subset_step

        inst = self.inst
        free = _free_pieces()
        p_high, p_low, forward, words, working = self.memory_arrays
        label = np.full((len(inst.node_ids), inst.n_cuts), np.inf)
        label[inst.source, 0] = 0.0
        out = np.empty(inst.n_cuts)
        arg = np.empty(inst.n_cuts, dtype=np.int64)
        reached = np.empty(self.down.shape[1], dtype=np.uint64)
        for v in range(len(inst.node_ids)):  # topological order
            if not np.isfinite(label[v]).any():
                continue
            memory = float(limit[v]) if bool(np.isin(v, self.limited)) else math.inf
            subset_step(label[v], self.down, *self.work, 1.0, 0.0, 0, 1, *free, math.inf,
                        memory, 0.0, 0.0, p_high, p_low, forward, words, working, out, arg,
                        reached)  # fmt: skip
            if v == inst.target:
                return bool(out[-1] < math.inf)
            for e in inst.out_links[v].tolist():
                z = int(inst.link_dst[e])
                np.minimum(label[z], out, out=label[z])
        return False

    def stage(self, beta: float) -> Callable[[Generation, FloatArray], tuple[FloatArray, IntArray]]:
        """The compute step for output interval ``beta``: for a generation and its nodes'
        labels, the labels after the step and the ``I`` attaining each (a
        :data:`~inferplan.codesign.engine.psg.Stage`)."""
        return lambda gen, dist: self.step(gen, dist, beta)

    def step(self, gen: Generation, dist: FloatArray, beta: float) -> tuple[FloatArray, IntArray]:
        """:meth:`stage` for one generation."""
        from inferplan.codesign.engine.subset_kernel import subset_step

        inst = self.inst
        down = self.down
        high, low = self.work
        pieces = inst.node_pieces
        p_high, p_low, forward, words, working = self.memory_arrays
        pricing = inst.memory_pricing
        rows, K = dist.shape
        out = np.empty((rows, K))
        arg = np.empty((rows, K), dtype=np.int64)
        reached = np.empty(down.shape[1], dtype=np.uint64)
        nodes = np.arange(len(inst.node_ids))[gen.rows]
        for r, v in enumerate(nodes.tolist()):
            limited = bool(np.isin(v, self.limited))
            memory = float(inst.memory[v]) if limited else math.inf
            subset_step(np.ascontiguousarray(dist[r]), down, high, low, beta,
                        float(inst.capacity[v]), int(pieces.ptr[v]), int(pieces.ptr[v + 1]),
                        pieces.starts, pieces.slopes, pieces.values, float(pieces.cap[v]),
                        memory, float(pricing.price[v]), float(pricing.cap[v]), p_high, p_low,
                        forward, words, working, out[r], arg[r], reached)  # fmt: skip
        return out, arg


_STEPS: weakref.WeakKeyDictionary[CodesignInstance, SubsetStep] = weakref.WeakKeyDictionary()


def subset_step_of(inst: CodesignInstance) -> SubsetStep:
    """The subset step of ``inst`` (its arrays formed once per instance)."""
    if inst not in _STEPS:
        _STEPS[inst] = SubsetStep(inst)
    return _STEPS[inst]


def _free_pieces() -> tuple[FloatArray, FloatArray, FloatArray]:
    """One piece of cost 0: a node that pays nothing for compute."""
    return np.zeros(1), np.zeros(1), np.zeros(1)


def subset_fits(inst: CodesignInstance, limit: FloatArray) -> bool:
    """:meth:`SubsetStep.fits` of ``inst``."""
    return subset_step_of(inst).fits(np.asarray(limit, dtype=np.float64))


def _packed(members: npt.NDArray[np.bool_]) -> npt.NDArray[np.uint64]:
    """Each row of ``members`` as 64-bit words (bit ``b`` of word ``q``: column ``64 q + b``)."""
    K, n = members.shape
    padded = np.zeros((K, max(1, -(-n // 64)) * 64), dtype=bool)
    padded[:, :n] = members
    return np.ascontiguousarray(np.packbits(padded, axis=1, bitorder="little").view(np.uint64))
