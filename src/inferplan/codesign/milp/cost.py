"""The co-design problem as a mixed-integer linear program, exact on any directed network.

PSG needs an acyclic network: on a cycle a shortest state path may visit a node twice. The
MILP keeps the path simple by construction, so it is what cyclic networks get (and a
cross-check of PSG on acyclic ones). Solved with HiGHS through :func:`scipy.optimize.linprog`.

Formulation: a unit of flow through PSG's state graph, each node entered at most once. With
``W = N + 1`` block counts::

    y[v, i, j] in {0, 1}   v receives the activation after i blocks and sends it after j >= i
    z[e, j]    in {0, 1}   link e carries the activation after j blocks

    sum_{e into v} z[e, i] + [v = s, i = 0] = sum_j y[v, i, j]       what arrives is run
    sum_i y[v, i, j] = sum_{e out of v} z[e, j] + [v = t, j = N]     what is run is sent on
    sum_{i, j} y[v, i, j] <= 1                                        each node once: simple
    minimise  sum c[v, i, j] y[v, i, j] + sum g[e, j] z[e, j]

The objective coefficients are the exact prices of each transition, formed once by the same
arithmetic as every plan: ``c[v, i, j] = f_v(max(0, w(i, j) / beta - C_v))`` and ``g[e, j] =
g_e(max(0, D_j / beta - B_e))`` (any cost function, modules, non-convex tiers and callables
included; transitions beyond a cap get no variable). Every coefficient of the constraints is
0 or +-1, so HiGHS's tolerances bite only on the objective. Flow that circles on a cycle away
from the path (zero work, ``i = j``) can only add cost, so the path read from ``s`` is the
deployment.

Prices may span many decades. HiGHS works to an absolute tolerance on the objective, so the
objective is scaled to the best cost known (at first the largest coefficient) and re-solved,
transitions dearer than that best plan dropped, until HiGHS's lower bound, less its tolerance
(``TOLERANCE`` times the scale for each transition of the path), certifies the best plan's
exact cost (re-priced by :func:`~inferplan.codesign.plan.plan_from_path`) to
:data:`CERTIFIED_GAP`. A plan it cannot certify within :data:`MAX_ROUNDS` solves has status
``"uncertified"``; one cut short by ``time_limit``, ``"time_limit"``.
"""

from __future__ import annotations

import itertools
import math
import time
import warnings
from dataclasses import replace
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy import sparse
from scipy.optimize import OptimizeResult, OptimizeWarning, linprog

from inferplan.arrays import FloatArray
from inferplan.codesign.engine.psg import link_cost_table, node_cost_table
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.memory import fits_somewhere, memory_infeasible, most_memory
from inferplan.codesign.plan import Plan, PlanStatus, check_scale, infeasible, plan_from_path
from inferplan.errors import InvalidArgument
from inferplan.native import native_stdout_muted
from inferplan.network.costs import CapacityCost, ModuleCost, segments

__all__ = [
    "CERTIFIED_GAP",
    "MAX_ROUNDS",
    "MIP_REL_GAP",
    "SAFE_RANGE",
    "Model",
    "StateFlow",
    "highs",
    "solve_milp",
]


# HiGHS stops when the gap to its best bound is below this fraction of the objective; the
# default 1e-4 would let a plan 0.01 % above the optimum through.
MIP_REL_GAP = 1e-9
# HiGHS's tolerances on the scaled objective (per reduced cost), on the constraints and on
# integrality, the least it accepts (at its default of 1e-6 for integrality its presolve takes
# plans 1e-6 apart for equals and proves the dearer one optimal); its absolute gap is turned
# off. ``mip_abs_gap`` and ``mip_feasibility_tolerance`` go to HiGHS as they are.
TOLERANCE = 1e-10
# A plan is "optimal" when its exact cost is within this fraction of HiGHS's lower bound.
CERTIFIED_GAP = 1e-8
# Solves, each scaled to the best cost known so far, before a plan is left "uncertified".
MAX_ROUNDS = 8
SAFE_RANGE = (1e-8, 1e14)
"""The sizes of coefficient :meth:`Model.relaxed` keeps rows within: inside what HiGHS takes
(it drops ``1e-9`` and below, refuses ``1e15`` and above) by a factor of ten."""


