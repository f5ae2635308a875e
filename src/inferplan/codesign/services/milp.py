"""The joint provisioning of several services as one MILP (HiGHS), exact on any network.

One unit of flow per service through its own state graph, as the single-service MILP
(:class:`~inferplan.codesign.milp.cost.StateFlow`: each node entered at most once, so the path is
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

Services that give a latency bound add, per service and element, a delay variable and the
tangent cuts of :mod:`~inferplan.codesign.milp.latency` on the shared purchase (bounded then
by what the best plan known costs, not by the need), and one latency row per service; they
are refined until certified (:func:`_within_latency`).

A transition that alone exceeds its element's cap gets no column. The deployments HiGHS
returns are re-priced exactly (:meth:`~inferplan.codesign.services.joint.JointProblem.plan`); their
cost is certified against HiGHS's lower bound to
:data:`~inferplan.codesign.services.joint.CERTIFIED_GAP`, re-solving with the objective scaled to
the best cost known up to :data:`MAX_ROUNDS` times, as the single-service MILP does.
"""

from __future__ import annotations

import math
import time
from dataclasses import replace
from typing import Any

import numpy as np
from scipy import sparse

from inferplan.arrays import FloatArray
from inferplan.codesign.engine.psg import link_cost_table, node_cost_table
from inferplan.codesign.latency.trade import FREE_SHARE, trade_of
from inferplan.codesign.milp.cost import Model, StateFlow, highs
from inferplan.codesign.milp.latency import DelayTerm, bought
from inferplan.codesign.plan import INTERVAL_RTOL, PlanStatus, check_scale
from inferplan.codesign.services.joint import (
    CERTIFIED_GAP,
    Choice,
    JointProblem,
    ServiceDeployment,
    ServicesPlan,
    no_joint_plan,
)
from inferplan.codesign.stages import stages
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost

__all__ = ["MAX_ROUNDS", "TOLERANCE", "JointMilp", "solve_joint_milp"]

TOLERANCE = 1e-9
"""HiGHS's feasibility and reduced-cost tolerance here: at the single-service MILP's 1e-10,
HiGHS declared feasible joint plans infeasible (continuous needs beside the binaries of
falling tiers) and proved a dearer plan optimal; found by the brute-force tests."""

MAX_ROUNDS = 4
"""Solves, each scaled to the best cost known so far, before a plan is left uncertified."""

MAX_REFINEMENTS = 60
"""Solves of the relaxation under latency bounds, each with the cuts of the one before,
before a plan is left uncertified."""


