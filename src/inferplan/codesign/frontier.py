"""The cost frontiers: the least co-design cost as a function of the target rate, and at one
rate as a function of the latency bound.

For each target throughput ``lambda = 1 / beta`` the optimum is one exact solve (PSG by default,
the MILP on cyclic networks). The frontier is a dense sweep of such solves between two rates,
and every place where the optimal deployment (path or partition) changes between two sweep
points is narrowed by bisection, each probe again an exact solve, down to a relative width of
``tol``. The cost is non-decreasing in the rate: a plan for a higher rate also meets every lower
one.

Why not the breakpoints alone: for one fixed deployment and linear prices the cost is a convex
piecewise-linear function of ``lambda``, but the frontier is the lower envelope of one such
function per deployment, and a deployment can be optimal only strictly inside an interval whose
two ends another deployment wins, so two solves at the ends of an interval cannot certify it.
The sweep is exact at every point it reports, and the change points are exact to ``tol``.

The cost-latency frontier (:func:`latency_frontier`) is the same sweep over the latency bound
``L`` at one target interval, each point one exact solve under that bound (for PSG,
:func:`~inferplan.codesign.latency.bound.solve_latency`). For one fixed deployment and convex costs
the cost is a convex non-increasing function of ``L``, but the frontier is again the lower
envelope of one such function per deployment, with the same consequence. It is
non-increasing: a plan within a tighter bound also meets every looser one.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from inferplan.codesign.engine.throughput import throughput_optimal
from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.memory import most_memory
from inferplan.codesign.methods import METHODS, get_method, solve
from inferplan.codesign.milp.throughput import throughput_milp
from inferplan.codesign.plan import Plan, cut_lists
from inferplan.errors import Infeasible, InvalidArgument

__all__ = [
    "MAX_POINTS",
    "Frontier",
    "FrontierChange",
    "FrontierPoint",
    "cost_frontier",
    "flow_cost_frontier",
    "latency_frontier",
]

MAX_POINTS = 10_000
"""The most points one frontier sweeps (each one an exact solve, before any bisection)."""


@dataclass(frozen=True)
class FrontierPoint:
    """The optimum at one target rate, and on a cost-latency frontier at one latency bound.
    ``status`` is the plan's (``"optimal"``, or ``"uncertified"`` when it could not be proven
    optimal, and for a MILP ``"time_limit"`` when stopped early) or ``"infeasible"`` when no
    plan meets the rate (and the bound) within the capacity caps (then ``cost`` is ``inf``,
    the path empty and ``latency`` ``None``). ``latency`` is the plan's (seconds);
    ``target_latency`` the bound it was solved under (``None`` on a cost-throughput
    frontier). ``partition`` and ``ideals`` as in :class:`~inferplan.codesign.plan.Plan`
    (block counts on a chain; ideal numbers, and no partition, at ideals of a layer
    graph)."""

    throughput: float
    cost: float
    path: tuple[str, ...]
    partition: tuple[int, ...] | None
    status: str = "optimal"
    latency: float | None = None
    target_latency: float | None = None
    layout: tuple[tuple[str, int, int], ...] = ()
    """On a flow frontier: each node holding blocks ``a+1..b`` as ``(node, a, b)`` (the path
    and partition are then empty)."""
    ideals: tuple[int, ...] | None = None

    @property
    def interval(self) -> float:
        return 1.0 / self.throughput

    @property
    def swept(self) -> float:
        """The point's place along its frontier: the latency bound on a cost-latency
        frontier, else the throughput."""
        return self.throughput if self.target_latency is None else self.target_latency

    @property
    def deployment(self) -> tuple[tuple[Any, ...], ...]:
        """What changes mark along a frontier: the path and cuts, or a flow's layout."""
        if self.layout:
            return self.layout
        return self.path, self.partition if self.partition is not None else self.ideals or ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "throughput": self.throughput,
            "interval": self.interval,
            "status": self.status,
            "cost": self.cost,
            "latency": self.latency,
            "target_latency": self.target_latency,
            "path": list(self.path),
            **cut_lists(self.partition, self.ideals),
        }
        if self.layout:
            out["layout"] = {v: [a, b] for v, a, b in self.layout}
        return out


@dataclass(frozen=True)
class FrontierChange:
    """The optimal deployment changes between the points ``low`` and ``high`` of the swept
    quantity (``high / low - 1 <= tol``): rates, or latency bounds."""

    low: FrontierPoint
    high: FrontierPoint

    def to_dict(self) -> dict[str, Any]:
        if self.low.layout or self.high.layout:  # a flow frontier's change of layout
            return {"between": [self.low.swept, self.high.swept],
                    "before": {"layout": self.low.to_dict().get("layout", {})},
                    "after": {"layout": self.high.to_dict().get("layout", {})}}  # fmt: skip
        return {
            "between": [self.low.swept, self.high.swept],
            "before": {"path": list(self.low.path),
                       **cut_lists(self.low.partition, self.low.ideals)},
            "after": {"path": list(self.high.path),
                      **cut_lists(self.high.partition, self.high.ideals)},
            "path_changes": self.low.path != self.high.path,
        }