def highs(
    *args: Any, time_limit: float | None, tolerance: float = TOLERANCE, **kwargs: Any
) -> OptimizeResult:
    """:func:`scipy.optimize.linprog` with HiGHS at the tolerances above (``mip_rel_gap``
    :data:`MIP_REL_GAP`, no absolute gap, ``tolerance`` on feasibility and reduced costs,
    no presolve) and ``time_limit`` seconds (``None``: none), quiet: no log, and descriptor 1
    muted while it runs (:func:`~inferplan.native.native_stdout_muted`)."""
    options: dict[str, float | bool] = {
        "presolve": False,  # its reductions compare costs to a tolerance of their own
        "mip_rel_gap": MIP_REL_GAP,
        "mip_abs_gap": 0.0,
        "mip_feasibility_tolerance": tolerance,
        "dual_feasibility_tolerance": tolerance,
        "primal_feasibility_tolerance": tolerance,
        "output_flag": False,  # solvers write nothing: HiGHS's log would go to stdout
        "log_to_console": False,
    }
    if time_limit is not None:
        options["time_limit"] = max(time_limit, 1e-3)
    # options scipy does not know go to HiGHS, with a warning; HiGHS's own debugging lines
    # go to descriptor 1 whatever its options say (inferplan.native)
    with warnings.catch_warnings(), native_stdout_muted():
        warnings.filterwarnings("ignore", "Unrecognized options", OptimizeWarning)
        return linprog(*args, method="highs", options=options, **kwargs)


