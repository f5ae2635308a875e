"""PSG: the exact minimum-cost co-design on acyclic networks (the co-design paper's Algorithm 1).

States ``(v, i)`` mean "the activation after block ``i`` has arrived at node ``v``". A
transition ``((v, i), (z, j))`` runs blocks ``i+1..j`` on ``v`` and sends ``D_j`` over
``(v, z)``, costing

    w = f_v(max(0, w(i, j) / beta - C_v)) + g_(v,z)(max(0, D_j / beta - B_(v,z)))

with ``w(i, j)`` the work of blocks ``i+1..j``
(:attr:`~inferplan.codesign.instance.CodesignInstance.work_between`). On an acyclic network
the cheapest state path from ``(s, 0)`` to the terminal is the optimum.

:func:`solve_psg` runs on one of two engines (``engine=``). The compiled engine
(:mod:`~inferplan.codesign.engine.compiled`, numba, the ``fast`` extra) walks the nodes in order
with monotone-deque windows, ``O((|V| + |E|) N)`` for piecewise-linear costs: the one optimised
engine. The numpy engine, in this module, is the plain exact step for installs without numba:
it relaxes the states one topological generation at a time (no link joins two nodes of a
generation, so all their states are final together), splitting each transition into its
compute part ``A_v[j] = min_{i<=j} dist(v, i) + f_v(rho)``, all ``(i, j)`` pairs compared at
once (``O(N^2)`` per node, every node of the generation in one vectorised step), and its link
part (once per link and ``j``, all the generation's out-links at once, folded into their heads
with a segmented minimum): ``O(|V| N^2 + |E| N)`` in all, for every kind of cost.
:func:`reference_psg` is the paper's Algorithm 1 written as plainly as the maths,
``O(|V| N + |E| N^2)`` scalar steps, for tests and benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.engine import compiled
from inferplan.codesign.engine.compiled import Engine, compiled_engine
from inferplan.codesign.engine.subsets import subset_engine, subset_fits, subset_step_of
from inferplan.codesign.instance import (
    CodesignInstance,
    Generation,
    link_cost_table,
    node_cost_table,
)
from inferplan.codesign.memory import fits_somewhere, memory_infeasible, most_memory
from inferplan.codesign.plan import Plan, check_scale, infeasible, plan_from_path

__all__ = [
    "Relaxation",
    "backtrack",
    "by_chunks",
    "link_cost_table",
    "node_cost_table",
    "psg_path",
    "reference_psg",
    "relax_generations",
    "solve_psg",
    "take_min",
]

# A compute step: (generation, labels of its nodes) -> (after-compute labels, the i attaining).
Stage = Callable[[Generation, FloatArray], tuple[FloatArray, IntArray]]

# The all-pairs step holds at most this many ``(i, j)`` entries at once: a generation's nodes are
# relaxed in chunks of ``CHUNK_ENTRIES // (N + 1)**2`` nodes (at least one).
CHUNK_ENTRIES = 2_000_000


def by_chunks(
    rows: int, width: int, step: Callable[[slice], tuple[FloatArray, IntArray]]
) -> tuple[FloatArray, IntArray]:
    """``step`` on consecutive slices of ``rows`` rows of ``width * width`` pairs each, at most
    :data:`CHUNK_ENTRIES` pairs a slice, and its ``(rows, width)`` results put together."""
    size = max(1, CHUNK_ENTRIES // (width * width))
    if rows <= size:
        return step(slice(0, rows))
    values = np.empty((rows, width))
    chosen = np.empty((rows, width), dtype=np.int64)
    for first in range(0, rows, size):
        part = slice(first, first + size)
        values[part], chosen[part] = step(part)
    return values, chosen


def take_min(total: FloatArray) -> tuple[FloatArray, IntArray]:
    """Minimum over axis 1 of ``(rows, i, j)`` and the smallest ``i`` attaining it."""
    return total.min(axis=1), total.argmin(axis=1)


def _compute_stage(inst: CodesignInstance, beta: float) -> Stage:
    """The compute step of PSG for one generation: ``A_v[j] = min_{i<=j} dist(v, i) +
    f_v(rho)`` comparing every ``(i, j)`` pair, and the smallest ``i`` attaining it. When every
    node's pairs fit in one chunk they are priced up front, in one call."""
    V, W = len(inst.node_ids), inst.n_cuts
    if V * W * W <= CHUNK_ENTRIES:
        table = node_cost_table(inst, np.arange(V), beta)
        return lambda gen, dist: take_min(dist[:, :, None] + table[gen.rows])

    def stage(gen: Generation, dist: FloatArray) -> tuple[FloatArray, IntArray]:
        rows, width = dist.shape
        return by_chunks(rows, width, lambda part: take_min(
            dist[part, :, None] + node_cost_table(inst, gen.nodes[part], beta)))  # fmt: skip

    return stage