@dataclass(frozen=True)
class Frontier:
    """Least cost against what ``sweep`` names: the target throughput, or the latency bound
    at one throughput (``"latency"``); points sorted along it, with the changes of the optimal
    deployment."""

    method: str
    points: tuple[FrontierPoint, ...]
    changes: tuple[FrontierChange, ...]
    sweep: Literal["throughput", "latency"] = "throughput"

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "sweep": self.sweep,
            "points": [p.to_dict() for p in self.points],
            "changes": [c.to_dict() for c in self.changes],
        }


def _check(method: str, points: int, takes: str | None = None) -> None:
    """Refuse a method that is not exact (or does not take the option ``takes``), and a
    number of points out of range."""
    if not get_method(method).exact:
        exact = " or ".join(m.name for m in METHODS.values() if m.exact)
        raise InvalidArgument(f"needs an exact method ({exact}), got {method!r}", field="method")
    if takes is not None and takes not in METHODS[method].options:
        able = " or ".join(m.name for m in METHODS.values() if m.exact and takes in m.options)
        raise InvalidArgument(f"method {method!r} does not take {takes} ({able} does)",
                              field="method")  # fmt: skip
    if not 2 <= points <= MAX_POINTS:
        raise InvalidArgument(
            f"must be at least 2 and at most {MAX_POINTS} (one exact solve each), got {points}",
            field="points",
        )


def _check_rates(low: float, high: float) -> None:
    if not (0 < low < high and math.isfinite(high)):
        raise InvalidArgument(
            f"the range of rates must be positive and increasing, got {low!r} to {high!r} "
            "inferences/s",
            field="low",
        )


def _trace(
    probe: Callable[[float], FrontierPoint], low: float, high: float, points: int, tol: float
) -> tuple[tuple[FrontierPoint, ...], tuple[FrontierChange, ...]]:
    """The sweep of ``points`` evenly spaced values from ``low`` to ``high``, each one
    ``probe``, with every change of the optimal deployment between two neighbours narrowed by
    bisection (again ``probe``) to a relative width of ``tol``."""
    found = {p.swept: p for p in map(probe, np.linspace(low, high, points).tolist())}
    sweep = sorted(found.values(), key=lambda p: p.swept)
    changes = []
    for left, right in itertools.pairwise(sweep):
        if left.deployment == right.deployment:
            continue
        while right.swept / left.swept - 1 > tol:
            middle = probe(0.5 * (left.swept + right.swept))
            found[middle.swept] = middle
            if middle.deployment == left.deployment:
                left = middle
            else:
                right = middle
        changes.append(FrontierChange(left, right))
    return tuple(sorted(found.values(), key=lambda p: p.swept)), tuple(changes)


def _point(solver: Any, inst: CodesignInstance, rate: float) -> FrontierPoint:
    try:
        plan: Plan = solver(inst, 1.0 / rate)
    except Infeasible:
        return FrontierPoint(rate, math.inf, (), (), "infeasible")
    return FrontierPoint(rate, plan.cost, plan.path, plan.partition, plan.status, plan.latency,
                         ideals=plan.ideals)  # fmt: skip


def cost_frontier(
    inst: CodesignInstance,
    *,
    low: float | None = None,
    high: float | None = None,
    points: int = 101,
    method: str = "psg",
    tol: float = 1e-6,
) -> Frontier:
    """The least cost for each target throughput from ``low`` to ``high`` (inferences/s).

    Parameters
    ----------
    inst
        The compiled network and profile.
    low, high
        The range of target rates; default ``1 / T*`` (the rate the network reaches as it is,
        cost zero unless memory must be bought; ``T*`` among the deployments that fit the
        most memory the nodes can have, by the MILP on a network with cycles) to four times
        that (the paper's hardest ``alpha = 0.25``).
    points
        Evenly spaced rates of the sweep (both ends included).
    method
        An exact method of :data:`~inferplan.codesign.METHODS`: ``"psg"`` or ``"milp"``
        (cyclic networks).
    tol
        Relative width to which each change of the optimal deployment is narrowed.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, cost_frontier
    >>> front = cost_frontier(compile_instance(inferplan.tiered(seed=2), inferplan.vgg16()),
    ...                       points=11)
    >>> costs = [p.cost for p in front.points]
    >>> costs[0] < 1e-9 and costs == sorted(costs)  # free at the rate the network has
    True
    """
    _check(method, points)
    base = 0.0
    if low is None or high is None:
        # T* by the state graph, or on a network with cycles by the MILP, among the
        # deployments that fit the most memory the nodes can have
        roomy = inst.with_memory(most_memory(inst))
        best = throughput_optimal(roomy) if inst.acyclic else throughput_milp(roomy)
        base = 1.0 / best.interval
    low = base if low is None else low
    high = 4.0 * base if high is None else high
    _check_rates(low, high)
    solver = METHODS[method].solve
    found, changes = _trace(lambda rate: _point(solver, inst, rate), low, high, points, tol)
    return Frontier(method=method, points=found, changes=changes)