class StateFlow:
    """A simple path through the state graph as a MILP: its columns (``y`` then ``z``) with a
    weight each (``cost``), and its constraints (see the module docstring).

    ``node_weight[v, i, j]`` weighs ``y[v, i, j]`` and ``link_weight[e, j]`` weighs ``z[e, j]``
    (every link); a transition weighing ``inf`` gets no column. The co-design MILP weighs them
    by their prices, T* on any network (:mod:`~inferplan.codesign.milp.throughput`) by their
    delays.
    """

    def __init__(
        self, inst: CodesignInstance, node_weight: FloatArray, link_weight: FloatArray
    ) -> None:
        V, W, N = len(inst.node_ids), inst.n_cuts, inst.last_cut
        node_cost = node_weight.copy()
        # the source receives nothing but the input, the target sends nothing but the output
        node_cost[inst.source, 1:, :] = np.inf
        node_cost[inst.target, :, :N] = np.inf
        yv, yi, yj = np.nonzero(np.isfinite(node_cost))
        links = np.arange(len(inst.links))
        links = links[(inst.link_dst != inst.source) & (inst.link_src != inst.target)]
        link_cost = link_weight[links]
        row, zj = np.nonzero(np.isfinite(link_cost))
        ze = links[row]
        self.inst = inst
        self.y = (yv, yi, yj)
        self.z = (ze, zj)
        self.cost = np.concatenate((node_cost[yv, yi, yj], link_cost[row, zj]))
        ny, nz = yv.size, ze.size
        # rows: arrivals (v, i) at v W + i, departures (v, j) at V W + v W + j
        arrive = np.concatenate((yv * W + yi, inst.link_dst[ze] * W + zj))
        depart = V * W + np.concatenate((yv * W + yj, inst.link_src[ze] * W + zj))
        columns = np.arange(ny + nz)
        sign = np.concatenate((np.ones(ny), -np.ones(nz)))
        self.balance = sparse.csr_array(
            (np.concatenate((-sign, sign)),
             (np.concatenate((arrive, depart)), np.concatenate((columns, columns)))),
            shape=(2 * V * W, ny + nz),
        )  # fmt: skip
        self.rhs = np.zeros(2 * V * W)
        self.rhs[inst.source * W] = -1.0  # the input arrives at the source
        self.rhs[V * W + inst.target * W + N] = 1.0  # the output leaves the target
        self.once = sparse.csr_array(
            (np.ones(ny), (yv, np.arange(ny))), shape=(V, ny + nz)
        )  # each node at most once

    def solve(
        self,
        keep: npt.NDArray[np.bool_],
        scale: float,
        time_limit: float | None,
        *,
        objective: bool = True,
    ) -> tuple[int, FloatArray | None, float, str]:
        """HiGHS on the columns ``keep`` with costs divided by ``scale`` (or none at all, a
        question of feasibility, without ``objective``): scipy's status, the chosen columns
        (all columns, 0 where dropped), the lower bound (unscaled) and the message."""
        cols = np.flatnonzero(keep)
        result = highs(
            self.cost[cols] / scale if objective else np.zeros(cols.size),
            A_ub=self.once[:, cols],
            b_ub=np.ones(self.once.shape[0]),
            A_eq=self.balance[:, cols],
            b_eq=self.rhs,
            bounds=(0.0, 1.0),
            integrality=np.ones(cols.size),
            time_limit=time_limit,
        )
        if result.x is None:
            return result.status, None, -math.inf, result.message
        x = np.zeros(self.cost.size)
        x[cols] = result.x
        bound = getattr(result, "mip_dual_bound", None)
        lower = float(bound) * scale if bound is not None and math.isfinite(bound) else -math.inf
        return result.status, x, lower, result.message

    def deployment(self, x: FloatArray) -> tuple[list[int], list[int]]:
        """The path from ``s`` and its partition in a solution ``x``."""
        inst, (yv, yi, yj), (ze, zj) = self.inst, self.y, self.z
        ny = yv.size
        run = {int(yv[k]): (int(yi[k]), int(yj[k])) for k in np.flatnonzero(x[:ny] > 0.5)}
        sent = {(int(inst.link_src[ze[k]]), int(zj[k])): int(inst.link_dst[ze[k]])
                for k in np.flatnonzero(x[ny:] > 0.5)}  # fmt: skip
        path, partition = [inst.source], []
        while True:
            _, j = run[path[-1]]
            partition.append(j)
            if path[-1] == inst.target or len(path) > len(inst.node_ids):
                return path, partition
            path.append(sent[(path[-1], j)])