@dataclass(frozen=True)
class Relaxation:
    """The labels of a relaxed state graph, ``(V, N + 1)`` unless said otherwise.

    ``label[v, i]``: best label of the state ``(v, i)``; ``stage_min[v, j]``: after ``v``'s
    compute step, having done ``j`` blocks; ``sent[k, j]`` (``(E, N + 1)``, links in the
    order of :attr:`~CodesignInstance.sweep_links`): what that link offers its head with ``j``
    blocks done; ``choice[v, j]``: the ``i`` attaining ``stage_min[v, j]`` (the smallest on
    ties).
    """

    label: FloatArray
    stage_min: FloatArray
    sent: FloatArray
    choice: IntArray


def relax_generations(
    inst: CodesignInstance,
    start: FloatArray,
    stage: Stage,
    link_part: FloatArray,
    combine: np.ufunc,
) -> Relaxation:
    """Relax the state graph one topological generation at a time.

    ``start`` holds the labels of the states ``(v, i)`` before relaxation (the source's
    alone finite). For each generation, ``stage(generation, labels)`` gives the labels after
    each node's compute step and the ``i`` attaining them. ``link_part[k, j]``
    is the link part of each transition (links in the order of ``inst.sweep_links``), joined
    to the stage label with ``combine`` (``np.add`` for costs, ``np.maximum`` for
    bottlenecks) and written back, so ``link_part`` becomes :attr:`Relaxation.sent`; each
    head keeps the minimum over its in-links.
    """
    label = start
    stage_min = np.full_like(start, np.inf)
    choice = np.zeros(start.shape, dtype=np.int64)
    sent = link_part
    for gen in inst.sweep:
        stage_min[gen.rows], choice[gen.rows] = stage(gen, label[gen.rows])
        if gen.first.size:
            offered = sent[gen.span]
            combine(stage_min[gen.tails], offered, out=offered)
            label[gen.heads] = np.minimum(
                label[gen.heads], np.minimum.reduceat(offered, gen.first, axis=0)
            )
    return Relaxation(label, stage_min, sent, choice)


def backtrack(
    inst: CodesignInstance, relaxed: Relaxation
) -> tuple[list[int], list[int], list[int]]:
    """Read the path, partition and links used off the relaxed labels, from the terminal back
    to the source.

    At each node the recorded choice (the block count ``v`` received) and among its in-links
    the one offering the best label; ties go to the earliest link in file order.
    """
    path, partition, links = [inst.target], [inst.last_cut], []
    v, j = inst.target, inst.last_cut
    while v != inst.source:
        i = int(relaxed.choice[v, j])
        ins = inst.in_links[v]
        e = int(ins[np.argmin(relaxed.sent[inst.sweep_position[ins], i])])
        v, j = int(inst.link_src[e]), i
        path.append(v)
        partition.append(j)
        links.append(e)
    return path[::-1], partition[::-1], links[::-1]


def psg_path(
    inst: CodesignInstance, beta: float, *, engine: Engine = "auto"
) -> tuple[float, list[int], list[int], list[int]]:
    """PSG without building the :class:`Plan`: the optimal cost (before rounding purchases to
    what the cost functions sell, which they already price), and the path, partition and
    links (node and link indices). :func:`solve_psg` is this plus the plan.

    ``engine``: ``"compiled"`` runs the linear-time kernels of
    :mod:`~inferplan.codesign.engine.compiled` (numba), ``"numpy"`` the plain all-pairs relaxation
    of this module, ``"auto"`` the kernels when numba is installed. Both are exact; the kernels
    are faster at every size we measured. Nodes whose costs have no piecewise-linear form are
    priced into tables for the kernels; past
    :data:`~inferplan.codesign.engine.compiled.TABLE_ENTRIES` entries the numpy relaxation runs.

    Raises
    ------
    Infeasible
        If capacity caps leave no plan that meets ``beta``.
    NetworkHasCycle
        If the instance was compiled with a cycle on the way (``require_acyclic=False``).
    """
    inst.check_acyclic("PSG")
    check_scale(inst, beta)
    subsets = subset_engine(engine, inst)
    if subsets:
        cost, path, partition, links = _vectorised_psg(inst, beta, subset_step_of(inst).stage)
    elif compiled_engine(engine, inst) and compiled.fits(inst):
        cost, path, partition, links = compiled.psg_kernel(inst, beta)
    else:
        cost, path, partition, links = _vectorised_psg(inst, beta)
    if not math.isfinite(cost):
        check_scale(inst, beta, cost)
        if subsets:
            if subset_step_of(inst).limited.size and not subset_fits(inst, most_memory(inst)):
                raise memory_infeasible(inst, most_memory(inst), beta)
        elif not inst.terms.empty and not fits_somewhere(inst, most_memory(inst)):
            raise memory_infeasible(inst, most_memory(inst), beta)
        raise infeasible(beta)
    return cost, path, partition, links