class JointMilp:
    """The MILP of a :class:`JointProblem` (see the module docstring): columns, bounds,
    integrality, the objective, and the flows to read deployments back from."""

    def __init__(
        self,
        problem: JointProblem,
        budget: float | None = None,
        ratios: dict[tuple[int, int], list[float]] | None = None,
    ) -> None:
        """``budget`` (with latency bounds): the cost of a joint plan known to meet them,
        which bounds every purchase; ``ratios`` the tangent cuts so far, by (service,
        element), kept up to date."""
        self.problem = problem
        bounded = [s for s, service in enumerate(problem.services)
                   if service.latency is not None and budget is not None]  # fmt: skip
        self.terms: list[DelayTerm] = []
        self.ratios = {} if ratios is None else ratios
        delays: list[tuple[int, Any, Any, Any, Any]] = []  # (service, cols, elements, loads, prop)
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
            node_work = inst.work_or_zero_at(yv, yi, yj)  # w_v(i, j): the node's own load
            node_load = node_work / beta
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
            if s in bounded:  # what each column adds to the service's latency
                work = np.concatenate((node_work, inst.activation_bits[zj]))
                delays.append((s, columns, np.concatenate((problem.node_of[s][yv],
                                                           V + problem.link_of[s][ze])),
                               work, np.concatenate((np.zeros(yv.size),
                                                     inst.link_delay[ze]))))  # fmt: skip
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
        purchase: dict[int, tuple[int, int]] = {}  # element: its column and free-tail binary
        for r, k in enumerate(elements.tolist()):
            excess = max(0.0, most[r] - float(have[k]))  # the most that can be bought here
            found = None
            if delays and k < V + E:  # a bound on latency may buy more than the need
                assert budget is not None
                found = bought(model, costs[k], float(units[k]), budget)
            if found is None:
                x, relief = model.purchase(costs[k], float(units[k]), excess)[0], -1
            else:
                (x, relief), purchase[k] = found, found
            model.row.append(r)
            model.col.append(x)
            model.val.append(-1.0)
            if relief >= 0:  # a free tail meets any need
                model.row.append(r)
                model.col.append(relief)
                model.val.append(-most[r] / float(units[k]))
        for s, cols, element_of, work, prop in delays:
            latency = problem.services[s].latency
            assert latency is not None
            row: tuple[list[int], list[float]] = ([], [])
            for c in np.flatnonzero(prop > 0).tolist():
                row[0].append(int(cols[c]))
                row[1].append(float(prop[c] / latency))
            loaded = work > 0
            for k in np.unique(element_of[loaded]).tolist():
                if k not in purchase:  # free without end: no delay
                    continue
                mine = loaded & (element_of == k)
                coef = np.sqrt(work[mine] / (float(units[k]) * latency))
                x, relief = purchase[k]
                term = DelayTerm(model.column(0.0, math.inf), cols[mine], coef, x, relief)
                top = float(np.max(coef))
                term.ratios = self.ratios.setdefault((s, k), [top * 0.5**j for j in range(6)])
                for ratio in term.ratios:
                    term.cut(model, ratio)
                row[0].append(term.t)
                row[1].append(1.0)
                self.terms.append(term)
            model.add(row[0], row[1], 1.0)
        self.units = units
        self.purchase = purchase
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
        self.x = result.x
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
    """The minimum-cost joint plan (see the module docstring), every service within its
    latency bound when it gives one.

    Its status: ``"optimal"`` when HiGHS's lower bound certifies the plan's exact cost to
    :data:`~inferplan.codesign.services.joint.CERTIFIED_GAP`, ``"time_limit"`` when ``time_limit``
    stopped HiGHS first (the best plan found), ``"uncertified"`` otherwise.

    Raises
    ------
    Infeasible
        If no plan serves every service within the capacity caps (and latency bounds).
    InvalidArgument
        If HiGHS finds no plan at all within ``time_limit``.
    """
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InvalidArgument(
            f"must be a positive finite number of seconds, got {time_limit!r}", field="time_limit"
        )
    deadline = None if time_limit is None else time.monotonic() + time_limit
    cheapest = _cheapest(problem, deadline, time_limit)
    if all(
        service.latency is None
        or served.latency is None
        or served.latency <= service.latency * (1 + INTERVAL_RTOL)
        for service, served in zip(problem.services, cheapest.services, strict=True)
    ):
        return cheapest  # fmt: skip
    return _within_latency(problem, cheapest, deadline)


def _cheapest(
    problem: JointProblem, deadline: float | None, time_limit: float | None
) -> ServicesPlan:
    """The minimum-cost joint plan without the latency bounds (the rounds of the module
    docstring)."""
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