class Model:
    """A MILP gathered column by column beside the columns of state flows: each column's
    objective coefficient, upper bound (lower bounds are 0) and integrality, and the rows
    ``sum coef x <= rhs`` as triplets. :meth:`purchase` prices an amount bought exactly, by
    cost kind (the joint MILP's shared upgrades, the latency MILP's purchases)."""

    def __init__(self, objective: FloatArray, upper: FloatArray, integral: FloatArray) -> None:
        self.objective: list[float] = objective.tolist()
        self.upper: list[float] = upper.tolist()
        self.integral: list[int] = [int(k) for k in integral.tolist()]
        self.row: list[int] = []
        self.col: list[int] = []
        self.val: list[float] = []
        self.rhs: list[float] = []

    def column(self, cost: float, high: float, integer: bool = False) -> int:
        """A new column ``0 <= x <= high`` of objective coefficient ``cost``: its index."""
        self.objective.append(cost)
        self.upper.append(high)
        self.integral.append(int(integer))
        return len(self.objective) - 1

    def add(self, cols: list[int], vals: list[float], rhs: float) -> int:
        """A new row ``sum vals x[cols] <= rhs``: its index."""
        r = len(self.rhs)
        self.row += [r] * len(cols)
        self.col += cols
        self.val += vals
        self.rhs.append(rhs)
        return r

    def purchase(self, cost: CapacityCost, unit: float, most: float) -> tuple[int, list[int]]:
        """A column ``n``: an amount ``unit n`` added under ``cost`` (at most ``most``, and its
        cap), priced exactly; and the binaries that order the tiers of a cost that is not
        convex (``u_t = 1``: tier ``t`` full, so that tier ``t + 1`` may start).

        * linear: ``price unit n``;
        * modules: an integer ``m <= max modules``, ``n <= (size / unit) m``, cost
          ``price m``;
        * tiers: ``0 <= d_t <= width_t / unit``, ``n <= sum_t d_t``, cost ``sum_t price_t unit
          d_t``; convex tiers fill in order by themselves, others get ``u_t``
          (``d_t >= width_t u_t``, ``d_(t+1) <= width_(t+1) u_t``). The last tier ends at
          ``most`` when it is unbounded.
        """
        x = self.column(0.0, min(cost.max_amount, most) / unit)
        if isinstance(cost, ModuleCost):
            count = min(cost.max_modules, most / cost.size)
            m = self.column(cost.price, math.ceil(count) if math.isfinite(count) else math.inf,
                            True)  # fmt: skip
            self.add([x, m], [1.0, -cost.size / unit], 0.0)
            return x, []
        form = segments(cost)
        assert form is not None  # the callers refuse function costs
        if len(form.slopes) == 1:
            self.objective[x] = form.slopes[0] * unit
            return x, []
        ends = [*form.starts[1:], min(form.cap, max(most, form.starts[-1]))]
        widths = [(b - a) / unit for a, b in zip(form.starts, ends, strict=True)]
        d = [self.column(p * unit, w) for p, w in zip(form.slopes, widths, strict=True)]
        self.add([x, *d], [1.0] + [-1.0] * len(d), 0.0)
        order = []
        if any(b < a for a, b in itertools.pairwise(form.slopes)):
            for t in range(len(d) - 1):  # tier t full before tier t + 1 starts
                u = self.column(0.0, 1.0, True)
                self.add([d[t], u], [-1.0, widths[t]], 0.0)
                self.add([d[t + 1], u], [1.0, -widths[t + 1]], 0.0)
                order.append(u)
        return x, order

    def matrix(self) -> sparse.csr_array:
        """The rows as a sparse matrix over every column."""
        return sparse.csr_array((self.val, (self.row, self.col)),
                                shape=(len(self.rhs), len(self.objective)))  # fmt: skip

    def relaxed(self, columns: FloatArray | None = None) -> tuple[sparse.csr_array, FloatArray]:
        """The rows as a sparse matrix and their right-hand sides, each row HiGHS would not
        take as it is scaled and rounded towards a looser row; with ``columns``, over the
        columns ``x / columns`` (each coefficient times its column's factor).

        HiGHS drops a coefficient of at most ``1e-9`` and refuses one of ``1e15`` or more. A
        row whose coefficients leave :data:`SAFE_RANGE` is divided by the geometric mean of
        its largest and least (the same row); what is still below the range is then
        rounded away from the row's feasible side: a positive coefficient dropped, a
        negative one raised to the range's least in size. Every column is at least 0, so
        every point of the rows given meets the rows returned: a relaxation of a relaxation,
        whose lower bounds stay lower bounds (plans are priced apart from it)."""
        low, high = SAFE_RANGE
        val = np.array(self.val, dtype=np.float64)
        row = np.array(self.row, dtype=np.int64)
        col = np.array(self.col, dtype=np.int64)
        rhs = np.array(self.rhs, dtype=np.float64)
        if columns is not None:
            val = val * columns[col]
        size = np.abs(val)
        rows = len(self.rhs)
        most = np.zeros(rows)
        least = np.full(rows, np.inf)
        np.maximum.at(most, row, size)
        np.minimum.at(least, row[size > 0], size[size > 0])
        wide = (most > high) | (least < low)
        if np.any(wide):
            factor = np.ones(rows)
            factor[wide] = 1.0 / np.sqrt(most[wide] * least[wide])
            factor[wide] = np.minimum(factor[wide], high / most[wide])  # no row above it
            val, rhs = val * factor[row], rhs * factor
            small = np.abs(val) < low
            val[small & (val < 0)] = -low
            val[small & (val > 0)] = 0.0
        matrix = sparse.csr_array((val, (row, col)), shape=(rows, len(self.objective)))
        return matrix, rhs


