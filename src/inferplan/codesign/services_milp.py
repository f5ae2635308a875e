"""The joint provisioning of several services as one MILP (HiGHS), exact on any network.

One unit of flow per service through its own state graph, as the single-service MILP
(:class:`~inferplan.codesign.milp.StateFlow`: each node entered at most once, so the path is
simple), and shared variables per element used by some service: each node and link, and the
memory of each node whose memory is limited. With ``H_k`` what element ``k`` has (capacity,
bandwidth or memory) and ``U_k`` the unit its amounts are measured in (``H_k``, so that every
row is of order one; the largest load where ``H_k = 0``)::

    sum_s sum_(columns c of s on k) a_c x_c - n_k <= H_k / U_k   the need over what it has
    a_c = w_s(i, j) / (beta_s U_k)  (a node's stage)  or  D_j / (beta_s U_k)  (a link's)
    a_c = need_s(i, j) / U_k        (a node's memory: the services' needs add up)
    0 <= n_k <= cap_k / U_k                                     n_k: the upgrade bought

priced exactly by the element's cost function:

* linear: ``price U_k n_k``;
* modules: an integer ``m_k <= max modules``, ``n_k <= (size / U_k) m_k``, cost ``price m_k``;
* tiers: one variable per tier ``0 <= d_(k,t) <= width_t / U_k``, ``n_k <= sum_t d_(k,t)``,
  cost ``sum_t price_t U_k d_(k,t)``. Convex tiers fill in order by themselves; other tiers
  get a binary ``u_(k,t)`` per tier that forces tier ``t`` full before tier ``t + 1`` starts
  (``d_t >= width_t u_t``, ``d_(t+1) <= width_(t+1) u_t``). An unbounded last tier is bounded
  by the most any choice can need there.

A transition that alone exceeds its element's cap gets no column. The deployments HiGHS
returns are re-priced exactly (:meth:`~inferplan.codesign.services.JointProblem.plan`); their
cost is certified against HiGHS's lower bound to
:data:`~inferplan.codesign.services.CERTIFIED_GAP`, re-solving with the objective scaled to
the best cost known up to :data:`MAX_ROUNDS` times, as the single-service MILP does.
"""

from __future__ import annotations

import math
import time
from typing import Any

import numpy as np
from scipy import sparse

from inferplan.arrays import FloatArray
from inferplan.codesign.milp import Model, StateFlow, highs
from inferplan.codesign.plan import PlanStatus, check_scale
from inferplan.codesign.psg import link_cost_table, node_cost_table
from inferplan.codesign.services import (
    CERTIFIED_GAP,
    Choice,
    JointProblem,
    ServicesPlan,
    no_joint_plan,
)
from inferplan.errors import InvalidArgument
from inferplan.network.costs import CapacityCost

__all__ = ["MAX_ROUNDS", "TOLERANCE", "JointMilp", "solve_joint_milp"]

TOLERANCE = 1e-9
"""HiGHS's feasibility and reduced-cost tolerance here: at the single-service MILP's 1e-10,
HiGHS declared feasible joint plans infeasible (continuous needs beside the binaries of
falling tiers) and proved a dearer plan optimal; found by the brute-force tests."""

MAX_ROUNDS = 4
"""Solves, each scaled to the best cost known so far, before a plan is left uncertified."""