def _within_latency(
    problem: JointProblem, cheapest: ServicesPlan, deadline: float | None
) -> ServicesPlan:
    """The minimum-cost joint plan within every service's latency bound, ``cheapest`` (the
    optimum without them) missing one: the outer approximation of
    :mod:`~inferplan.codesign.milp.latency` on shared purchases, refined until certified.
    Each plan is the purchases HiGHS chose, each service's stages then sped up by the factor
    its latency misses by (:func:`_repaired`), so every plan meets every bound."""
    lower = 0.0  # the optimum without the bounds is one with them, to its certificate
    if cheapest.status == "optimal":
        lower = max(cheapest.lower_bound, cheapest.cost * (1 - CERTIFIED_GAP))
    choices = [_choice(problem, s, served) for s, served in enumerate(cheapest.services)]
    best = _repaired(problem, choices, ({}, {}))
    ratios: dict[tuple[int, int], list[float]] = {}
    status: PlanStatus = "uncertified"
    fresh = best is not None
    for _ in range(MAX_REFINEMENTS):
        if best is not None and (best.cost == 0.0 or best.cost * (1 - CERTIFIED_GAP) <= lower):
            status = "optimal"
            break
        budget = math.inf if best is None else best.cost
        milp = JointMilp(problem, budget, ratios)
        if best is not None:  # the cuts where the relaxation meets the best plan exactly
            _cut_at(problem, milp, best)
            milp = JointMilp(problem, budget, ratios)
        scale = budget if math.isfinite(budget) and budget > 0 else milp.scale()
        left = None if deadline is None else deadline - time.monotonic()
        if left is not None and left <= 0:
            status = "time_limit"
            break
        code, found, bound, _ = milp.solve(scale, left)
        if found is None:
            if code == 2 and best is not None:
                status = "optimal"  # nothing cheaper than the best plan is left
            elif code == 2:
                raise no_joint_plan(problem, "and latency bounds")
            elif code == 1 and best is not None:
                status = "time_limit"
            elif code == 1:
                raise InvalidArgument("the joint MILP found no plan within the time limit; "
                                      "give it more time", field="time_limit")  # fmt: skip
            break
        assert milp.x is not None
        in_use = int(np.count_nonzero(np.abs(milp.x) > TOLERANCE))
        lower = max(lower, bound - in_use * TOLERANCE * scale)
        V = len(problem.capacity)
        added: tuple[dict[int, float], dict[int, float]] = ({}, {})
        for k, (x, relief) in milp.purchase.items():
            # HiGHS's purchases are good to its tolerance: below it, none at all
            amount = float(milp.x[x] * milp.units[k]) if milp.x[x] > TOLERANCE else 0.0
            if relief >= 0 and milp.x[relief] > 0.5:  # into the free tail, its tiers paid
                amount = max(amount, trade_of(costs_of(problem)[k]).starts[-1])
            added[0 if k < V else 1][k if k < V else k - V] = amount
        plan = _repaired(problem, found, added)
        if plan is not None and (best is None or plan.cost < best.cost):
            best, fresh = plan, True
        if code == 1:
            status = "time_limit"
            break
        if best is not None and best.cost * (1 - CERTIFIED_GAP) <= lower:
            status = "optimal"
            break
        refined = [term.refine(milp.x) for term in milp.terms]
        if not any(refined) and not fresh:
            break
        fresh = False
    if best is None:
        raise no_joint_plan(problem, "and latency bounds", proven=False)
    return replace(best, status=status, lower_bound=min(max(lower, 0.0), best.cost))


def _choice(problem: JointProblem, s: int, served: ServiceDeployment) -> Choice:
    index = {v: k for k, v in enumerate(problem.instances[s].node_ids)}
    return tuple(index[v] for v in served.path), served.cut_indices


def _bought(problem: JointProblem, plan: ServicesPlan) -> tuple[list[float], list[float]]:
    """What a joint plan buys on each node and link, by element index."""
    nodes = {n.id: k for k, n in enumerate(problem.network.nodes)}
    links = {(e.source, e.target): k for k, e in enumerate(problem.network.links)}
    node, link = [0.0] * len(nodes), [0.0] * len(links)
    for v, x in plan.node_upgrades.items():
        node[nodes[v]] = x
    for e, x in plan.link_upgrades.items():
        link[links[e]] = x
    return node, link


def _loaded(problem: JointProblem, s: int, served: ServiceDeployment) -> list[tuple[int, float]]:
    """The elements (nodes ``k``, links ``V + k``) service ``s``'s stages load, with each
    stage's load (FLOPs or bits)."""
    inst = problem.instances[s]
    path, partition = _choice(problem, s, served)
    run = stages(inst, path, partition)
    V = len(problem.capacity)
    out = [(int(problem.node_of[s][v]), w) for v, w in zip(run.nodes, run.work, strict=True)
           if w > 0]  # fmt: skip
    out += [(V + int(problem.link_of[s][e]), d) for e, d in zip(run.links, run.bits, strict=True)
            if d > 0]  # fmt: skip
    return out


