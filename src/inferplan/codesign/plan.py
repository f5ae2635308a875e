"""Results of the co-design solvers, and the arithmetic of one deployment's stages."""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from inferplan.codesign.costs import CapacityCost
from inferplan.codesign.instance import CodesignInstance
from inferplan.errors import InvalidArgument

__all__ = [
    "Deployment",
    "LinkUpgrade",
    "Plan",
    "check_scale",
    "stage_delays",
    "stage_increments",
]

FloatArray = npt.NDArray[np.float64]

# Relative slack when comparing an achieved interval with a target: increments are computed to
# hit the target exactly, and floating-point rounding may land a hair above it.
INTERVAL_RTOL = 1e-9


@dataclass(frozen=True)
class Deployment:
    """A path through the network and its partition points.

    ``partition[l]`` is the number of blocks completed up to and including ``path[l]``; the
    last entry is ``N``. ``interval`` is the output interval in seconds under the capacities
    the deployment was evaluated with.
    """

    path: tuple[str, ...]
    partition: tuple[int, ...]
    interval: float

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
    """

    method: str
    cost: float
    interval: float
    target_interval: float
    path: tuple[str, ...]
    partition: tuple[int, ...]
    node_upgrades: Mapping[str, float] = field(default_factory=dict)
    link_upgrades: tuple[LinkUpgrade, ...] = ()

    @property
    def feasible(self) -> bool:
        """Whether the plan meets its target interval."""
        return self.interval <= self.target_interval * (1 + INTERVAL_RTOL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
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
    compute = float(inst.prefix_flops[-1]) / beta
    bandwidth = float(inst.activation_bits.max()) / beta
    with np.errstate(over="ignore"):
        priciest = max(
            float(np.max(inst.node_pricing.price, initial=0.0)) * compute,
            float(np.max(inst.link_pricing.price, initial=0.0)) * bandwidth,
        )
    if not all(math.isfinite(x) for x in (compute, bandwidth, priciest)):
        raise InvalidArgument(
            f"an interval of {beta:g} s needs capacities or costs beyond floating point "
            f"(up to {compute:.3g} FLOP/s and {bandwidth:.3g} bit/s): check the units of the "
            "target, the profile and the network",
            field="interval",
        )


def _path_links(inst: CodesignInstance, path: Sequence[int]) -> list[int]:
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
    links = _path_links(inst, path)
    transfer = D[b[:-1]] / bandwidth[links] if links else np.zeros(0)
    return compute, transfer


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
    links = _path_links(inst, path)
    sigma = np.maximum(0.0, D[b[:-1]] / interval - bandwidth[links]) if links else np.zeros(0)
    return rho, sigma


def _price(cost: CapacityCost, amount: float) -> float:
    price = cost.linear_price
    if price is not None and amount <= cost.max_amount:
        return price * amount
    return float(cost(np.array([amount]))[0])


def build_plan(
    inst: CodesignInstance,
    method: str,
    target_interval: float,
    path: Sequence[int],
    partition: Sequence[int],
    node_added: FloatArray,
    link_added: FloatArray,
) -> Plan:
    """Round the requested increments to what the cost functions sell, price them, and check
    the resulting interval: one place that turns any solver's choice into a :class:`Plan`."""
    # Only what was requested is bought and priced (every cost is zero at zero): on large
    # networks calling each element's cost function would outweigh the solve.
    nodes = np.flatnonzero(node_added > 0).tolist()
    links = np.flatnonzero(link_added > 0).tolist()
    node_bought = [inst.node_costs[v].purchase(float(node_added[v])) for v in nodes]
    link_bought = [inst.link_costs[e].purchase(float(link_added[e])) for e in links]
    cost = math.fsum(
        [_price(inst.node_costs[v], x) for v, x in zip(nodes, node_bought, strict=True)]
        + [_price(inst.link_costs[e], y) for e, y in zip(links, link_bought, strict=True)]
    )
    capacity, bandwidth = inst.capacity.copy(), inst.bandwidth.copy()
    capacity[nodes] += node_bought
    bandwidth[links] += link_bought
    compute, transfer = stage_delays(inst, path, partition, capacity, bandwidth)
    interval = float(max(compute.max(), transfer.max() if transfer.size else 0.0))
    bought_nodes = dict(zip(nodes, node_bought, strict=True))
    bought_links = dict(zip(links, link_bought, strict=True))
    return Plan(
        method=method,
        cost=cost,
        interval=interval,
        target_interval=target_interval,
        path=tuple(inst.node_ids[v] for v in path),
        partition=tuple(int(b) for b in partition),
        node_upgrades={inst.node_ids[v]: x for v, x in bought_nodes.items() if x > 0},
        link_upgrades=tuple(
            LinkUpgrade(inst.links[e].source, inst.links[e].target, y)
            for e, y in bought_links.items()
            if y > 0
        ),
    )
