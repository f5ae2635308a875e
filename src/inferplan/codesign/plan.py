"""Results of the co-design solvers, and the arithmetic of one deployment's stages."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from inferplan.codesign.instance import CodesignInstance
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost

__all__ = [
    "STATUSES",
    "Bottleneck",
    "Deployment",
    "LinkUpgrade",
    "Plan",
    "PlanStatus",
    "added",
    "build_plan",
    "check_scale",
    "deployment_interval",
    "infeasible",
    "path_links",
    "plan_from_path",
    "slowest_stage",
    "stage_delays",
    "stage_increments",
]

FloatArray = npt.NDArray[np.float64]

# Relative slack when comparing an achieved interval with a target: increments are computed to
# hit the target exactly, and floating-point rounding may land a hair above it.
INTERVAL_RTOL = 1e-9

# Relative slack when comparing a purchase with its cost's cap: a solver that buys exactly up
# to a cap computes the amount in floating point and may land a hair above it.
CAP_RTOL = 1e-9

PlanStatus = Literal["optimal", "heuristic", "time_limit"]
STATUSES: tuple[PlanStatus, ...] = ("optimal", "heuristic", "time_limit")
"""What a plan's cost is known to be: ``optimal`` (an exact method proved it), ``heuristic``
(a baseline's plan, no claim of optimality), ``time_limit`` (an exact method stopped at its time
limit; the best plan found so far)."""


@dataclass(frozen=True)
class Bottleneck:
    """The stage that sets a deployment's output interval: a node's compute or a link's
    transfer. ``id`` is the node id, or ``"u->v"`` for the link from ``u`` to ``v``. When
    several stages are equally slow, the first along the path (a node before its out-link)."""

    kind: Literal["node", "link"]
    id: str

    def to_dict(self) -> dict[str, str]:
        return {"kind": self.kind, "id": self.id}


@dataclass(frozen=True)
class Deployment:
    """A path through the network and its partition points.

    ``partition[l]`` is the number of blocks completed up to and including ``path[l]``; the
    last entry is ``N``. ``interval`` is the output interval in seconds under the capacities
    the deployment was evaluated with, and ``bottleneck`` the stage that sets it.
    """

    path: tuple[str, ...]
    partition: tuple[int, ...]
    interval: float
    bottleneck: Bottleneck | None = None

    @property
    def throughput(self) -> float:
        """Inferences per second, ``1 / interval``."""
        return 1.0 / self.interval if self.interval > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "throughput": self.throughput,
            "path": list(self.path),
            "partition": list(self.partition),
            "bottleneck": self.bottleneck.to_dict() if self.bottleneck else None,
        }


@dataclass(frozen=True)
class LinkUpgrade:
    """Bandwidth (bit/s) added to the link ``source -> target``."""

    source: str
    target: str
    amount: float


@dataclass(frozen=True)
class Plan:
    """A provisioning plan: where the DNN runs and what capacity to buy.

    Attributes
    ----------
    method
        The solver that made it (``psg``, ``pfp``, ``pwf``, ...).
    status
        ``"optimal"``, ``"heuristic"`` or ``"time_limit"`` (see :data:`STATUSES`). A request
        that no plan can meet raises :class:`~inferplan.errors.Infeasible` instead, whatever
        the method.
    cost
        Total price of the upgrades.
    interval
        The deployment's output interval (s) after the upgrades.
    target_interval
        The interval ``beta`` that was asked for.
    path, partition
        The deployment (see :class:`Deployment`).
    node_upgrades
        Compute (FLOP/s) added per node id; only non-zero amounts.
    link_upgrades
        Bandwidth (bit/s) added per link; only non-zero amounts.
    bottleneck
        The stage that sets ``interval`` after the upgrades (see :class:`Bottleneck`).
    """

    method: str
    status: PlanStatus
    cost: float
    interval: float
    target_interval: float
    path: tuple[str, ...]
    partition: tuple[int, ...]
    node_upgrades: Mapping[str, float] = field(default_factory=dict)
    link_upgrades: tuple[LinkUpgrade, ...] = ()
    bottleneck: Bottleneck | None = None

    @property
    def feasible(self) -> bool:
        """Whether the plan meets its target interval."""
        return self.interval <= self.target_interval * (1 + INTERVAL_RTOL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "status": self.status,
            "cost": self.cost,
            "interval": self.interval,
            "target_interval": self.target_interval,
            "path": list(self.path),
            "partition": list(self.partition),
            "node_upgrades": dict(self.node_upgrades),
            "link_upgrades": [
                {"source": u.source, "target": u.target, "amount": u.amount}
                for u in self.link_upgrades
            ],
            "bottleneck": self.bottleneck.to_dict() if self.bottleneck else None,
        }


def check_scale(inst: CodesignInstance, beta: float) -> None:
    """Refuse a target whose capacities or prices overflow floating point.

    Meeting ``beta`` may need up to ``S_N / beta`` FLOP/s on a node and ``max D / beta`` bit/s
    on a link, priced at up to the largest unit price. Beyond ``1.8e308`` the solvers could
    only answer ``inf``, which would read as "infeasible"; almost always the units are off.

    Raises
    ------
    InvalidArgument
        If any of those magnitudes is not a finite float.
    """
    S, D, _, _ = inst.scalars
    compute = S[-1] / beta
    bandwidth = max(D) / beta
    node_price, link_price = inst.highest_prices
    priciest = max(node_price * compute, link_price * bandwidth)
    if not all(math.isfinite(x) for x in (compute, bandwidth, priciest)):
        raise InvalidArgument(
            f"an interval of {beta:g} s needs capacities or costs beyond floating point "
            f"(up to {compute:.3g} FLOP/s and {bandwidth:.3g} bit/s): check the units of the "
            "target, the profile and the network",
            field="interval",
        )


def infeasible(beta: float, detail: str = "") -> Infeasible:
    """The error every method raises when no plan it can make meets ``beta`` within the caps."""
    more = f" ({detail})" if detail else ""
    return Infeasible(f"no plan reaches an interval of {beta:g} s within the capacity caps{more}")


def path_links(inst: CodesignInstance, path: Sequence[int]) -> list[int]:
    """The links joining consecutive nodes of ``path`` (indices)."""
    return [inst.link_index(u, v) for u, v in itertools.pairwise(path)]


def stage_delays(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    capacity: FloatArray,
    bandwidth: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """Compute delays of each path node and transfer delays of each path link (seconds)."""
    S, D = inst.prefix_flops, inst.activation_bits
    b = np.asarray(partition)
    work = S[b] - S[np.concatenate(([0], b[:-1]))]
    compute = work / capacity[list(path)]
    links = path_links(inst, path)
    transfer = D[b[:-1]] / bandwidth[links] if links else np.zeros(0)
    return compute, transfer


def deployment_interval(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    capacity: FloatArray | None = None,
    bandwidth: FloatArray | None = None,
    **known: Any,
) -> float:
    """The output interval of ``partition`` along ``path``: its slowest stage (seconds), the
    first value of :func:`slowest_stage` (which describes the arguments)."""
    interval, _ = slowest_stage(inst, path, partition, capacity, bandwidth, **known)
    return interval


def slowest_stage(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    capacity: FloatArray | None = None,
    bandwidth: FloatArray | None = None,
    *,
    links: Sequence[int] | None = None,
    added_capacity: Mapping[int, float] | None = None,
    added_bandwidth: Mapping[int, float] | None = None,
) -> tuple[float, Bottleneck]:
    """The output interval of ``partition`` along ``path`` (``links`` its links, when known),
    its slowest stage (seconds), under ``capacity`` and ``bandwidth`` (the instance's own when
    not given) plus any ``added_capacity`` and ``added_bandwidth`` (by node and link index),
    and the stage that sets it (the first along the path among equals): the maximum of
    :func:`stage_delays`, in plain Python for the path's few stages."""
    S, D, own_capacity, own_bandwidth = inst.scalars
    C: Sequence[float] | FloatArray = own_capacity if capacity is None else capacity
    B: Sequence[float] | FloatArray = own_bandwidth if bandwidth is None else bandwidth
    more_C = added_capacity or {}
    more_B = added_bandwidth or {}
    links = path_links(inst, path) if links is None else links
    interval, where, done = -1.0, Bottleneck("node", inst.node_ids[path[0]]), 0
    for k, (v, b) in enumerate(zip(path, partition, strict=True)):
        compute = float((S[b] - S[done]) / (C[v] + more_C.get(v, 0.0)))
        if compute > interval:
            interval, where = compute, Bottleneck("node", inst.node_ids[v])
        if k < len(links):
            e = links[k]
            transfer = float(D[b] / (B[e] + more_B.get(e, 0.0)))
            if transfer > interval:
                link = inst.links[e]
                interval, where = transfer, Bottleneck("link", f"{link.source}->{link.target}")
        done = b
    return interval, where


