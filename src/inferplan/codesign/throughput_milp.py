"""T* on any directed network, cycles included: the least output interval as a MILP.

The state-graph relaxation of :mod:`~inferplan.codesign.throughput` needs an acyclic network
(on a cycle a state path may visit a node twice). This program keeps the deployment a simple
path by construction, with the path and partition flow of the co-design MILP
(:mod:`~inferplan.codesign.milp`), and minimises the slowest stage instead of the cost::

    z[e, j] in {0, 1}   link e = (u, v) carries the activation after j blocks (u ran up to j)
    T >= 0              the output interval, in units of tau (below)

    sum_{e out of v, j} z - sum_{e into v, j} z = [v = s] - [v = t]     one unit of flow
    sum_{e out of v, j} z <= 1,   nothing leaves t                       each node once: simple
    sum_{e out of v, j} j z >= sum_{e into v, j} j z   (v != s, t)       partition points grow
    C_v tau T >= S_out(v) - S_in(v)                                      compute of node v
    B_e tau T >= sum_j D_j z[e, j]                                       transfer on link e
    minimise  T

with ``S_in(v) = sum_{e into v, j} S_j z[e, j]``, ``S_out(v)`` alike and ``S_out(t) = S_N``.
Flow circling on a cycle away from the path only adds stages (never lowers ``T``), so the path
read off from ``s`` is an optimal deployment. ``tau`` is the interval of running the whole
model on the fastest node (rows scaled to order one); the interval returned is recomputed from
the deployment by the stage arithmetic of :mod:`~inferplan.codesign.plan`, not read from HiGHS.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import Deployment, slowest_stage
from inferplan.errors import InvalidArgument

__all__ = ["throughput_milp"]

# HiGHS stops when the gap to its best bound is below this fraction of the objective.
MIP_REL_GAP = 1e-9


def throughput_milp(inst: CodesignInstance, *, time_limit: float | None = None) -> Deployment:
    """The deployment of least output interval ``T*`` under the instance's capacities, on any
    directed network (compile it with ``require_acyclic=False`` for cycles).

    Parameters
    ----------
    inst
        A compiled instance.
    time_limit
        Seconds HiGHS may take; ``None`` for no limit.

    Raises
    ------
    InvalidArgument
        If HiGHS stops at the time limit without a proven optimum (naming ``time_limit``).

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> abs(throughput_milp(inst).interval / throughput_optimal(inst).interval - 1) < 1e-6
    True
    """
    S, D = inst.prefix_flops, inst.activation_bits
    V, E, W = len(inst.node_ids), len(inst.links), inst.n_blocks + 1
    tau = float(S[-1] / inst.capacity.max())
    z = np.arange(E * W).reshape(E, W)  # columns: z[e, j], then T
    T = E * W
    j = np.arange(W, dtype=np.float64)
    share = S / S[-1]
    rows: list[tuple[dict[int, float], float, float]] = []

    def flow(links: np.ndarray, weight: np.ndarray, sign: float) -> dict[int, float]:
        return {int(c): sign * float(w) for c, w in zip(z[links].ravel(),
                                                         np.tile(weight, links.size),
                                                         strict=True)}  # fmt: skip

    ones = np.ones(W)
    for v in range(V):
        outs, ins = inst.out_links[v], inst.in_links[v]
        balance = float(v == inst.source) - float(v == inst.target)
        rows.append(({**flow(outs, ones, 1.0), **flow(ins, ones, -1.0)}, balance, balance))
        rows.append((flow(outs, ones, 1.0), 0.0, 0.0 if v == inst.target else 1.0))
        if v not in (inst.source, inst.target):
            rows.append(({**flow(outs, j, 1.0), **flow(ins, j, -1.0)}, 0.0, math.inf))
        # C_v tau T - S_out + S_in >= [v = t] S_N, in units of S_N
        done = 1.0 if v == inst.target else 0.0
        compute = {T: float(inst.capacity[v]) * tau / float(S[-1])}
        compute.update({**flow(outs, share, -1.0), **flow(ins, share, 1.0)})
        rows.append((compute, done, math.inf))
    bits = float(D.max()) if D.max() > 0 else 1.0
    for e in range(E):
        transfer = {T: float(inst.bandwidth[e]) * tau / bits}
        transfer.update({int(z[e, k]): -float(D[k]) / bits for k in range(W)})
        rows.append((transfer, 0.0, math.inf))
    data = [(r, c, val) for r, (terms, _, _) in enumerate(rows) for c, val in terms.items()
            if val != 0.0]  # fmt: skip
    r_idx, c_idx, vals = zip(*data, strict=True) if data else ((), (), ())
    matrix = sparse.csr_array((vals, (r_idx, c_idx)), shape=(len(rows), E * W + 1))
    objective = np.zeros(E * W + 1)
    objective[T] = 1.0
    integrality = np.ones(E * W + 1)
    integrality[T] = 0
    upper = np.ones(E * W + 1)
    upper[T] = math.inf
    options: dict[str, float] = {"mip_rel_gap": MIP_REL_GAP}
    if time_limit is not None:
        options["time_limit"] = time_limit
    result = milp(
        objective,
        integrality=integrality,
        bounds=Bounds(np.zeros(E * W + 1), upper),
        constraints=LinearConstraint(
            matrix, np.array([lo for _, lo, _ in rows]), np.array([hi for _, _, hi in rows])
        ),
        options=options,
    )
    if result.status != 0 or result.x is None:
        raise InvalidArgument(f"HiGHS stopped without a proven optimum: {result.message}",
                              field="time_limit")  # fmt: skip
    chosen = result.x[: E * W].reshape(E, W) > 0.5
    path, partition = [inst.source], []
    while path[-1] != inst.target:
        e, k = np.argwhere(chosen[inst.out_links[path[-1]]])[0]
        partition.append(int(k))
        path.append(int(inst.link_dst[inst.out_links[path[-1]][e]]))
    partition.append(inst.n_blocks)
    interval, bottleneck = slowest_stage(inst, path, partition)
    names = inst.node_ids
    return Deployment(tuple(names[v] for v in path), tuple(partition), interval, bottleneck)