class JointMilp:
    """The MILP of a :class:`JointProblem` (see the module docstring): columns, bounds,
    integrality, the objective, and the flows to read deployments back from."""

    def __init__(self, problem: JointProblem) -> None:
        self.problem = problem
        self.flows: list[StateFlow] = []
        self.offsets: list[int] = []
        n = 0
        loads: list[tuple[Any, Any, FloatArray]] = []  # (column, element, load)
        V, E = len(problem.capacity), len(problem.bandwidth)
        limited = np.isfinite(problem.memory)  # memory elements: V + E + node, where limited
        for s, inst in enumerate(problem.instances):
            beta = problem.services[s].interval
            check_scale(inst, beta)
            nodes = node_cost_table(inst, np.arange(len(inst.node_ids)), beta)
            links = link_cost_table(inst, np.arange(len(inst.links)), beta)
            flow = StateFlow(
                inst,
                np.where(np.isfinite(nodes), 0.0, np.inf),
                np.where(np.isfinite(links), 0.0, np.inf),
            )
            (yv, yi, yj), (ze, zj) = flow.y, flow.z
            node_load = inst.work_or_zero[yi, yj] / beta
            link_load = inst.activation_bits[zj] / beta
            columns = np.arange(n, n + flow.cost.size)
            held = limited[problem.node_of[s][yv]]  # the memory a node's columns need
            loads.append(
                (
                    np.concatenate((columns, columns[: yv.size][held])),
                    np.concatenate((problem.node_of[s][yv], V + problem.link_of[s][ze],
                                    V + E + problem.node_of[s][yv][held])),
                    np.concatenate((node_load, link_load, inst.memory_need[yi, yj][held])),
                )
            )  # fmt: skip
            self.flows.append(flow)
            self.offsets.append(n)
            n += flow.cost.size
        self.n_flow = n
        column, element, load = (np.concatenate(parts) for parts in zip(*loads, strict=True))
        used = load > 0
        column, element, load = column[used], element[used], load[used]
        # each element's amounts in units of what it has (memory: of the most needed where
        # it has none), so that every row is of order one
        have = np.concatenate((problem.capacity, problem.bandwidth,
                               np.where(limited, problem.memory, 0.0)))  # fmt: skip
        costs: tuple[CapacityCost, ...] = (*problem.node_costs, *problem.link_costs,
                                           *problem.memory_costs)  # fmt: skip
        elements, row_of = np.unique(element, return_inverse=True)
        most = np.zeros(elements.size)  # the most the services can need on each element
        for _, el, ld in loads:
            keep = ld > 0
            per = np.zeros(have.size)
            np.maximum.at(per, el[keep].astype(np.int64), ld[keep])
            most += per[elements]
        units = have.copy()  # a memory that is none or a sliver of the need: the need's unit
        sliver = np.zeros(have.size, dtype=bool)
        sliver[elements] = have[elements] < 1e-9 * most
        sliver[: V + E] = False
        units[sliver] = np.maximum(most[np.searchsorted(elements, np.flatnonzero(sliver))], 1.0)
        model = Model(np.zeros(n), np.ones(n), np.ones(n))
        # the need rows first: their flow coefficients come from the arrays above
        model.rhs = (have[elements] / units[elements]).tolist()
        model.row, model.col = row_of.tolist(), column.tolist()
        model.val = (load / units[element]).tolist()
        for r, k in enumerate(elements.tolist()):
            excess = max(0.0, most[r] - float(have[k]))  # the most that can be bought here
            x, _ = model.purchase(costs[k], float(units[k]), excess)
            model.row.append(r)
            model.col.append(x)
            model.val.append(-1.0)
        self.elements = int(elements.size)
        self.objective = np.array(model.objective)
        self.upper = np.array(model.upper)
        self.integrality = np.array(model.integral)
        total = self.objective.size
        self.need = model.matrix()
        self.need_rhs = np.array(model.rhs)
        self.balance = sparse.hstack(
            [
                sparse.block_diag([f.balance for f in self.flows], format="csr"),
                sparse.csr_array((sum(f.balance.shape[0] for f in self.flows), total - n)),
            ],
            format="csr",
        )
        self.balance_rhs = np.concatenate([f.rhs for f in self.flows])
        self.once = sparse.hstack(
            [
                sparse.block_diag([f.once for f in self.flows], format="csr"),
                sparse.csr_array((sum(f.once.shape[0] for f in self.flows), total - n)),
            ],
            format="csr",
        )

    @property
    def columns(self) -> int:
        return int(self.objective.size)

    def scale(self) -> float:
        """A first scale of the objective: the dearest column at its bound."""
        with np.errstate(invalid="ignore"):
            scale = float(np.nanmax(self.objective * self.upper, initial=0.0))
        if not math.isfinite(scale) or scale <= 0:
            scale = float(np.max(self.objective, initial=0.0)) or 1.0
        return scale

    def _highs(self, scale: float, time_limit: float | None, *, integral: bool) -> Any:
        return highs(
            self.objective / scale,
            A_ub=sparse.vstack([self.once, self.need], format="csr"),
            b_ub=np.concatenate((np.ones(self.once.shape[0]), self.need_rhs)),
            A_eq=self.balance,
            b_eq=self.balance_rhs,
            bounds=np.column_stack((np.zeros(self.columns), self.upper)),
            integrality=self.integrality if integral else None,
            time_limit=time_limit,
            tolerance=TOLERANCE,
        )

    def solve(
        self, scale: float, time_limit: float | None
    ) -> tuple[int, list[Choice] | None, float, str]:
        """HiGHS with the objective divided by ``scale``: scipy's status, each service's
        deployment, the lower bound (unscaled) and the message."""
        result = self._highs(scale, time_limit, integral=True)
        if result.x is None:
            return result.status, None, -math.inf, result.message
        x = result.x
        choices: list[Choice] = []
        for flow, start in zip(self.flows, self.offsets, strict=True):
            path, partition = flow.deployment(x[start : start + flow.cost.size])
            choices.append((tuple(path), tuple(partition)))
        bound = getattr(result, "mip_dual_bound", None)
        lower = float(bound) * scale if bound is not None and math.isfinite(bound) else -math.inf
        return result.status, choices, lower, result.message


