"""PSG: the exact minimum-cost co-design on acyclic networks (the co-design paper's Algorithm 1).

States ``(v, i)`` mean "the activation after block ``i`` has arrived at node ``v``". A
transition ``((v, i), (z, j))`` runs blocks ``i+1..j`` on ``v`` and sends ``D_j`` over
``(v, z)``, costing

    w = f_v(max(0, (S_j - S_i) / beta - C_v)) + g_(v,z)(max(0, D_j / beta - B_(v,z))).

On an acyclic network the cheapest state path from ``(s, 0)`` to the terminal is the optimum.

:func:`solve_psg` runs on one of two engines (``engine=``). The compiled engine
(:mod:`~inferplan.codesign.compiled`, numba) walks the nodes in order with monotone-deque
windows, ``O((|V| + |E|) N)`` for piecewise-linear costs. The numpy engine, in this module,
relaxes the states one topological generation at a time (no link joins two
nodes of a generation, so all their states are final together), splitting each transition into
its compute part ``A_v[j] = min_{i<=j} dist(v, i) + f_v(rho)`` (once per node, every node of
the generation in one vectorised step) and its link part (once per link and ``j``, all the
generation's out-links at once, folded into their heads with a segmented minimum):

- piecewise-linear costs (linear, tiered; caps included) with ``N + 1 > DENSE_WIDTH``: for each
  ``j`` the ``i`` whose requested compute falls in one linear piece form a window whose ends
  move right with ``j``; each window minimum is two lookups in a sparse table, ``O(K N log N)``
  per node for ``K`` pieces (a prefix minimum, ``O(N)``, for an uncapped linear piece);
- any other cost (modules, callables), and every cost when ``N`` is small: all ``(i, j)``
  pairs compared at once, ``O(N^2)`` per node.

In all, ``O(|V| N log N + |E| N)`` for linear costs on the numpy engine; the deque that drops
the ``log N`` needs sequential loops, which is what the compiled engine is for.
:func:`reference_psg` is the paper's Algorithm 1 written as plainly as the maths,
``O(|V| N + |E| N^2)`` scalar steps, for tests and benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from inferplan.codesign import compiled
from inferplan.codesign.compiled import Engine, compiled_engine
from inferplan.codesign.instance import CodesignInstance, Generation
from inferplan.codesign.plan import Plan, check_scale, infeasible, plan_from_path

__all__ = [
    "Relaxation",
    "backtrack",
    "psg_path",
    "range_min",
    "reference_psg",
    "relax_generations",
    "solve_psg",
    "sparse_table",
]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
# A compute step: (generation, labels of its nodes) -> (after-compute labels, argmin or None).
Stage = Callable[[Generation, FloatArray], tuple[FloatArray, IntArray | None]]


# Up to this many block counts (``N + 1``) the compute step compares all ``(i, j)`` pairs at
# once, which beats the windowed scan's bookkeeping in numpy; above it the windowed scan runs.
DENSE_WIDTH = 48


def sparse_table(rows: FloatArray) -> FloatArray:
    """Range-minimum table of each row: ``table[k, r, i] = min(rows[r, i : i + 2**k])``
    (``inf`` past the end)."""
    width = rows.shape[1]
    levels = max(1, int(width).bit_length())
    table = np.full((levels, *rows.shape), np.inf)
    table[0] = rows
    span = 1
    for k in range(1, levels):
        np.minimum(table[k - 1, :, : width - span], table[k - 1, :, span:],
                   out=table[k, :, : width - span])  # fmt: skip
        span *= 2
    return table


def range_min(table: FloatArray, lo: IntArray, hi: IntArray) -> FloatArray:
    """``min(rows[r, lo[r, j] .. hi[r, j]])`` for every ``(r, j)`` (inclusive; ``inf`` where
    ``lo > hi``), two lookups in ``table`` from :func:`sparse_table`."""
    length = hi - lo + 1
    empty = length <= 0
    level = np.frexp(np.maximum(length, 1))[1] - 1
    rows = np.arange(lo.shape[0])[:, None]
    lo_ok = np.where(empty, 0, lo)
    hi_ok = np.where(empty, 0, hi - (1 << level) + 1)
    out: FloatArray = np.minimum(table[level, rows, lo_ok], table[level, rows, hi_ok])
    out[empty] = np.inf
    return out


def _first_within(
    S: FloatArray,
    beta: float,
    C: FloatArray,
    bound: float | FloatArray,
    guess: IntArray,
    *,
    strict: bool = False,
) -> IntArray:
    """For each row and ``j``: the first ``i`` whose request ``x(i, j) = (S_j - S_i)/beta - C``
    is at most ``bound`` (below it when ``strict``), moved from ``guess`` a step at a time.

    ``searchsorted`` on a rearranged bound may land a rounding step off; a request exactly on a
    cap or a tier boundary must fall where the costs, which compute ``x`` as written, put it.
    ``x`` falls as ``i`` grows and ``x(j, j) = -C < 0 <= bound``, so the answer is at most
    ``j`` and the steps never reverse.
    """
    W = S.size
    j = np.arange(W)

    def within(i: IntArray) -> npt.NDArray[np.bool_]:
        x = (S[j] - S[np.clip(i, 0, W - 1)]) / beta - C
        return x < bound if strict else x <= bound

    first = guess
    while True:
        left = (first > 0) & within(first - 1)
        right = ~within(first)
        if not (left.any() or right.any()):
            return first
        first = first - left + right


def _compute_windows(
    inst: CodesignInstance, nodes: IntArray, dist: FloatArray, beta: float
) -> FloatArray:
    """``A_v[j] = min_{i<=j} dist[v, i] + f_v(rho)`` for nodes with piecewise-linear costs.

    For fixed ``j`` the requested compute ``rho = max(0, (S_j - S_i)/beta - C_v)`` falls as
    ``i`` grows, so the ``i`` that land in one linear piece of ``f_v`` form a window whose ends
    move right with ``j``. On the free piece the cost is ``dist[i]``; on piece ``k`` it is
    ``dist[i] - p_k S_i / beta`` plus a term in ``j`` alone. Each window minimum is two lookups
    in a sparse table of the row, so a node costs ``O(K N log N)`` vectorised steps for ``K``
    pieces, and all nodes of a generation go together.
    """
    S = inst.prefix_flops
    C = inst.capacity[nodes][:, None]
    j = np.arange(S.size)
    pieces = [inst.node_segments[v] for v in nodes]
    edge = S[None, :] - C * beta  # S_i >= edge  <=>  rho = 0
    free_from = np.searchsorted(S, edge.ravel(), side="left").reshape(edge.shape)
    free_from = _first_within(S, beta, C, 0.0, free_from)
    best = range_min(sparse_table(dist), free_from, np.broadcast_to(j, edge.shape))
    for k in range(max(len(p.starts) for p in pieces if p is not None)):
        start = np.array([p.starts[k] if k < len(p.starts) else np.inf for p in pieces])
        end = np.array(
            [(p.starts[k + 1] if k + 1 < len(p.starts) else p.cap) if k < len(p.starts) else 0.0
             for p in pieces]
        )[:, None]  # fmt: skip
        slope = np.array([p.slopes[k] if k < len(p.starts) else 0.0 for p in pieces])[:, None]
        value = np.array([p.values[k] if k < len(p.starts) else 0.0 for p in pieces])[:, None]
        # Piece k holds the i with start <= rho <= end, i.e. S_j - (C + end) beta <= S_i
        # <= S_j - (C + start) beta.
        # Both ends are searched on S, then settled on the request as the costs compute it.
        lo = (
            _first_within(S, beta, C, end, np.searchsorted(
                S, (edge - end * beta).ravel(), side="left").reshape(edge.shape))
            if np.isfinite(end).any()
            else np.zeros(edge.shape, dtype=np.int64)
        )  # fmt: skip
        if k == 0:  # start = 0: the free window's left end
            hi = _first_within(S, beta, C, 0.0, free_from, strict=True) - 1
        else:
            hi = np.searchsorted(S, (edge - start[:, None] * beta).ravel(), side="right")
            hi = _first_within(S, beta, C, start[:, None], hi.reshape(edge.shape), strict=True)
            hi -= 1
        shifted = dist - slope * S[None, :] / beta
        if lo.any():
            paid = range_min(sparse_table(shifted), lo, hi)
        else:  # an uncapped first piece: the window is a prefix
            prefix = np.minimum.accumulate(shifted, axis=1)
            paid = np.where(hi >= 0, np.take_along_axis(prefix, np.maximum(hi, 0), 1), np.inf)
        known = np.isfinite(start)[:, None]  # nodes with fewer pieces have none here
        offset = value - slope * np.where(known, start[:, None], 0.0) + slope * (S / beta - C)
        best = np.minimum(best, np.where(known, paid + offset, np.inf))
    return best


# The all-pairs step prices every node at once when the ``(V, N+1, N+1)`` table has at most
# this many entries (one vectorised call instead of one per generation), per generation above.
DENSE_TABLE_ENTRIES = 2_000_000


def _dense_costs(inst: CodesignInstance, nodes: IntArray, beta: float) -> FloatArray:
    """``f_v(max(0, (S_j - S_i) / beta - C_v))`` for each of ``nodes`` and ``(i, j)``
    (``inf`` for ``i > j``). Linear costs are priced in one vectorised step, others one node
    at a time."""
    rho = np.maximum(0.0, inst.work_or_zero / beta - inst.capacity[nodes][:, None, None])
    pricing = inst.node_pricing
    cost = pricing.price[nodes][:, None, None] * rho
    if pricing.capped.size or pricing.other.size:
        cost[rho > pricing.cap[nodes][:, None, None]] = np.inf
        for r in np.flatnonzero(np.isin(nodes, pricing.other)):
            cost[r] = inst.node_costs[int(nodes[r])](rho[r])
    cost += inst.forbidden
    return cost


def _take_min(total: FloatArray) -> tuple[FloatArray, IntArray]:
    """Minimum over axis 1 of ``(rows, i, j)`` and the smallest ``i`` attaining it."""
    return total.min(axis=1), total.argmin(axis=1)


def _compute_mixed(
    inst: CodesignInstance, nodes: IntArray, dist: FloatArray, beta: float
) -> FloatArray:
    """``A_v`` for every node of ``nodes`` (one generation) when ``N + 1 > DENSE_WIDTH``: the
    windowed scan for piecewise-linear costs, all pairs for the others."""
    fast = np.array([inst.node_segments[v] is not None for v in nodes])
    if fast.all():
        return _compute_windows(inst, nodes, dist, beta)
    out = np.empty_like(dist)
    if fast.any():
        out[fast] = _compute_windows(inst, nodes[fast], dist[fast], beta)
    slow = ~fast
    out[slow] = _take_min(dist[slow][:, :, None] + _dense_costs(inst, nodes[slow], beta))[0]
    return out


def _compute_stage(inst: CodesignInstance, beta: float) -> Stage:
    """The compute step of PSG for one generation: ``A_v`` and, on the all-pairs path, the
    ``i`` attaining it. Small instances price every node's all-pairs costs up front."""
    V, W = len(inst.node_ids), inst.n_blocks + 1
    if W > DENSE_WIDTH:
        return lambda gen, dist: (_compute_mixed(inst, gen.nodes, dist, beta), None)
    if V * W * W <= DENSE_TABLE_ENTRIES:
        table = _dense_costs(inst, np.arange(V), beta)
        return lambda gen, dist: _take_min(dist[:, :, None] + table[gen.rows])
    return lambda gen, dist: _take_min(dist[:, :, None] + _dense_costs(inst, gen.nodes, beta))


