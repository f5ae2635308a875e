"""PSG: the exact minimum-cost co-design on acyclic networks (the co-design paper's Algorithm 1).

States ``(v, i)`` mean "the activation after block ``i`` has arrived at node ``v``". A
transition ``((v, i), (z, j))`` runs blocks ``i+1..j`` on ``v`` and sends ``D_j`` over
``(v, z)``, costing

    w = f_v(max(0, (S_j - S_i) / beta - C_v)) + g_(v,z)(max(0, D_j / beta - B_(v,z))).

On an acyclic network the cheapest state path from ``(s, 0)`` to the terminal is the optimum.

:func:`solve_psg` relaxes the states node by node, splitting each transition into its compute
part ``A_v[j] = min_{i<=j} dist(v, i) + f_v(rho)`` (once per node) and its link part (once per
link, ``O(N)``). For linear costs ``A_v`` takes ``O(N log N)`` with the hinge split below;
for any other cost function it takes an ``O(N^2)`` vectorised scan. :func:`reference_psg` is the
paper's algorithm written as plainly as the maths, for tests and benchmarks.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

from inferplan.codesign.costs import CapacityCost
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import Plan, build_plan, stage_increments
from inferplan.errors import Infeasible

__all__ = ["backtrack", "reference_psg", "solve_psg"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _range_min(values: FloatArray, lo: IntArray, hi: IntArray) -> FloatArray:
    """``min(values[lo[q]..hi[q]])`` for each query (inclusive; ``inf`` where ``lo > hi``).

    A sparse table: level ``k`` holds minima of windows of length ``2**k``.
    """
    n = values.size
    table = [values]
    width = 1
    while 2 * width <= n:
        prev = table[-1]
        table.append(np.minimum(prev[:-width], prev[width:]))
        width *= 2
    length = hi - lo + 1
    empty = length <= 0
    length = np.where(empty, 1, length)
    level = np.floor(np.log2(length)).astype(np.int64)
    out = np.full(lo.shape, np.inf)
    lo_ok = np.where(empty, 0, lo)
    for k in np.unique(level):
        sel = level == k
        row = table[int(k)]
        out[sel] = np.minimum(row[lo_ok[sel]], row[hi[sel] - (1 << int(k)) + 1])
    out[empty] = np.inf
    return out


def _compute_step_linear(
    dist: FloatArray, S: FloatArray, beta: float, capacity: float, price: float, cap: float
) -> FloatArray:
    """``A[j] = min_{i<=j} dist[i] + price * max(0, (S_j - S_i)/beta - capacity)`` for all ``j``.

    For each ``j`` the hinge is zero for ``i >= k(j)`` (the work fits the existing capacity) and
    linear in ``S_i`` below it, so ``A[j]`` is the smaller of a window minimum of ``dist`` and
    a window minimum of ``dist - price * S / beta`` plus a term in ``j``. Capped purchases
    (``rho <= cap``) shorten the second window from the left.
    """
    j = np.arange(S.size)
    free_from = np.searchsorted(S, S - capacity * beta, side="left")
    best = _range_min(dist, free_from, j)
    shifted = dist - price * S / beta
    paid_from = (
        np.searchsorted(S, S - (capacity + cap) * beta, side="left")
        if math.isfinite(cap)
        else np.zeros_like(j)
    )
    paid = _range_min(shifted, paid_from, free_from - 1) + price * (S / beta - capacity)
    return np.minimum(best, paid)


def _compute_matrix(S: FloatArray, beta: float, capacity: float) -> FloatArray:
    """``rho[i, j] = max(0, (S_j - S_i)/beta - capacity)``, ``nan`` below the diagonal."""
    rho = np.maximum(0.0, (S[None, :] - S[:, None]) / beta - capacity)
    rho[np.tril_indices(S.size, -1)] = np.nan
    return rho


def _compute_step_general(
    dist: FloatArray, S: FloatArray, beta: float, capacity: float, cost: CapacityCost
) -> FloatArray:
    """The same minimum for any cost function, as an ``O(N^2)`` vectorised scan."""
    rho = _compute_matrix(S, beta, capacity)
    upper = ~np.isnan(rho)
    total = np.full(rho.shape, np.inf)
    total[upper] = cost(rho[upper])
    return np.asarray(np.min(dist[:, None] + total, axis=0))


def _compute_step(
    inst: CodesignInstance, v: int, dist: FloatArray, beta: float
) -> FloatArray:
    cost = inst.node_costs[v]
    S = inst.prefix_flops
    if cost.linear_price is not None:
        return _compute_step_linear(
            dist, S, beta, float(inst.capacity[v]), cost.linear_price, cost.max_amount
        )
    return _compute_step_general(dist, S, beta, float(inst.capacity[v]), cost)


def _link_costs(inst: CodesignInstance, links: IntArray, beta: float) -> FloatArray:
    """``g_e(max(0, D_j / beta - B_e))`` for each link (rows) and each ``j`` (columns)."""
    sigma = np.maximum(0.0, inst.activation_bits[None, :] / beta - inst.bandwidth[links, None])
    prices = [inst.link_costs[e].linear_price for e in links]
    if all(p is not None and math.isinf(inst.link_costs[e].max_amount)
           for p, e in zip(prices, links, strict=True)):  # fmt: skip
        return np.asarray(prices, dtype=np.float64)[:, None] * sigma
    return np.vstack([inst.link_costs[e](row) for e, row in zip(links, sigma, strict=True)])


def _best_choice(
    inst: CodesignInstance, v: int, dist: FloatArray, j: int, beta: float
) -> int:
    """The ``i`` that attains ``A_v[j]`` (the smallest such ``i`` on ties)."""
    S = inst.prefix_flops
    rho = np.maximum(0.0, (S[j] - S[: j + 1]) / beta - inst.capacity[v])
    return int(np.argmin(dist[: j + 1] + inst.node_costs[v](rho)))


def backtrack(
    inst: CodesignInstance,
    stage_min: FloatArray,
    step_cost: Callable[[IntArray, int], FloatArray],
    choose: Callable[[int, int], int],
    combine: Callable[[FloatArray, FloatArray], FloatArray] = np.add,
) -> tuple[list[int], list[int]]:
    """Read the path and partition off the relaxed labels, from the terminal back to the source.

    ``stage_min[v, j]`` is the label of ``v`` having completed ``j`` blocks; ``step_cost(links,
    j)`` the link part of sending ``D_j`` over each of ``links``, joined to the label with
    ``combine`` (``+`` for costs, ``max`` for bottlenecks); ``choose(v, j)`` the block count
    ``v`` received. Ties go to the earliest link in file order.
    """
    path, partition = [inst.target], [inst.n_blocks]
    v, j = inst.target, inst.n_blocks
    while v != inst.source:
        i = choose(v, j)
        ins = inst.in_links[v]
        e = int(ins[np.argmin(combine(stage_min[inst.link_src[ins], i], step_cost(ins, i)))])
        v, j = int(inst.link_src[e]), i
        path.append(v)
        partition.append(j)
    return path[::-1], partition[::-1]


def _plan_from_path(
    inst: CodesignInstance, method: str, beta: float, path: list[int], partition: list[int]
) -> Plan:
    rho, sigma = stage_increments(inst, path, partition, beta, inst.capacity, inst.bandwidth)
    node_added = np.zeros(len(inst.node_ids))
    node_added[path] = rho
    link_added = np.zeros(len(inst.links))
    for (u, z), y in zip(zip(path[:-1], path[1:], strict=True), sigma, strict=True):
        link_added[inst.link_index(u, z)] = y
    return build_plan(inst, method, beta, path, partition, node_added, link_added)


def solve_psg(inst: CodesignInstance, beta: float) -> Plan:
    """The exact minimum-cost plan for output interval ``beta`` on an acyclic instance.

    Raises
    ------
    Infeasible
        If capacity caps leave no plan that meets ``beta``.
    """
    V, width = len(inst.node_ids), inst.n_blocks + 1
    dist = np.full((V, width), np.inf)
    stage_min = np.full((V, width), np.inf)
    dist[inst.source, 0] = 0.0
    for v in range(V):
        stage_min[v] = _compute_step(inst, v, dist[v], beta)
        outs = inst.out_links[v]
        if outs.size:
            targets = inst.link_dst[outs]
            candidate = stage_min[v][None, :] + _link_costs(inst, outs, beta)
            dist[targets] = np.minimum(dist[targets], candidate)
    if not math.isfinite(stage_min[inst.target, -1]):
        raise Infeasible(
            f"no plan reaches an interval of {beta:g} s within the capacity caps"
        )
    path, partition = backtrack(
        inst,
        stage_min,
        lambda links, j: _link_costs(inst, links, beta)[:, j],
        lambda v, j: _best_choice(inst, v, dist[v], j, beta),
    )
    return _plan_from_path(inst, "psg", beta, path, partition)


def reference_psg(inst: CodesignInstance, beta: float) -> Plan:
    """Algorithm 1 of the co-design paper as written: relax every transition of the state graph
    in topological order, ``O(|V| N + |E| N^2)`` scalar steps. For tests and benchmarks."""
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
        raise Infeasible(f"no plan reaches an interval of {beta:g} s within the capacity caps")
    path, partition = [inst.target], [N]
    state = terminal_parent
    while state[0] != inst.source:
        prev = parent[state]
        path.append(prev[0])
        partition.append(state[1])
        state = prev
    return _plan_from_path(inst, "psg-reference", beta, path[::-1], partition[::-1])