def solve_joint_milp(problem: JointProblem, *, time_limit: float | None = None) -> ServicesPlan:
    """The minimum-cost joint plan (see the module docstring).

    Its status: ``"optimal"`` when HiGHS's lower bound certifies the plan's exact cost to
    :data:`~inferplan.codesign.services.CERTIFIED_GAP`, ``"time_limit"`` when ``time_limit``
    stopped HiGHS first (the best plan found), ``"uncertified"`` otherwise.

    Raises
    ------
    Infeasible
        If no plan serves every service within the capacity caps.
    InvalidArgument
        If HiGHS finds no plan at all within ``time_limit``.
    """
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InvalidArgument(
            f"must be a positive finite number of seconds, got {time_limit!r}", field="time_limit"
        )
    deadline = None if time_limit is None else time.monotonic() + time_limit
    milp = JointMilp(problem)
    best: tuple[float, list[Choice]] | None = None
    lower_bound = -math.inf
    status: PlanStatus = "uncertified"
    scale = milp.scale()
    for _ in range(MAX_ROUNDS):
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:  # building the model used the time up
            code, choices, lower, message = 1, None, -math.inf, "time limit reached"
        else:
            code, choices, lower, message = milp.solve(scale, left)
        if choices is None:
            if best is not None:
                status = "time_limit" if code == 1 else status
                break
            if code == 2:
                raise no_joint_plan(problem)
            if code == 1:
                raise InvalidArgument(
                    f"the joint MILP found no plan within {time_limit:g} s; give it more time "
                    "or use method 'fast'",
                    field="time_limit",
                )
            raise InvalidArgument(f"HiGHS found no plan: {message}", field="method")
        cost = problem.cost(choices)
        if best is None or cost < best[0]:
            best = (cost, choices)
        # HiGHS's bound is good to its tolerance on each reduced cost of the columns in use
        in_use = sum(len(path) for path, _ in choices) + milp.elements
        lower_bound = max(lower_bound, lower - in_use * TOLERANCE * scale)
        if code == 1:
            status = "time_limit"
            break
        if best[0] == 0.0 or best[0] * (1 - CERTIFIED_GAP) <= lower_bound:
            status = "optimal"
            break
        if scale == best[0]:
            break
        scale = best[0]
    assert best is not None
    return problem.plan("milp", status, best[1], lower_bound)
