"""The co-design problem as a mixed-integer linear program, exact on any directed network.

PSG needs an acyclic network: on a cycle a shortest state path may visit a node twice. The
MILP keeps the path simple by construction, so it is what cyclic networks get (and a
cross-check of PSG on acyclic ones). Solved with HiGHS through :func:`scipy.optimize.milp`.

Formulation (``W = N + 1`` block counts, every quantity scaled to order one)::

    z[e, j] in {0, 1}   link e = (u, v) carries the activation after j blocks (u ran up to j)
    rho_v, sigma_e >= 0 compute and bandwidth to add

    sum_{e out of v, j} z - sum_{e into v, j} z = [v = s] - [v = t]     one unit of flow
    sum_{e out of v, j} z <= 1,   nothing leaves t                       each node once: simple
    sum_{e out of v, j} j z >= sum_{e into v, j} j z   (v != s, t)       partition points grow
    rho_v   >= (S_out(v) - S_in(v)) / beta - C_v                          S_out(t) = S_N
    sigma_e >= sum_j (D_j / beta - B_e) z[e, j]
    minimise  sum_v f_v(rho_v) + sum_e g_e(sigma_e)

with ``S_in(v) = sum_{e into v, j} S_j z[e, j]`` and ``S_out`` alike. Flow that circles on a
cycle away from the path can only add cost, so the optimum never needs it and the path read off
from ``s`` is the deployment. The costs enter as: linear ``p * x`` (``x <= cap``); modules
``price * m`` with an integer ``m >= 0``, ``size * m >= x`` (``m <= max modules``); convex tiers
as one continuous variable per tier (cheaper tiers fill first). Other costs (non-convex tiers,
Python callables) have no linear form here: use PSG.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.optimize import Bounds, LinearConstraint, milp

from inferplan.codesign.costs import CapacityCost, ModuleCost, TieredCost
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import Plan, check_scale, infeasible, plan_from_path
from inferplan.errors import InvalidArgument

__all__ = ["solve_milp"]

FloatArray = npt.NDArray[np.float64]

# HiGHS stops when the gap to its best bound is below this fraction of the objective; the
# default 1e-4 would let a plan 0.01 % above the optimum through.
MIP_REL_GAP = 1e-9


@dataclass
class _Model:
    """The MILP under construction: columns with objective and bounds, rows as triplets."""

    objective: list[float] = field(default_factory=list)
    lower: list[float] = field(default_factory=list)
    upper: list[float] = field(default_factory=list)
    integer: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    cols: list[int] = field(default_factory=list)
    vals: list[float] = field(default_factory=list)
    row_lo: list[float] = field(default_factory=list)
    row_hi: list[float] = field(default_factory=list)

    def column(self, cost: float, lo: float, hi: float, *, integer: bool = False) -> int:
        self.objective.append(cost)
        self.lower.append(lo)
        self.upper.append(hi)
        self.integer.append(int(integer))
        return len(self.objective) - 1

    def row(self, terms: dict[int, float], lo: float, hi: float) -> None:
        index = len(self.row_lo)
        for col, val in terms.items():
            if val != 0.0:
                self.rows.append(index)
                self.cols.append(col)
                self.vals.append(val)
        self.row_lo.append(lo)
        self.row_hi.append(hi)


def _add_cost(model: _Model, amount: int, cost: CapacityCost, scale: float, where: str) -> None:
    """Price the column ``amount`` (capacity added, in units of ``scale``) with ``cost``."""
    if cost.linear_price is not None:
        model.objective[amount] = cost.linear_price * scale
        model.upper[amount] = cost.max_amount / scale
        return
    if isinstance(cost, ModuleCost):
        modules = model.column(cost.price, 0.0, cost.max_modules, integer=True)
        model.row({modules: cost.size / scale, amount: -1.0}, 0.0, math.inf)
        return
    if isinstance(cost, TieredCost) and cost.convex:
        starts = (0.0, *cost.upto)[: len(cost.prices)]
        ends = (*cost.upto, math.inf)[: len(cost.prices)]
        terms = {amount: -1.0}
        for price, start, end in zip(cost.prices, starts, ends, strict=True):
            width = min(end, cost.max_amount) - start
            terms[model.column(price * scale, 0.0, max(width, 0.0) / scale)] = 1.0
        model.row(terms, 0.0, math.inf)
        return
    raise InvalidArgument(
        f"the MILP takes linear, module and convex tiered costs, not {cost.to_dict()['kind']!r} "
        "(use psg)",
        field=where,
    )


def solve_milp(inst: CodesignInstance, beta: float, *, time_limit: float | None = None) -> Plan:
    """The exact minimum-cost plan for output interval ``beta`` on any directed network.

    Parameters
    ----------
    inst
        A compiled instance (``compile_instance(..., require_acyclic=False)`` for cycles).
    beta
        Target output interval (s).
    time_limit
        Seconds HiGHS may take; ``None`` for no limit.

    Raises
    ------
    Infeasible
        If capacity caps leave no plan that meets ``beta``.
    InvalidArgument
        If a cost function has no linear form (non-convex tiers, Python callables), or HiGHS
        stops at the time limit without a proven optimum.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, solve_milp, solve_psg
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> beta = 0.5 * inferplan.throughput(inst.network, inst.profile).interval
    >>> abs(solve_milp(inst, beta).cost - solve_psg(inst, beta).cost) < 1e-6
    True
    """
    check_scale(inst, beta)
    S, D = inst.prefix_flops, inst.activation_bits
    V, E, W = len(inst.node_ids), len(inst.links), inst.n_blocks + 1
    work_scale = S[-1] / beta  # compute (FLOP/s) that runs the whole model in beta
    bits_scale = float(D.max()) / beta
    model = _Model()
    z = np.array([[model.column(0.0, 0.0, 1.0, integer=True) for _ in range(W)]
                  for _ in range(E)]).reshape(E, W)  # fmt: skip
    rho = [model.column(0.0, 0.0, math.inf) for _ in range(V)]
    sigma = [model.column(0.0, 0.0, math.inf) for _ in range(E)]
    j = np.arange(W)
    for v in range(V):
        outs, ins = inst.out_links[v], inst.in_links[v]
        flow = {int(c): 1.0 for c in z[outs].ravel()}
        flow.update({int(c): -1.0 for c in z[ins].ravel()})
        balance = float(v == inst.source) - float(v == inst.target)
        model.row(flow, balance, balance)
        model.row({int(c): 1.0 for c in z[outs].ravel()}, 0.0, 0.0 if v == inst.target else 1.0)
        if v not in (inst.source, inst.target):
            order = {int(c): float(k) for c, k in zip(z[outs].ravel(), np.tile(j, outs.size),
                                                      strict=True)}  # fmt: skip
            order.update({int(c): -float(k) for c, k in zip(z[ins].ravel(), np.tile(j, ins.size),
                                                            strict=True)})  # fmt: skip
            model.row(order, 0.0, math.inf)
        # rho_v >= (S_out - S_in) / beta - C_v, in units of work_scale.
        compute = {rho[v]: 1.0}
        compute.update({int(c): -s for c, s in zip(z[outs].ravel(), np.tile(S / S[-1], outs.size),
                                                   strict=True)})  # fmt: skip
        compute.update({int(c): s for c, s in zip(z[ins].ravel(), np.tile(S / S[-1], ins.size),
                                                  strict=True)})  # fmt: skip
        done = 1.0 if v == inst.target else 0.0  # the target finishes the model
        model.row(compute, done - inst.capacity[v] / work_scale, math.inf)
        _add_cost(model, rho[v], inst.node_costs[v], work_scale, f"node {inst.node_ids[v]!r}")
    for e in range(E):
        need = (D - inst.bandwidth[e] * beta) / float(D.max())
        terms = {sigma[e]: 1.0}
        terms.update({int(z[e, k]): -float(need[k]) for k in range(W)})
        model.row(terms, 0.0, math.inf)
        _add_cost(model, sigma[e], inst.link_costs[e], bits_scale, f"link {inst.links[e].label}")
    matrix = sparse.csr_array(
        (model.vals, (model.rows, model.cols)), shape=(len(model.row_lo), len(model.objective))
    )
    options: dict[str, float] = {"mip_rel_gap": MIP_REL_GAP}
    if time_limit is not None:
        options["time_limit"] = time_limit
    result = milp(
        np.array(model.objective),
        integrality=np.array(model.integer),
        bounds=Bounds(np.array(model.lower), np.array(model.upper)),
        constraints=LinearConstraint(matrix, np.array(model.row_lo), np.array(model.row_hi)),
        options=options,
    )
    if result.status == 2:
        raise infeasible(beta)
    if result.status != 0 or result.x is None:
        raise InvalidArgument(f"HiGHS stopped without a proven optimum: {result.message}",
                              field="time_limit")  # fmt: skip
    chosen = result.x[z] > 0.5
    path, partition = [inst.source], []
    while path[-1] != inst.target:
        e, k = np.argwhere(chosen[inst.out_links[path[-1]]])[0]
        partition.append(int(k))
        path.append(int(inst.link_dst[inst.out_links[path[-1]][e]]))
    partition.append(inst.n_blocks)
    return plan_from_path(inst, "milp", beta, path, partition, status="optimal")