def _buying(problem: JointProblem, choices: list[Choice], amounts: list[float]
            ) -> ServicesPlan | None:  # fmt: skip
    """The joint plan of ``choices`` buying at least ``amounts`` (nodes ``k``, then links
    ``V + k``); ``None`` when the caps do not allow it."""
    V = len(problem.capacity)
    added = ({k: x for k, x in enumerate(amounts[:V])}, {k: x for k, x in enumerate(amounts[V:])})
    try:
        return problem.plan("milp", "optimal", choices, 0.0, added)
    except Infeasible:
        return None


def _repaired(
    problem: JointProblem, choices: list[Choice], added: tuple[dict[int, float], dict[int, float]]
) -> ServicesPlan | None:
    """The joint plan of ``choices`` buying at least ``added`` (compute, bandwidth), each
    service that misses its latency bound then sped up on every stage by the factor it misses
    by (capacity only helps the others), and its rounding dust snapped to nothing
    (:func:`_snapped`): ``None`` when the caps do not allow it."""
    try:
        plan = problem.plan("milp", "optimal", choices, 0.0, added)
    except Infeasible:
        return None
    have = np.concatenate((problem.capacity, problem.bandwidth))
    costs = costs_of(problem)
    node, link = _bought(problem, plan)
    amounts = [*node, *link]
    more = list(amounts)
    for s, (service, served) in enumerate(zip(problem.services, plan.services, strict=True)):
        if service.latency is None:
            continue
        for k, load in _loaded(problem, s, served):  # free capacity: the stage next to nothing
            if _free_beyond(costs[k], amounts[k]):
                more[k] = max(more[k], load / (FREE_SHARE * service.latency) - have[k])
    asked = [*_listed(added[0], len(problem.capacity)), *_listed(added[1], len(problem.bandwidth))]
    if more != amounts:
        replanned = _buying(problem, choices, more)
        if replanned is None:
            return None
        plan, amounts, asked = replanned, list(more), list(more)
    sped = _sped_up(problem, choices, plan, asked, frozenset())
    if sped is None:
        return None
    return _snapped(problem, choices, *sped)


SNAP_RTOL = 1e-6
"""A purchase for the latency bounds of at most this fraction of what its element has is
rounding, not a purchase: HiGHS's amounts are good to its tolerance (:data:`TOLERANCE`, in
units of what each element has), and speeding a stage up by the factor its service misses
its bound by adds that factor's rounding to every element of the path. :func:`_snapped`
drops such dust when the plan without it still meets every bound."""


def _listed(amounts: dict[int, float], size: int) -> list[float]:
    return [amounts.get(k, 0.0) for k in range(size)]


def _sped_up(
    problem: JointProblem,
    choices: list[Choice],
    plan: ServicesPlan,
    asked: list[float],
    frozen: frozenset[int],
    rtol: float = INTERVAL_RTOL,
) -> tuple[ServicesPlan, list[float]] | None:
    """``plan`` (of ``choices``, buying at least ``asked``), each service that misses its
    latency bound by more than ``rtol`` sped up on every stage it loads outside ``frozen``
    (nor at its cap) by the factor it misses by: the plan and what it asks for, ``None`` when
    none meets the bounds."""
    have = np.concatenate((problem.capacity, problem.bandwidth))
    most = [c.max_amount for c in costs_of(problem)]
    node, link = _bought(problem, plan)
    amounts = [*node, *link]
    more = list(amounts)
    for _ in range(3):  # stages at their caps cannot help: the others take their share
        for s, (service, served) in enumerate(zip(problem.services, plan.services, strict=True)):
            bound, got = service.latency, served.latency
            if bound is None or got is None or got <= bound * (1 + rtol):
                continue
            inst = problem.instances[s]
            path, partition = choices[s]
            fixed = math.fsum(stages(inst, path, partition).propagation)
            growing = []
            for k, load in _loaded(problem, s, served):
                if k in frozen or amounts[k] >= most[k] * (1 - 1e-12):
                    fixed += load / (have[k] + amounts[k])
                else:
                    growing.append(k)
            if bound <= fixed or not growing:
                return None
            factor = (got - fixed) / (bound - fixed) * (1 + 1e-12)
            for k in growing:
                more[k] = min(most[k], max(more[k], (have[k] + amounts[k]) * factor - have[k]))
        if more == amounts:
            break
        replanned = _buying(problem, choices, more)
        if replanned is None:
            return None
        plan, asked = replanned, [max(a, m) for a, m in zip(asked, more, strict=True)]
        node, link = _bought(problem, plan)
        amounts = [*node, *link]
        more = list(amounts)
    if not _meets_bounds(problem, plan, rtol):
        return None
    return plan, asked


