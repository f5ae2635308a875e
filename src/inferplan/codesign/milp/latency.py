"""The co-design MILP under a latency bound: any directed network, every cost kind.

The co-design MILP (:mod:`~inferplan.codesign.milp.cost`) prices each transition at the least
purchase its interval needs. Under a latency bound ``L`` buying more than that can pay, so
here the purchases are variables of their own. On the state flow of
:class:`~inferplan.codesign.milp.cost.StateFlow` each node is entered at most once, so each node
and each link runs at most one stage, and every element ``k`` (a node or link that some
transition loads) gets::

    n_k >= 0                               the capacity added, in units U_k, priced
                                           exactly by its kind (Model.purchase)
    n_k >= sum_c rho_c y_c / U_k           the interval's least purchase of its stage
    t_k >= 0                               its stage's delay, in units of S
    sum_k t_k + sum_z delay'(e) z / S <= 1                                   the bound

with ``c`` the flow columns that load ``k`` (a node's transitions ``y[v, i, j]``, a link's
``z[e, j]``), ``rho_c`` their least purchases, ``S = L - d(s)`` the time the stages have at
most (the bound less the least propagation delay from the source), ``delay'(e) = delay_s(u,
v) + d(v) - d(u)`` each link's delay reduced by the least delays ``d`` to the target
(:func:`reduced_delays`: along a path they sum to its delays less ``d(s)``, so a bound a
hair above the delays is as well scaled as any), ``C_k`` what ``k`` has and ``U_k`` the
unit of its purchases (:func:`purchase_unit`: ``C_k``, or the capacity its largest load
needs to run within ``min(S, beta)`` when that is more, so that purchases, needs and delays
are of order one however far the bound is below the network's speed; with ``C_k`` alone a bound
1e-18 s bought 1e17 units and the cuts' terms spanned 1e-18 to 1e17, beyond what HiGHS
keeps). A stage of load ``w`` takes ``w / (U_k (a_k + n_k))`` with ``a_k = C_k / U_k``.
With ``q_k = sum_c sqrt(w_c / (U_k S)) y_c``, ``q_k^2`` is ``w / (U_k S)`` for whichever
single column is chosen, so the delay is ``t_k >= q_k^2 / (a_k + n_k)``: a convex
constraint (a square over a linear term) in the flow and the purchase together. Its outer
approximation is a set of tangent cuts, each exact where ``q / (a + n) = r``::

    t_k >= 2 r q_k - r^2 (a_k + n_k)

a linear relaxation: every plan meets every cut, so HiGHS's bound is a lower bound on the
optimum. An element whose cost is free without end beyond some amount (an uncapped last tier
of price 0) may take its delay towards 0 at no further cost: a binary, allowed once the tiers
before are full, relaxes each cut by the most it asks (``2 r max q_k``); an element free
everywhere has no delay term. Purchases are bounded by what the best plan known costs (no
element of a cheaper plan costs more), which keeps modules and the last tier of falling
tiers finite.

**Refinement.** The plan without the bound comes first (:func:`~inferplan.codesign.milp.cost.
solve_milp`): when its latency meets ``L`` it is the answer. Otherwise the deployment of
least latency at the caps (the state flow weighed by delays) either misses ``L``
(:class:`~inferplan.errors.Infeasible`, naming that least latency) or gives the first plan.
Then, round after round, HiGHS solves the relaxation; the deployment it picks is allocated
exactly (:class:`~inferplan.codesign.latency.bound.LatencyProblem`: the cheapest purchases that
meet both bounds along it) and kept if it is the cheapest plan so far; cuts are added where
the solution's delays are underestimated and at the best plan's purchases (where the
relaxation is then exact), and HiGHS solves again. HiGHS drops a coefficient of ``1e-9`` or
less and refuses one of ``1e15`` or more: a row beyond that range is rescaled, and what is
still outside it rounded towards a looser row (:meth:`~inferplan.codesign.milp.cost.Model.
relaxed`), so the relaxation stays one and its bound a lower bound at every scale. The plan
is ``optimal`` when HiGHS's bound, less its tolerance, meets its cost within
:data:`LATENCY_GAP` (or when no cheaper plan is left), ``time_limit`` when the time ran out
first, ``uncertified`` after :data:`MAX_REFINEMENTS` rounds or when no cut is left to add.
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import sparse

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.instance import CodesignInstance, link_cost_table, node_cost_table
from inferplan.codesign.latency.bound import (
    LatencyProblem,
    Trade,
    check_latency,
    trade_of,
    unreachable,
)
from inferplan.codesign.milp.cost import Model, StateFlow, highs, solve_milp
from inferplan.codesign.plan import INTERVAL_RTOL, Plan, PlanStatus, check_scale
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost

__all__ = [
    "LATENCY_GAP",
    "MAX_REFINEMENTS",
    "TOLERANCE",
    "DelayTerm",
    "affordable",
    "bought",
    "solve_milp_latency",
]

LATENCY_GAP = 1e-7
"""A plan is ``optimal`` when its exact cost is within this fraction of the proven bound."""
MAX_REFINEMENTS = 60
"""Solves of the relaxation, each with the cuts of the one before, before a plan is left
``uncertified``."""
TOLERANCE = 1e-9
"""HiGHS's feasibility and reduced-cost tolerance: continuous purchases beside binaries, as in
the joint MILP (:data:`~inferplan.codesign.services.milp.TOLERANCE`)."""
# Tangent cuts each element starts with, their ratios halving from the largest.
_FIRST_CUTS = 6
# A delay variable this far below the true delay of its stage gets a new cut.
_UNDER = 1e-9


@dataclass
class DelayTerm:
    """One stage's delay in a MILP: the delay column ``t`` (in units of the time the bound
    leaves the stages: the bound, or ``S``), the flow columns ``cols`` that load the element
    with coefficient ``coef`` each (``q = sum coef y``), the element's purchase column ``n``
    (the stage runs on ``base + n`` units), the binary ``relief`` that lets a free tail take
    the delay to 0 (``-1`` for none), and the ratios of its tangent cuts."""

    t: int
    cols: IntArray
    coef: FloatArray
    n: int
    relief: int = -1
    ratios: list[float] = field(default_factory=list)
    base: float = 1.0

    def cut(self, model: Model, r: float) -> None:
        """The tangent cut at ratio ``r``: ``-t + 2 r q - r^2 n [- 2 r max(q) relief] <= r^2
        base`` (the relief lifts the most the cut can ask of ``t``)."""
        cols = [self.t, *self.cols.tolist(), self.n]
        vals = [-1.0, *(2.0 * r * self.coef).tolist(), -r * r]
        if self.relief >= 0:
            cols.append(self.relief)
            vals.append(-2.0 * r * float(np.max(self.coef)))
        model.add(cols, vals, r * r * self.base)

    def refine(self, x: FloatArray, n: float | None = None) -> bool:
        """Add the cut at solution ``x`` (purchase ``n`` instead of ``x``'s when given) if it
        underestimates the stage's delay there; whether a cut was added."""
        q = float(self.coef @ np.round(x[self.cols]))
        if q <= 0 or (self.relief >= 0 and x[self.relief] > 0.5):
            return False
        units = self.base + max(0.0, float(x[self.n]) if n is None else n)
        delay = q * q / units
        if n is None and x[self.t] >= delay * (1 - _UNDER):
            return False
        r = q / units
        if any(abs(r - s) <= 1e-12 * r for s in self.ratios):
            return False
        self.ratios.append(r)
        return True


def affordable(trade: Trade, budget: float) -> float:
    """The most capacity ``budget`` buys under ``trade`` (its cap for an unbounded budget):
    no element of a plan costing at most ``budget`` buys more."""
    if not math.isfinite(budget):
        return trade.most
    if trade.is_modules:
        return min(trade.modules, math.floor(budget / trade.price)) * trade.size
    most = 0.0
    for a, b, p, v in zip(trade.starts, trade.ends(), trade.slopes, trade.values, strict=True):
        if v > budget:
            break
        most = b if p == 0 else min(b, a + (budget - v) / p)
    return most


def _free(trade: Trade) -> bool:
    """Whether capacity is free without end."""
    return not trade.is_modules and math.isinf(trade.cap) and not any(trade.slopes)


def _free_tail(trade: Trade) -> bool:
    """Whether capacity is free without end beyond the start of the last tier (and not
    before)."""
    return not trade.is_modules and math.isinf(trade.cap) and trade.slopes[-1] == 0


def bought(model: Model, cost: CapacityCost, unit: float, budget: float) -> tuple[int, int] | None:
    """An element's purchase column in ``model`` (in units of ``unit``, its capacity, at most
    what ``budget`` buys) and the binary that lets a free tail take its delays to 0 (``-1``
    for none); ``None`` where capacity is free without end (no delay to bound)."""
    trade = trade_of(cost)
    if _free(trade):
        return None
    tail = _free_tail(trade)
    most = trade.starts[-1] if tail else affordable(trade, budget * (1 + 1e-9))
    if math.isinf(most) and not trade.convex and not trade.is_modules:
        # no plan known yet to bound the last of falling tiers: model it up to a million
        # times the element's unit (the next round, with a plan, bounds it exactly)
        most = trade.starts[-1] + 1e6 * unit
    n, order = model.purchase(cost, unit, most)
    relief = -1
    if tail:  # the free tail only once every tier before it is full
        assert order, "a free tail after priced tiers is a cost that is not convex"
        relief = model.column(0.0, 1.0, True)
        model.add([relief, order[-1]], [1.0, -1.0], 0.0)
    return n, relief


def delay_terms(
    model: Model,
    cols: IntArray,
    coef: FloatArray,
    need: FloatArray,
    unit: float,
    cost: CapacityCost,
    budget: float,
) -> DelayTerm | None:
    """An element's purchase column and need row in ``model``, and the delay term of its
    stage (``None`` where capacity is free without end): ``cols`` the flow columns that load
    it, ``coef`` their ``sqrt(load / (unit S))``, ``need`` their least purchases in units of
    ``unit`` (its capacity), ``budget`` the cost no purchase exceeds."""
    found = bought(model, cost, unit, budget)
    if found is None:
        return None
    n, relief = found
    term = DelayTerm(model.column(0.0, math.inf), cols, coef, n, relief)
    if np.any(need > 0):  # a free tail meets any need, too
        lift = ([relief], [-float(np.max(need))]) if relief >= 0 else ([], [])
        model.add([*cols.tolist(), n, *lift[0]], [*need.tolist(), -1.0, *lift[1]], 0.0)
    return term


def reduced_delays(inst: CodesignInstance, latency: float) -> tuple[float, FloatArray]:
    """The time a plan's stages have under ``latency`` at most (the bound less the least
    propagation delay from the source to the target, ``d(s)``) and each link's delay
    reduced by the potentials ``d`` (the least delay from a node on, Dijkstra's):
    ``delay_s(u, v) + d(v) - d(u) >= 0``, whose sum along a path from the source is its
    delay less ``d(s)``. Each is rounded down by the error of its sum (a looser bound), and
    a link from a node that reaches the target to one that does not gets 0 (no flow from
    the source takes it)."""
    V = len(inst.node_ids)
    d = np.full(V, np.inf)
    d[inst.target] = 0.0
    into: list[list[tuple[int, float]]] = [[] for _ in range(V)]
    for u, v, w in zip(inst.link_src.tolist(), inst.link_dst.tolist(),
                       inst.link_delay.tolist(), strict=True):  # fmt: skip
        into[v].append((u, w))
    heap = [(0.0, inst.target)]
    while heap:
        dv, v = heapq.heappop(heap)
        if dv > d[v]:
            continue
        for u, w in into[v]:
            if dv + w < d[u]:
                d[u] = dv + w
                heapq.heappush(heap, (d[u], u))
    least = float(d[inst.source])
    slack = latency - least if math.isfinite(least) else latency
    potential = np.where(np.isfinite(d), d, 0.0)
    with np.errstate(invalid="ignore"):
        reduced = inst.link_delay + potential[inst.link_dst] - potential[inst.link_src]
    error = 4 * np.finfo(np.float64).eps * (inst.link_delay + potential[inst.link_dst]
                                            + potential[inst.link_src])  # fmt: skip
    reduced = np.maximum(reduced - error, 0.0)
    return (slack if slack > 0 else latency), reduced


def purchase_unit(have: float, load: float, time: float) -> float:
    """The unit an element's purchases are counted in: what it has, or the capacity its
    largest ``load`` needs to run in ``time`` (the least of the bound and the interval) when
    that is more, so that a plan's purchases, its needs and its delays (in units of the
    bound) are all of order one however far the bound is below the network's speed."""
    with np.errstate(over="ignore"):
        needed = load / time
    return max(have, needed) if math.isfinite(needed) else have


def first_ratios(coef: FloatArray, base: float) -> list[float]:
    """The ratios of an element's first cuts: tangent where its largest load takes all the
    time ``S`` the bound leaves, then half, a quarter, ... of it (or where it runs at no
    purchase, when that is faster)."""
    top = float(np.max(coef))
    first = min(top * top / base, 1.0)  # the delay, in units of S
    return [first * 0.5**j / top for j in range(_FIRST_CUTS)]


@dataclass(frozen=True)
class _Element:
    """A node or link some columns load (``k``: nodes ``0..V-1``, then links ``V + e``):
    those columns, their ``sqrt(load / (unit S))``, their least purchases in ``unit``
    (the unit of its purchase column) and what it has in that unit (``base``)."""

    k: int
    cols: IntArray
    coef: FloatArray
    need: FloatArray
    unit: float
    base: float


class _LatencyMilp:
    """The relaxation of one co-design under a latency bound (see the module docstring):
    the state flow, each element's columns, and the cuts so far."""

    def __init__(self, inst: CodesignInstance, beta: float, latency: float) -> None:
        self.inst, self.beta, self.latency = inst, beta, latency
        every = np.arange(len(inst.node_ids))
        links = np.arange(len(inst.links))
        base_node = node_cost_table(inst, every, beta)
        base_link = link_cost_table(inst, links, beta)
        extra_node = np.where(np.isfinite(base_node), inst.terms.node(every), np.inf)
        extra_link = np.where(np.isfinite(base_link), inst.terms.link(links), np.inf)
        self.flow = flow = StateFlow(inst, extra_node, extra_link)
        (yv, yi, yj), (ze, zj) = flow.y, flow.z
        # each column's price at the interval's least purchase: none is in a cheaper plan
        # than the best known once that alone costs more
        self.least = np.concatenate((base_node[yv, yi, yj], base_link[ze, zj]))
        ny = yv.size
        work = inst.work_or_zero_at(yv, yi, yj)  # node yv's load of its stage (i, j]
        bits = inst.activation_bits[zj]
        # time in units of the slack above the least propagation delay: each link's delay
        # reduced by potentials, which sum to the path's delay less the least along any
        # path, so that a bound a hair above the delays leaves its delays of order one
        slack, reduced = reduced_delays(inst, latency)
        self.slack = slack
        self.propagation = np.concatenate((np.zeros(ny), reduced[ze] / slack))
        # the elements: nodes 0..V-1, then links V + e, each with the columns that load it
        V = len(inst.node_ids)
        element = np.concatenate((yv, V + ze))
        load = np.concatenate((work, bits))
        have = np.concatenate((inst.capacity, inst.bandwidth))
        self.costs: tuple[CapacityCost, ...] = (*inst.node_costs, *inst.link_costs)
        rho = np.maximum(0.0, load / beta - have[element])
        self.elements: list[_Element] = []
        self.ratios: dict[int, list[float]] = {}
        loaded = load > 0
        order = np.argsort(element[loaded], kind="stable")
        cols = np.flatnonzero(loaded)[order]
        ks = element[cols]
        for piece in np.split(cols, np.flatnonzero(np.diff(ks)) + 1) if cols.size else []:
            k = int(element[piece[0]])
            unit = purchase_unit(float(have[k]), float(np.max(load[piece])), min(slack, beta))
            coef = np.sqrt(load[piece] / unit / slack)
            base = float(have[k]) / unit
            self.elements.append(_Element(k, piece, coef, rho[piece] / unit, unit, base))
            self.ratios[k] = first_ratios(coef, base)

    def build(self, budget: float) -> tuple[Model, list[DelayTerm]]:
        """The relaxation with every cut so far, purchases bounded by ``budget`` and the
        columns dearer than it dropped: the model and each element's delay term."""
        flow = self.flow
        keep = self.least <= budget * (1 + LATENCY_GAP)
        model = Model(np.where(keep, flow.cost, 0.0), keep.astype(np.float64),
                      np.ones(flow.cost.size))  # fmt: skip
        latency_row: list[tuple[int, float]] = [
            (int(c), float(self.propagation[c])) for c in np.flatnonzero(self.propagation > 0)
        ]
        terms = []
        for el in self.elements:
            term = delay_terms(model, el.cols, el.coef, el.need, el.unit, self.costs[el.k],
                               budget)  # fmt: skip
            if term is not None:
                term.base = el.base
                term.ratios = self.ratios[el.k]
                for r in term.ratios:
                    term.cut(model, r)
                latency_row.append((term.t, 1.0))
                terms.append(term)
        model.add([c for c, _ in latency_row], [v for _, v in latency_row], 1.0)
        return model, terms

    def solve(
        self, model: Model, scale: float, time_limit: float | None
    ) -> tuple[int, FloatArray | None, float]:
        """HiGHS on ``model`` with the objective divided by ``scale``: scipy's status, the
        solution and the lower bound (unscaled)."""
        flow, total = self.flow, len(model.objective)
        pad = total - flow.cost.size
        once = sparse.hstack([flow.once, sparse.csr_array((flow.once.shape[0], pad))])
        balance = sparse.hstack([flow.balance, sparse.csr_array((flow.balance.shape[0], pad))])
        objective = np.array(model.objective) / scale
        # a continuous column one unit of which costs more than the best plan is counted in
        # a fraction of that unit that costs it: HiGHS lets a column sit its feasibility
        # tolerance below 0, which on a unit 4,000 times the plan's cost took 4e-6 of the
        # plan off the bound, and no cheaper plan exists to find
        integral = np.array(model.integral)
        columns = np.ones(total)
        dear = (integral == 0) & (np.abs(objective) > 1.0)
        columns[dear] = 1.0 / np.abs(objective[dear])
        rows, rhs = model.relaxed(columns)  # a cut HiGHS would drop a term of is loosened
        result = highs(
            objective * columns,
            A_ub=sparse.vstack([once, rows], format="csr"),
            b_ub=np.concatenate((np.ones(flow.once.shape[0]), rhs)),
            A_eq=balance.tocsr(),
            b_eq=flow.rhs,
            bounds=np.column_stack((np.zeros(total), np.array(model.upper) / columns)),
            integrality=integral,
            time_limit=time_limit,
            tolerance=TOLERANCE,
        )
        if result.x is None:
            return result.status, None, -math.inf
        bound = getattr(result, "mip_dual_bound", None)
        lower = float(bound) * scale if bound is not None and math.isfinite(bound) else -math.inf
        return result.status, result.x * columns, lower


def solve_milp_latency(
    inst: CodesignInstance, beta: float, *, latency: float, time_limit: float | None = None
) -> Plan:
    """The minimum-cost plan whose every stage takes at most ``beta`` and whose latency is at
    most ``latency`` (seconds), on any directed network and every cost kind but functions:
    the outer approximation of the module docstring, refined until certified.

    Its status: ``"optimal"`` when HiGHS's bound certifies the plan's exact cost to
    :data:`LATENCY_GAP`, ``"time_limit"`` when ``time_limit`` stopped it first (the best plan
    found), ``"uncertified"`` otherwise. Every plan meets both bounds (its purchases are the
    exact allocation of its deployment).

    Raises
    ------
    Infeasible
        If no plan meets both bounds within the capacity caps (the least latency reachable is
        in the message).
    InvalidArgument
        For a cost given as a function, a bound that is not a positive finite number, or
        HiGHS finding no plan within ``time_limit``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, solve_latency, solve_psg
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> beta = 0.5 * inferplan.throughput(inst.network, inst.profile).interval
    >>> bound = 0.5 * solve_psg(inst, beta).latency
    >>> plan = solve_milp_latency(inst, beta, latency=bound)
    >>> exact = solve_latency(inst, beta, latency=bound)
    >>> plan.status, abs(plan.cost - exact.cost) <= 1e-8 * exact.cost
    ('optimal', True)
    """
    check_latency(latency)
    check_scale(inst, beta)
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InvalidArgument(f"must be a positive finite number of seconds, got {time_limit!r}",
                              field="time_limit")  # fmt: skip
    deadline = None if time_limit is None else time.monotonic() + time_limit

    def left() -> float | None:
        return None if deadline is None else max(deadline - time.monotonic(), 1e-3)

    problem = LatencyProblem(inst, beta, latency)  # refuses function costs
    slack = latency * (1 + INTERVAL_RTOL)
    try:
        cheapest = solve_milp(inst, beta, time_limit=left())
    except Infeasible:
        raise unreachable(beta, latency) from None
    if cheapest.latency is not None and cheapest.latency <= slack:
        return replace(cheapest, target_latency=latency)
    least, path, partition = _least_latency(inst, problem, left())
    links = [inst.link_index(u, v) for u, v in itertools.pairwise(path)]
    floor = math.fsum(inst.link_delay[links])
    if not least <= slack:
        raise unreachable(beta, latency, least, floor)
    milp = _LatencyMilp(inst, beta, latency)
    best = _Incumbent(problem)
    best.consider(milp, path, partition)
    if best.plan is None:  # the least latency a hair within the bound: no purchase meets it
        raise unreachable(beta, latency, least, floor)
    status: PlanStatus = "uncertified"
    lower = cheapest.cost if cheapest.status == "optimal" else 0.0
    for _ in range(MAX_REFINEMENTS):
        cost = best.plan.cost
        if cost == 0.0 or cost * (1 - LATENCY_GAP) <= lower:
            status = "optimal"
            break
        model, terms = milp.build(cost)
        code, x, bound = milp.solve(model, cost, left())
        if x is None:
            if code == 2:  # nothing cheaper than the best plan is left
                status = "optimal"
            elif code == 1:
                status = "time_limit"
            break
        # HiGHS's bound is good to its tolerance on each reduced cost of the columns in use
        used = int(np.count_nonzero(np.abs(x) > TOLERANCE))
        lower = max(lower, bound - used * TOLERANCE * cost)

        path, partition = milp.flow.deployment(x[: milp.flow.cost.size])
        best.consider(milp, path, partition)
        if code == 1:
            status = "time_limit"
            break
        if best.plan.cost * (1 - LATENCY_GAP) <= lower:
            status = "optimal"
            break
        added = [term.refine(x) for term in terms]
        if not any(added) and not best.fresh:
            break  # the same relaxation would say the same
        best.fresh = False
    return replace(best.plan, status=status)


class _Incumbent:
    """The cheapest plan found: each deployment allocated exactly once, and the cuts at its
    purchases recorded (``fresh`` until a relaxation has seen them)."""

    def __init__(self, problem: LatencyProblem) -> None:
        self.problem = problem
        self.plan: Plan | None = None
        self.fresh = False
        self.seen: set[tuple[tuple[int, ...], tuple[int, ...]]] = set()

    def consider(self, milp: _LatencyMilp, path: list[int], partition: list[int]) -> None:
        key = (tuple(path), tuple(partition))
        if key in self.seen:
            return
        self.seen.add(key)
        inst = milp.inst
        links = [inst.link_index(u, v) for u, v in itertools.pairwise(path)]
        found = self.problem.allocation(path, partition, links)
        if found is None:
            return
        xs, cost, _ = found
        if self.plan is not None and cost >= self.plan.cost:
            return
        self.plan = self.problem.plan(path, partition, links, xs, "milp", "optimal")
        self.fresh = True
        # the cuts where the relaxation meets this plan's delays exactly
        V, n = len(inst.node_ids), len(path)
        bought = {v: xs[k] for k, v in enumerate(path)} | {
            V + e: xs[n + k] for k, e in enumerate(links)
        }
        solution = np.zeros(milp.flow.cost.size)
        solution[_columns(milp.flow, path, partition, links)] = 1.0
        for el in milp.elements:
            if el.k in bought:
                term = DelayTerm(-1, el.cols, el.coef, -1, ratios=milp.ratios[el.k],
                                 base=el.base)  # fmt: skip
                term.refine(solution, bought[el.k] / el.unit)


def _columns(flow: StateFlow, path: list[int], partition: list[int], links: list[int]) -> IntArray:
    """The flow columns of a deployment."""
    (yv, yi, yj), (ze, zj) = flow.y, flow.z
    done = [0, *partition[:-1]]
    ny = yv.size
    index = {
        (int(v), int(i), int(j)): c for c, (v, i, j) in enumerate(zip(yv, yi, yj, strict=True))
    }
    chosen = [index[(v, a, b)] for v, a, b in zip(path, done, partition, strict=True)]
    sent = {(int(e), int(j)): ny + c for c, (e, j) in enumerate(zip(ze, zj, strict=True))}
    chosen += [sent[(e, b)] for e, b in zip(links, partition, strict=False)]
    return np.array(chosen, dtype=np.int64)


def _least_latency(
    inst: CodesignInstance, problem: LatencyProblem, time_limit: float | None
) -> tuple[float, list[int], list[int]]:
    """The deployment of least latency with every element at its cap, among those whose
    stages meet the interval there and fit memory: the state flow weighed by delays (any
    network), its latency recomputed, and the deployment."""
    node_most, link_most = problem.most()
    beta = problem.beta
    every = np.arange(len(inst.node_ids))
    links = np.arange(len(inst.links))
    with np.errstate(divide="ignore", invalid="ignore"):
        loads = inst.loads_or_zero_of(every)  # (1, K, K) shared, or (V, K, K) by node
        node = np.where(loads > 0, loads / node_most[:, None, None], 0.0)
        link = inst.activation_bits[None, :] / link_most[:, None]
    limit = beta * (1 + INTERVAL_RTOL)
    node[(node > limit) | ~np.isfinite(inst.terms.node(every))] = np.inf
    link[(link > limit) | ~np.isfinite(inst.terms.link(links))] = np.inf
    node += inst.forbidden
    flow = StateFlow(inst, node, link + inst.link_delay[:, None])
    # a transition slower than the bound alone is on no deployment that meets it: the rest,
    # in units of the bound, are at most 1 (HiGHS takes a cost of 1e20 for infinite); only
    # when none is left is the least latency sought among them all, for the message
    slack = problem.latency * (1 + INTERVAL_RTOL)
    code, x, _, message = flow.solve(flow.cost <= slack, problem.latency, time_limit)
    if x is None and code == 2:
        finite = np.isfinite(flow.cost)
        scale = float(np.max(flow.cost[finite], initial=0.0)) or 1.0
        code, x, _, message = flow.solve(finite, scale, time_limit)
    if x is None:
        if code == 2:
            raise unreachable(beta, problem.latency)
        raise InvalidArgument(f"HiGHS found no plan: {message}", field="time_limit")
    path, partition = flow.deployment(x)
    links_used = [inst.link_index(u, v) for u, v in itertools.pairwise(path)]
    run, propagation = problem.stage_list(path, partition, links_used)
    least = math.fsum([*(s.load / (s.have + s.trade.most) for s in run if s.load > 0),
                       propagation])  # fmt: skip
    return least, path, partition
