"""The cost-throughput frontier: the least co-design cost as a function of the target rate.

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
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.memory import most_memory
from inferplan.codesign.methods import METHODS, get_method
from inferplan.codesign.plan import Plan
from inferplan.codesign.throughput import throughput_optimal
from inferplan.codesign.throughput_milp import throughput_milp
from inferplan.errors import Infeasible, InvalidArgument

__all__ = ["MAX_POINTS", "Frontier", "FrontierChange", "FrontierPoint", "cost_frontier"]

MAX_POINTS = 10_000
"""The most rates one frontier sweeps (each one an exact solve, before any bisection)."""


@dataclass(frozen=True)
class FrontierPoint:
    """The optimum at one target rate. ``status`` is the plan's (``"optimal"``, or for a MILP
    ``"time_limit"`` when stopped early and ``"uncertified"`` when it could not prove its plan
    optimal) or ``"infeasible"`` when no plan meets the rate within the capacity caps (then
    ``cost`` is ``inf``, the path empty and ``latency`` ``None``). ``latency`` is the plan's
    (seconds)."""

    throughput: float
    cost: float
    path: tuple[str, ...]
    partition: tuple[int, ...]
    status: str = "optimal"
    latency: float | None = None

    @property
    def interval(self) -> float:
        return 1.0 / self.throughput

    @property
    def deployment(self) -> tuple[tuple[str, ...], tuple[int, ...]]:
        return self.path, self.partition

    def to_dict(self) -> dict[str, Any]:
        return {
            "throughput": self.throughput,
            "interval": self.interval,
            "status": self.status,
            "cost": self.cost,
            "latency": self.latency,
            "path": list(self.path),
            "partition": list(self.partition),
        }


@dataclass(frozen=True)
class FrontierChange:
    """The optimal deployment changes between the rates ``low`` and ``high`` (``high / low - 1
    <= tol`` unless bisection stopped early)."""

    low: FrontierPoint
    high: FrontierPoint

    def to_dict(self) -> dict[str, Any]:
        return {
            "between": [self.low.throughput, self.high.throughput],
            "before": {"path": list(self.low.path), "partition": list(self.low.partition)},
            "after": {"path": list(self.high.path), "partition": list(self.high.partition)},
            "path_changes": self.low.path != self.high.path,
        }


@dataclass(frozen=True)
class Frontier:
    """Least cost against target throughput, sorted by throughput, with the changes of the
    optimal deployment."""

    method: str
    points: tuple[FrontierPoint, ...]
    changes: tuple[FrontierChange, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "points": [p.to_dict() for p in self.points],
            "changes": [c.to_dict() for c in self.changes],
        }


def _point(solve: Any, inst: CodesignInstance, rate: float) -> FrontierPoint:
    try:
        plan: Plan = solve(inst, 1.0 / rate)
    except Infeasible:
        return FrontierPoint(rate, math.inf, (), (), "infeasible")
    return FrontierPoint(rate, plan.cost, plan.path, plan.partition, plan.status, plan.latency)


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
    if not get_method(method).exact:
        exact = " or ".join(m.name for m in METHODS.values() if m.exact)
        raise InvalidArgument(f"needs an exact method ({exact}), got {method!r}", field="method")
    if not 2 <= points <= MAX_POINTS:
        raise InvalidArgument(
            f"must be at least 2 and at most {MAX_POINTS} (one exact solve each), got {points}",
            field="points",
        )
    base = 0.0
    if low is None or high is None:
        # T* by the state graph, or on a network with cycles by the MILP, among the
        # deployments that fit the most memory the nodes can have
        roomy = inst.with_memory(most_memory(inst))
        best = throughput_optimal(roomy) if inst.acyclic else throughput_milp(roomy)
        base = 1.0 / best.interval
    low = base if low is None else low
    high = 4.0 * base if high is None else high
    if not (0 < low < high and math.isfinite(high)):
        raise InvalidArgument(
            f"the range of rates must be positive and increasing, got {low!r} to {high!r} "
            "inferences/s",
            field="low",
        )
    solve = METHODS[method].solve
    found = {rate: _point(solve, inst, rate) for rate in np.linspace(low, high, points).tolist()}
    sweep = sorted(found.values(), key=lambda p: p.throughput)
    changes = []
    for left, right in itertools.pairwise(sweep):
        if left.deployment == right.deployment:
            continue
        while right.throughput / left.throughput - 1 > tol:
            middle = _point(solve, inst, 0.5 * (left.throughput + right.throughput))
            found[middle.throughput] = middle
            if middle.deployment == left.deployment:
                left = middle
            else:
                right = middle
        changes.append(FrontierChange(left, right))
    return Frontier(
        method=method,
        points=tuple(sorted(found.values(), key=lambda p: p.throughput)),
        changes=tuple(changes),
    )