def _vectorised_psg(
    inst: CodesignInstance,
    beta: float,
    stage: Callable[[float], Stage] | None = None,
) -> tuple[float, list[int], list[int], list[int]]:
    """:func:`psg_path` by the vectorised relaxation (``inf`` and no path when infeasible),
    its compute step ``stage(beta)`` (by default the all-pairs step)."""
    start = np.full((len(inst.node_ids), inst.n_cuts), np.inf)
    start[inst.source, 0] = 0.0
    relaxed = relax_generations(
        inst,
        start,
        _compute_stage(inst, beta) if stage is None else stage(beta),
        link_cost_table(inst, inst.sweep_links, beta),
        np.add,
    )
    cost = float(relaxed.stage_min[inst.target, -1])
    if not math.isfinite(cost):
        return cost, [], [], []
    path, partition, links = backtrack(inst, relaxed)
    return cost, path, partition, links


def solve_psg(inst: CodesignInstance, beta: float, *, engine: Engine = "auto") -> Plan:
    """The exact minimum-cost plan for output interval ``beta`` on an acyclic instance.

    Relaxes the state graph node by node in compiled loops (``engine="compiled"``, or
    ``"auto"`` with numba installed) or one topological generation at a time in numpy, all
    ``(i, j)`` pairs at once (``"numpy"``); see :func:`psg_path` and the module docstrings.

    Raises
    ------
    Infeasible
        If capacity caps leave no plan that meets ``beta``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> plan = solve_psg(inst, 0.5 * throughput_optimal(inst).interval)
    >>> plan.feasible and plan.cost > 0
    True
    """
    _, path, partition, links = psg_path(inst, beta, engine=engine)
    return plan_from_path(inst, "psg", beta, path, partition, links, status="optimal")


def reference_psg(inst: CodesignInstance, beta: float) -> Plan:
    """Algorithm 1 of the co-design paper as written: relax every transition of the state graph
    in topological order, ``O(|V| N + |E| N^2)`` scalar steps. For tests and benchmarks."""
    inst.check_acyclic("Algorithm 1")
    check_scale(inst, beta)
    N, D = inst.last_cut, inst.activation_bits
    V = len(inst.node_ids)
    dist = [[math.inf] * (N + 1) for _ in range(V)]
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    dist[inst.source][0] = 0.0
    terminal, terminal_parent = math.inf, (-1, -1)

    # the extra terms (memory, for instance), one node at a time
    terms = None if inst.terms.empty else [inst.terms.node(np.array([v]))[0] for v in range(V)]

    def compute_cost(v: int, i: int, j: int) -> float:
        rho = max(0.0, inst.work(i, j, v) / beta - inst.capacity[v])
        extra = 0.0 if terms is None else float(terms[v][i, j])
        return float(inst.node_costs[v](np.array([rho]))[0]) + extra

    for v in range(V):
        for i in range(N + 1):
            if math.isinf(dist[v][i]):
                continue
            if v == inst.target:  # the virtual link to the terminal: free, infinite bandwidth
                total = dist[v][i] + compute_cost(v, i, N)
                if total < terminal:
                    terminal, terminal_parent = total, (v, i)
                continue
            for e in inst.out_links[v]:
                z = int(inst.link_dst[e])
                for j in range(i, N + 1):  # a cut inside another comes first
                    if math.isinf(inst.work(i, j, v)):
                        continue
                    sigma = max(0.0, D[j] / beta - inst.bandwidth[e])
                    w = compute_cost(v, i, j) + float(inst.link_costs[e](np.array([sigma]))[0])
                    if dist[v][i] + w < dist[z][j]:
                        dist[z][j] = dist[v][i] + w
                        parent[(z, j)] = (v, i)
    if math.isinf(terminal):
        check_scale(inst, beta, terminal)
        if not inst.terms.empty and not fits_somewhere(inst, most_memory(inst)):
            raise memory_infeasible(inst, most_memory(inst), beta)
        raise infeasible(beta)
    path, partition = [inst.target], [N]
    state = terminal_parent
    while state[0] != inst.source:
        prev = parent[state]
        path.append(prev[0])
        partition.append(state[1])
        state = prev
    return plan_from_path(
        inst, "psg-reference", beta, path[::-1], partition[::-1], status="optimal"
    )