def _link_costs(inst: CodesignInstance, beta: float) -> FloatArray:
    """``g_e(max(0, D_j / beta - B_e))`` for each link (rows, in the order of
    :attr:`~CodesignInstance.sweep_links`) and each ``j`` (columns)."""
    links = inst.sweep_links
    sigma = np.maximum(0.0, inst.activation_bits[None, :] / beta - inst.bandwidth[links, None])
    pricing = inst.link_pricing
    cost = pricing.price[links, None] * sigma
    if pricing.capped.size:
        cap = pricing.cap[links, None]
        cost[np.broadcast_to(sigma > cap, cost.shape)] = np.inf
    for e in pricing.other:
        row = inst.sweep_position[e]
        cost[row] = inst.link_costs[int(e)](sigma[row])
    return cost


@dataclass(frozen=True)
class Relaxation:
    """The labels of a relaxed state graph, ``(V, N + 1)`` unless said otherwise.

    ``label[v, i]``: best label of the state ``(v, i)``; ``stage_min[v, j]``: after ``v``'s
    compute step, having done ``j`` blocks; ``sent[k, j]`` (``(E, N + 1)``, links in the
    order of :attr:`~CodesignInstance.sweep_links`): what that link offers its head with ``j``
    blocks done; ``choice[v, j]``: the ``i`` attaining
    ``stage_min[v, j]``, ``-1`` where the step did not record it.
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
    each node's compute step (and the ``i`` attaining them, or ``None``). ``link_part[k, j]``
    is the link part of each transition (links in the order of ``inst.sweep_links``), joined
    to the stage label with ``combine`` (``np.add`` for costs, ``np.maximum`` for
    bottlenecks) and written back, so ``link_part`` becomes :attr:`Relaxation.sent`; each
    head keeps the minimum over its in-links.
    """
    label = start
    stage_min = np.full_like(start, np.inf)
    choice = np.full(start.shape, -1, dtype=np.int64)
    sent = link_part
    for gen in inst.sweep:
        values, chosen = stage(gen, label[gen.rows])
        stage_min[gen.rows] = values
        if chosen is not None:
            choice[gen.rows] = chosen
        if gen.first.size:
            offered = sent[gen.span]
            combine(stage_min[gen.tails], offered, out=offered)
            label[gen.heads] = np.minimum(
                label[gen.heads], np.minimum.reduceat(offered, gen.first, axis=0)
            )
    return Relaxation(label, stage_min, sent, choice)