def _meets_bounds(problem: JointProblem, plan: ServicesPlan, rtol: float) -> bool:
    """Whether every service of ``plan`` meets its latency bound (to ``rtol``)."""
    return all(
        service.latency is None
        or (served.latency is not None and served.latency <= service.latency * (1 + rtol))
        for service, served in zip(problem.services, plan.services, strict=True)
    )


def _snapped(
    problem: JointProblem, choices: list[Choice], plan: ServicesPlan, asked: list[float]
) -> ServicesPlan:
    """``plan`` without its dust: every purchase asked for beyond the services' shared need
    by at most :data:`SNAP_RTOL` of what its element has is dropped, and the stages of a
    service that then misses its bound sped up instead on the elements that keep a real
    purchase for the bounds (on any other, the speed-up would be dust again). The snapped
    plan is re-priced and re-checked (every interval, every latency bound exactly, the caps);
    it replaces ``plan`` when it passes and costs no more than ``plan`` plus its rounding."""
    have = np.concatenate((problem.capacity, problem.bandwidth))
    node, link = problem.loads(choices)
    V = len(problem.capacity)
    need = [max(0.0, node.get(k, 0.0) - have[k]) for k in range(V)]
    need += [max(0.0, link.get(k, 0.0) - have[V + k]) for k in range(len(problem.bandwidth))]
    extra = [a - n for a, n in zip(asked, need, strict=True)]
    if not any(0 < x <= SNAP_RTOL * h for x, h in zip(extra, have, strict=True)):
        return plan
    # only the elements that keep a real purchase for the bounds take the speed-up
    unreal = frozenset(k for k, x in enumerate(extra) if x <= SNAP_RTOL * have[k])
    clean = [0.0 if k in unreal else a for k, a in enumerate(asked)]
    replanned = _buying(problem, choices, clean)
    if replanned is None:
        return plan
    sped = _sped_up(problem, choices, replanned, clean, unreal, rtol=0.0)
    if sped is None or sped[0].cost > plan.cost * (1 + SNAP_RTOL):
        return plan
    snapped = sped[0]
    if any(
        served.interval > service.interval * (1 + INTERVAL_RTOL)
        for service, served in zip(problem.services, snapped.services, strict=True)
    ):
        return plan  # fmt: skip
    return snapped


def costs_of(problem: JointProblem) -> tuple[CapacityCost, ...]:
    """The cost functions of the nodes, then of the links."""
    return (*problem.node_costs, *problem.link_costs)


def _free_beyond(cost: CapacityCost, amount: float) -> bool:
    """Whether more capacity than ``amount`` costs nothing, without end."""
    trade = trade_of(cost)
    if trade.is_modules or math.isfinite(trade.cap) or trade.slopes[-1] > 0:
        return False
    return amount >= trade.starts[-1] * (1 - 1e-9) or not any(trade.slopes)


def _cut_at(problem: JointProblem, milp: JointMilp, plan: ServicesPlan) -> None:
    """Record the tangent cuts at ``plan``'s purchases, where the relaxation meets its
    delays exactly."""
    node, link = _bought(problem, plan)
    amounts = [*node, *link]
    for s, (service, served) in enumerate(zip(problem.services, plan.services, strict=True)):
        if service.latency is None:
            continue
        for k, load in _loaded(problem, s, served):
            if (s, k) in milp.ratios:
                ratio = math.sqrt(load / (float(milp.units[k]) * service.latency))
                ratio /= 1.0 + amounts[k] / float(milp.units[k])
                known = milp.ratios[(s, k)]
                if all(abs(ratio - r) > 1e-12 * ratio for r in known):
                    known.append(ratio)