def stage_increments(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    interval: float,
    capacity: FloatArray,
    bandwidth: FloatArray,
) -> tuple[FloatArray, FloatArray]:
    """The least compute (per path node) and bandwidth (per path link) that bring every stage
    of the deployment down to ``interval``: ``rho`` and ``sigma`` of the paper."""
    S, D = inst.prefix_flops, inst.activation_bits
    b = np.asarray(partition)
    work = S[b] - S[np.concatenate(([0], b[:-1]))]
    rho = np.maximum(0.0, work / interval - capacity[list(path)])
    links = path_links(inst, path)
    sigma = np.maximum(0.0, D[b[:-1]] / interval - bandwidth[links]) if links else np.zeros(0)
    return rho, sigma


def _price(cost: CapacityCost, amount: float) -> float:
    price = cost.linear_price
    if price is not None and amount <= cost.max_amount:
        return price * amount
    return float(cost(np.array([amount]))[0])


def added(amounts: FloatArray) -> dict[int, float]:
    """The non-zero entries of an array of capacity added per node or link, by index."""
    return {int(k): float(amounts[k]) for k in np.flatnonzero(amounts > 0)}


def build_plan(
    inst: CodesignInstance,
    method: str,
    target_interval: float,
    path: Sequence[int],
    partition: Sequence[int],
    node_added: Mapping[int, float],
    link_added: Mapping[int, float],
    links: Sequence[int] | None = None,
    *,
    status: PlanStatus,
) -> Plan:
    """Round the requested increments (capacity per node and per link index; any node or
    link, not only the path's) to what the cost functions sell, price them, and check the
    resulting interval of ``partition`` along ``path`` (``links`` its links, when known): one
    place that turns any solver's choice into a :class:`Plan`.

    Plain Python on the path's few stages: on the paper's networks numpy's cost per call would
    outweigh the solve.

    Raises
    ------
    Infeasible
        If a purchase exceeds what its cost function can add (its cap): the plan cannot be
        bought, whichever method asked for it.
    """
    node_bought: dict[int, float] = {}
    link_bought: dict[int, float] = {}
    prices: list[float] = []
    for bought, wanted, costs, name in (
        (node_bought, node_added, inst.node_costs, _node_name),
        (link_bought, link_added, inst.link_costs, _link_name),
    ):
        for k in sorted(wanted):
            if wanted[k] > 0:  # every cost is zero at zero: nothing to buy or price
                cost = costs[k]
                amount = cost.purchase(float(wanted[k]))
                if amount > cost.max_amount:
                    if amount > cost.max_amount * (1 + CAP_RTOL):
                        raise infeasible(
                            target_interval,
                            f"{method} needs {amount:.6g} more on {name(inst, k)}, "
                            f"which can add at most {cost.max_amount:.6g}",
                        )
                    amount = cost.max_amount
                bought[k] = amount
                prices.append(_price(cost, amount))
    interval, bottleneck = slowest_stage(
        inst, path, partition, links=links, added_capacity=node_bought, added_bandwidth=link_bought
    )
    return Plan(
        method=method,
        status=status,
        cost=math.fsum(prices),
        interval=interval,
        target_interval=target_interval,
        path=tuple(inst.node_ids[v] for v in path),
        partition=tuple(int(b) for b in partition),
        node_upgrades={inst.node_ids[v]: x for v, x in node_bought.items() if x > 0},
        link_upgrades=tuple(
            LinkUpgrade(inst.links[e].source, inst.links[e].target, y)
            for e, y in link_bought.items()
            if y > 0
        ),
        bottleneck=bottleneck,
    )


def _node_name(inst: CodesignInstance, v: int) -> str:
    return f"node {inst.node_ids[v]!r}"


def _link_name(inst: CodesignInstance, e: int) -> str:
    return f"link {inst.links[e].label}"


def plan_from_path(
    inst: CodesignInstance,
    method: str,
    beta: float,
    path: Sequence[int],
    partition: Sequence[int],
    links: Sequence[int] | None = None,
    *,
    status: PlanStatus,
) -> Plan:
    """The plan that runs ``partition`` along ``path`` (node indices; ``links`` the links
    between them, when known), buying the least increments that bring every stage down to
    ``beta``: ``rho`` and ``sigma`` of the paper, as :func:`stage_increments` computes them."""
    S, D, C, B = inst.scalars
    links = path_links(inst, path) if links is None else links
    node_added: dict[int, float] = {}
    done = 0
    for v, b in zip(path, partition, strict=True):
        node_added[v] = max(0.0, (S[b] - S[done]) / beta - C[v])
        done = b
    link_added = {e: max(0.0, D[b] / beta - B[e]) for e, b in zip(links, partition, strict=False)}
    return build_plan(
        inst, method, beta, path, partition, node_added, link_added, links, status=status
    )