def solve_milp(inst: CodesignInstance, beta: float, *, time_limit: float | None = None) -> Plan:
    """The minimum-cost plan for output interval ``beta`` on any directed network.

    The plan's cost is its exact price (as every method prices a deployment); its status says
    what is known of it: ``"optimal"`` when HiGHS's lower bound certifies it to
    :data:`CERTIFIED_GAP`, ``"time_limit"`` when ``time_limit`` stopped HiGHS first (the best
    plan found), ``"uncertified"`` when the bound stayed further off after
    :data:`MAX_ROUNDS` rescaled solves (see the module docstring).

    Parameters
    ----------
    inst
        A compiled instance (``compile_instance(..., require_acyclic=False)`` for cycles).
    beta
        Target output interval (s).
    time_limit
        Seconds HiGHS may take in all; ``None`` for no limit.

    Raises
    ------
    Infeasible
        If capacity caps leave no plan that meets ``beta``.
    InvalidArgument
        If the costs of every plan overflow floating point, or HiGHS finds no plan at all
        within ``time_limit``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, solve_milp, solve_psg
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> beta = 0.5 * inferplan.throughput(inst.network, inst.profile).interval
    >>> plan = solve_milp(inst, beta)
    >>> plan.status, abs(plan.cost - solve_psg(inst, beta).cost) <= 1e-8 * plan.cost
    ('optimal', True)
    """
    check_scale(inst, beta)
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InvalidArgument(f"must be a positive finite number of seconds, got {time_limit!r}",
                              field="time_limit")  # fmt: skip
    deadline = None if time_limit is None else time.monotonic() + time_limit
    every = np.arange(len(inst.node_ids))
    flow = StateFlow(inst, node_cost_table(inst, every, beta),
                     link_cost_table(inst, np.arange(len(inst.links)), beta))  # fmt: skip
    best: Plan | None = None
    status: PlanStatus = "uncertified"
    scale = float(flow.cost.max(initial=0.0)) or 1.0
    for _ in range(MAX_ROUNDS):
        # a transition dearer than the best plan is in no cheaper one
        keep = flow.cost <= (math.inf if best is None else best.cost * (1 + CERTIFIED_GAP))
        left = None if deadline is None else deadline - time.monotonic()
        code, x, lower, message = flow.solve(keep, scale, left)
        if x is None:
            if best is not None:
                status = "time_limit" if code == 1 else status
                break
            if code == 2:  # no plan at all
                check_scale(inst, beta, math.inf)
                if not inst.terms.empty and not fits_somewhere(inst, most_memory(inst)):
                    raise memory_infeasible(inst, most_memory(inst), beta)
                raise infeasible(beta)
            if code == 1:
                raise InvalidArgument(
                    f"the MILP found no plan within {time_limit:g} s; give it more time",
                    field="time_limit",
                )
            raise InvalidArgument(f"HiGHS found no plan: {message}", field="method")
        path, partition = flow.deployment(x)
        plan = plan_from_path(inst, "milp", beta, path, partition, status="optimal")
        if best is None or plan.cost < best.cost:
            best = plan
        if code == 1:
            status = "time_limit"
            break
        # HiGHS's bound is good to its tolerance on each reduced cost of the path's transitions,
        # in units of the scale: certify only what survives that slack.
        slack = 2 * len(path) * TOLERANCE * scale
        if best.cost == 0.0 or best.cost * (1 - CERTIFIED_GAP) <= lower - slack:
            status = "optimal"
            break
        if scale == best.cost:  # already scaled to it: another solve would say the same
            break
        scale = best.cost
    assert best is not None
    return replace(best, status=status)