def flow_cost_frontier(
    inst: CodesignInstance,
    *,
    low: float | None = None,
    high: float | None = None,
    points: int = 101,
    time_limit: float | None = None,
) -> Frontier:
    """The least cost of a flow plan (many pipelines,
    :func:`~inferplan.codesign.pipelines.flow.flow_provision`) for each target throughput from
    ``low`` to ``high`` (inferences/s), each point one exact MILP (``time_limit`` seconds
    each; a point stopped by it has status ``"time_limit"`` and its incumbent's cost).

    ``low`` and ``high`` default to the largest flow on the network as it is (with the most
    memory the nodes can have) and four times that. The changes of the layout are located
    between neighbouring points and not narrowed by bisection: equal-cost layouts are many
    (equal nodes swap their ranges), so a layout "change" there need not be a change of cost,
    and each probe would be a MILP.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance
    >>> from inferplan.codesign.frontier import flow_cost_frontier
    >>> net = inferplan.load_network("examples/runtime-network.json")
    >>> inst = compile_instance(net, inferplan.load_profile("vgg16"), require_acyclic=False,
    ...                         cuts="chain")
    >>> front = flow_cost_frontier(inst, points=3)
    >>> costs = [p.cost for p in front.points]
    >>> costs[0] < 1e-9 and costs == sorted(costs)
    True
    """
    from inferplan.codesign.pipelines.flow import flow_provision, flow_throughput

    _check("psg", points)
    base = 0.0
    if low is None or high is None:
        roomy = inst.with_memory(most_memory(inst))
        base = flow_throughput(roomy, time_limit=time_limit).throughput
    low = base if low is None else low
    high = 4.0 * base if high is None else high
    _check_rates(low, high)

    def probe(rate: float) -> FrontierPoint:
        try:
            plan = flow_provision(inst, rate, time_limit=time_limit)
        except Infeasible:
            return FrontierPoint(rate, math.inf, (), (), "infeasible")
        held = tuple((v, a, b) for v, (a, b) in sorted(plan.layout.items()))
        return FrontierPoint(rate, plan.cost, (), (), plan.status, layout=held)

    found, changes = _trace(probe, low, high, points, math.inf)
    return Frontier(method="flow-provision", points=found, changes=changes)


def latency_frontier(
    inst: CodesignInstance,
    beta: float,
    *,
    latency_range: tuple[float, float] | None = None,
    points: int = 101,
    method: str = "psg",
    tol: float = 1e-6,
) -> Frontier:
    """The least cost for each latency bound from ``latency_range[0]`` to
    ``latency_range[1]`` (seconds) at the target interval ``beta``: each point one exact
    solve under its bound, each change of the optimal deployment narrowed to ``tol``.

    Parameters
    ----------
    inst
        The compiled network and profile.
    beta
        The target interval (s) every point meets.
    latency_range
        The lowest and the highest latency bound; default a quarter of the latency of the
        plan for ``beta`` alone to all of it (from where a bound costs nothing more). Bounds
        no plan meets within the caps are points of status ``"infeasible"``.
    points
        Evenly spaced bounds of the sweep (both ends included).
    method
        An exact method of :data:`~inferplan.codesign.METHODS` that takes a latency bound.
    tol
        Relative width to which each change of the optimal deployment is narrowed.

    Raises
    ------
    Infeasible
        If no plan meets ``beta`` at all and no ``latency_range`` is given (its default needs
        that plan).

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, latency_frontier, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> front = latency_frontier(inst, 0.5 * throughput_optimal(inst).interval, points=6)
    >>> costs = [p.cost for p in front.points]
    >>> front.sweep, costs == sorted(costs, reverse=True)  # a looser bound never costs more
    ('latency', True)
    """
    _check(method, points, "latency")
    if latency_range is None:
        free: Plan = METHODS[method].solve(inst, beta)
        assert free.latency is not None  # every solver's plan states its latency
        latency_range = (0.25 * free.latency, free.latency)
    low, high = latency_range
    if not (0 < low < high and math.isfinite(high)):
        raise InvalidArgument(
            f"the latency bounds must be positive and increasing, got {low!r} to {high!r} s",
            field="latency_range",
        )
    rate = 1.0 / beta

    def probe(bound: float) -> FrontierPoint:
        try:
            plan = solve(inst, beta, method, latency=bound)
        except Infeasible:
            return FrontierPoint(rate, math.inf, (), (), "infeasible", target_latency=bound)
        return FrontierPoint(rate, plan.cost, plan.path, plan.partition, plan.status,
                             plan.latency, bound, ideals=plan.ideals)  # fmt: skip

    found, changes = _trace(probe, low, high, points, tol)
    return Frontier(method=method, points=found, changes=changes, sweep="latency")