def _best_choice(inst: CodesignInstance, v: int, dist: FloatArray, j: int, beta: float) -> int:
    """The ``i`` that attains ``A_v[j]`` (the smallest such ``i`` on ties)."""
    S = inst.prefix_flops
    rho = np.maximum(0.0, (S[j] - S[: j + 1]) / beta - inst.capacity[v])
    return int(np.argmin(dist[: j + 1] + inst.node_costs[v](rho)))


def backtrack(
    inst: CodesignInstance, relaxed: Relaxation, choose: Callable[[int, int], int]
) -> tuple[list[int], list[int], list[int]]:
    """Read the path, partition and links used off the relaxed labels, from the terminal back
    to the source.

    At each node the recorded choice (or ``choose(v, j)``, the block count ``v`` received)
    and among its in-links the one offering the best label; ties go to the earliest link in
    file order.
    """
    path, partition, links = [inst.target], [inst.n_blocks], []
    v, j = inst.target, inst.n_blocks
    while v != inst.source:
        i = int(relaxed.choice[v, j])
        i = i if i >= 0 else choose(v, j)
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
    :mod:`~inferplan.codesign.compiled` (numba), ``"numpy"`` the vectorised relaxation below,
    ``"auto"`` the kernels when numba is installed. Both are exact (up to the rounding bound of
    the numpy windows, see ``docs/codesign-scale.md``); the kernels are faster at every size
    we measured. Nodes whose costs have no
    piecewise-linear form are priced into tables for the kernels; past
    :data:`~inferplan.codesign.compiled.TABLE_ENTRIES` entries the vectorised relaxation runs.

    Raises
    ------
    Infeasible
        If capacity caps leave no plan that meets ``beta``.
    NetworkHasCycle
        If the instance was compiled with a cycle on the way (``require_acyclic=False``).
    """
    inst.check_acyclic("PSG")
    check_scale(inst, beta)
    if compiled_engine(engine, inst) and compiled.fits(inst):
        cost, path, partition, links = compiled.psg_kernel(inst, beta)
    else:
        cost, path, partition, links = _vectorised_psg(inst, beta)
    if not math.isfinite(cost):
        raise infeasible(beta)
    return cost, path, partition, links


def _vectorised_psg(
    inst: CodesignInstance, beta: float
) -> tuple[float, list[int], list[int], list[int]]:
    """:func:`psg_path` by the vectorised relaxation (``inf`` and no path when infeasible)."""
    start = np.full((len(inst.node_ids), inst.n_blocks + 1), np.inf)
    start[inst.source, 0] = 0.0
    relaxed = relax_generations(
        inst, start, _compute_stage(inst, beta), _link_costs(inst, beta), np.add
    )
    cost = float(relaxed.stage_min[inst.target, -1])
    if not math.isfinite(cost):
        return cost, [], [], []
    path, partition, links = backtrack(
        inst, relaxed, lambda v, j: _best_choice(inst, v, relaxed.label[v], j, beta)
    )
    return cost, path, partition, links


def solve_psg(inst: CodesignInstance, beta: float, *, engine: Engine = "auto") -> Plan:
    """The exact minimum-cost plan for output interval ``beta`` on an acyclic instance.

    Relaxes the state graph node by node in compiled loops (``engine="compiled"``, or
    ``"auto"`` with numba installed) or one topological generation at a time in numpy
    (``"numpy"``); see :func:`psg_path` and the module docstrings for the cost of each step.

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
    N, S, D = inst.n_blocks, inst.prefix_flops, inst.activation_bits
    V = len(inst.node_ids)
    dist = [[math.inf] * (N + 1) for _ in range(V)]
    parent: dict[tuple[int, int], tuple[int, int]] = {}
    dist[inst.source][0] = 0.0
    terminal, terminal_parent = math.inf, (-1, -1)

    def compute_cost(v: int, i: int, j: int) -> float:
        rho = max(0.0, (S[j] - S[i]) / beta - inst.capacity[v])
        return float(inst.node_costs[v](np.array([rho]))[0])

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
                for j in range(i, N + 1):
                    sigma = max(0.0, D[j] / beta - inst.bandwidth[e])
                    w = compute_cost(v, i, j) + float(inst.link_costs[e](np.array([sigma]))[0])
                    if dist[v][i] + w < dist[z][j]:
                        dist[z][j] = dist[v][i] + w
                        parent[(z, j)] = (v, i)
    if math.isinf(terminal):
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
