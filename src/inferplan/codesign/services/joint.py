"""Several DNN services on one network: the joint provisioning problem, its exact pricing and
the public :func:`provision_services` (docs/services.md states the model).

Each service ``s`` runs its profile on one simple path from its own source to its own target
with a partition, as a single-service plan does, at its own target interval ``beta_s``. A node
or link that several services use time-shares its capacity between their pipelines, so it
needs the sum of their rates: node ``v`` needs ``sum_s W_(s,v) / beta_s`` FLOP/s and link
``e`` needs ``sum_s D_(s,e) / beta_s`` bit/s. A node holds every service that runs or
forwards there at once, so its memory needs add up: ``sum_s need_s(a_s, b_s)`` bytes. What
a plan buys on each element is the excess of that need over the capacity (or memory), priced
by the element's cost function; :class:`JointProblem` is the one place that arithmetic is
written (both planners' plans, the study's baselines).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from inferplan.codesign.instance import CodesignInstance, compile_instance
from inferplan.codesign.memory import path_needs
from inferplan.codesign.methods import get_service_method
from inferplan.codesign.plan import (
    CAP_RTOL,
    INTERVAL_RTOL,
    PlanStatus,
    caps_allow,
    check_scale,
    cut_fields,
    cut_indices,
    cut_lists,
)
from inferplan.codesign.stages import stage_units, stages
from inferplan.codesign.timing.measured import MeasuredBlocks
from inferplan.codesign.timing.stage import FLOPS_OVER_CAPACITY, NodeTimeModel, PerNodeTimeModel
from inferplan.errors import Infeasible, InferplanError, InvalidArgument, NetworkHasCycle
from inferplan.network.costs import CapacityCost, FunctionCost
from inferplan.network.network import Network
from inferplan.profiles.ideals import CutKind
from inferplan.profiles.profile import Profile

__all__ = [
    "CERTIFIED_GAP",
    "JointProblem",
    "Service",
    "ServiceDeployment",
    "ServicesPlan",
    "check_services",
    "no_joint_plan",
    "provision_services",
    "services_beyond_caps",
]


@dataclass(frozen=True)
class Service:
    """One DNN service: its ``profile`` served from ``source`` to ``target`` every
    ``interval`` seconds (``1 / throughput``), each inference within ``latency`` seconds when
    given (its latency at the plan's capacities, as :attr:`ServiceDeployment.latency`), each
    stage taking what ``node_time`` says on its node (the FLOPs over the capacity by default;
    :mod:`inferplan.codesign.timing`, e.g. seconds per block of this service's model
    measured on some nodes).

    Examples
    --------
    >>> import inferplan
    >>> Service("cams", inferplan.resnet50(), "s", "t", interval=1 / 30).throughput
    30.0
    """

    name: str
    profile: Profile
    source: str
    target: str
    interval: float
    latency: float | None = None
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY

    def __post_init__(self) -> None:
        where = f"service {self.name!r}"
        if not self.name:
            raise InvalidArgument("a service needs a non-empty name", field="name")
        if not (
            isinstance(self.interval, int | float)
            and math.isfinite(self.interval)
            and self.interval > 0
        ):
            raise InvalidArgument(
                f"interval must be a positive finite number, got {self.interval!r}", field=where
            )
        if self.latency is not None and (
            isinstance(self.latency, bool)
            or not isinstance(self.latency, int | float)
            or not (math.isfinite(self.latency) and self.latency > 0)
        ):
            raise InvalidArgument(
                f"latency must be a positive finite number of seconds, got {self.latency!r}",
                field=where,
            )

    @property
    def throughput(self) -> float:
        """Inferences per second, ``1 / interval``."""
        return 1.0 / self.interval


@dataclass(frozen=True)
class ServiceDeployment:
    """Where one service runs: its ``path`` and ``partition`` or ``ideals`` (as in a
    single-service plan: block counts on a chain, ideal numbers at ideals of a layer graph),
    the ``interval`` it achieves once the plan's capacity is bought and shared, the
    ``target_interval`` it asked for, and its ``latency``: what one of its inferences takes
    when it finds the bought capacity idle (each stage at the element's whole capacity), and
    the ``target_latency`` it asked for (``None``: none);
    ``layers`` and ``cuts`` as in a single-service plan (what each path node runs, and whether
    the partition counts blocks or indexes ideals)."""

    name: str
    path: tuple[str, ...]
    partition: tuple[int, ...] | None
    interval: float
    target_interval: float
    latency: float | None = None
    layers: tuple[tuple[str, ...], ...] = ()
    cuts: CutKind = "chain"
    target_latency: float | None = None
    ideals: tuple[int, ...] | None = None

    @property
    def cut_indices(self) -> tuple[int, ...]:
        """As :attr:`~inferplan.codesign.plan.Deployment.cut_indices`."""
        return cut_indices(self.cuts, self.partition, self.ideals)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "path": list(self.path),
            **cut_lists(self.partition, self.ideals),
            "interval": self.interval,
            "target_interval": self.target_interval,
            "latency": self.latency,
            "target_latency": self.target_latency,
            "cuts": self.cuts,
            "layers": [list(names) for names in self.layers],
        }


@dataclass(frozen=True)
class ServicesPlan:
    """A joint provisioning plan for several services.

    Attributes
    ----------
    method
        ``"milp"`` or ``"fast"`` (:data:`~inferplan.codesign.methods.SERVICE_METHODS`).
    status
        ``"optimal"`` (its cost is proven within :data:`CERTIFIED_GAP` of ``lower_bound``),
        ``"heuristic"`` (the fast planner, with a gap), ``"time_limit"`` or ``"uncertified"``
        (the MILP, as for one service).
    cost
        Exact price of the upgrades.
    lower_bound
        A proven lower bound on the optimal cost (``cost`` itself when optimal).
    services
        Each service's deployment, in the order given.
    node_upgrades, link_upgrades
        Compute (FLOP/s) added per node id and bandwidth (bit/s) per link ``(source,
        target)``; only non-zero amounts.
    node_loads, link_loads
        What each used node and link carries, summed over the services (FLOP/s, bit/s).
    memory_upgrades, memory_loads
        Memory (bytes) added per node id, only non-zero amounts; and what each used node
        holds, summed over the services that run or forward there (bytes: their needs add
        up).
    """

    method: str
    status: PlanStatus
    cost: float
    lower_bound: float
    services: tuple[ServiceDeployment, ...]
    node_upgrades: Mapping[str, float]
    link_upgrades: Mapping[tuple[str, str], float]
    node_loads: Mapping[str, float]
    link_loads: Mapping[tuple[str, str], float]
    memory_upgrades: Mapping[str, float] = field(default_factory=dict)
    memory_loads: Mapping[str, float] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """``(cost - lower_bound) / cost``, the most the plan may be above the optimum
        (0 for a free plan)."""
        if self.cost == 0.0:
            return 0.0
        return max(0.0, (self.cost - self.lower_bound) / self.cost)

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "method": self.method,
            "cost": self.cost,
            "lower_bound": self.lower_bound,
            "gap": self.gap,
            "services": [s.to_dict() for s in self.services],
            "node_upgrades": dict(self.node_upgrades),
            "link_upgrades": [
                {"source": u, "target": v, "amount": x} for (u, v), x in self.link_upgrades.items()
            ],
            "memory_upgrades": dict(self.memory_upgrades),
            "loads": {
                "nodes": dict(self.node_loads),
                "links": [
                    {"source": u, "target": v, "load": x} for (u, v), x in self.link_loads.items()
                ],
                "memory": dict(self.memory_loads),
            },
        }


CERTIFIED_GAP = 1e-6
"""A joint plan is ``"optimal"`` when its exact cost is within this fraction of a proven
lower bound. Looser than the single-service MILP's 1e-8: the shared needs are continuous
variables of the MILP, good to HiGHS's feasibility tolerance (1e-9 of each capacity), which
the certificate allows for once per column in use."""


# A deployment of one service: node indices of its instance along the path, and its partition.
Choice = tuple[tuple[int, ...], tuple[int, ...]]


class JointProblem:
    """The services compiled for the solvers: one :class:`CodesignInstance` per service
    (the network with the service's source and target), and the exact joint price of a
    choice of one deployment per service.

    Elements are named by the network's order: node ``k`` is ``network.nodes[k]``, link ``k``
    is ``network.links[k]``; :meth:`node_of` and :meth:`link_of` map each instance's indices
    to them.
    """

    def __init__(
        self, network: Network, services: Sequence[Service], *, require_acyclic: bool
    ) -> None:
        check_services(network, services)
        self.network = network
        self.services = tuple(services)
        node_index = {n.id: k for k, n in enumerate(network.nodes)}
        link_index = {(e.source, e.target): k for k, e in enumerate(network.links)}
        self.instances: tuple[CodesignInstance, ...] = tuple(
            _compile(network, s, require_acyclic) for s in services
        )
        for service, inst in zip(services, self.instances, strict=True):
            try:  # here, so that the error names the service, not a planner's interval
                check_scale(inst, service.interval)
            except InvalidArgument as exc:
                raise InvalidArgument(exc.message, field=f"service {service.name!r}") from None
        self.node_of = tuple(
            np.array([node_index[v] for v in inst.node_ids], dtype=np.int64)
            for inst in self.instances
        )
        self.link_of = tuple(
            np.array([link_index[(e.source, e.target)] for e in inst.links], dtype=np.int64)
            for inst in self.instances
        )
        self.capacity = np.array([n.capacity for n in network.nodes], dtype=np.float64)
        self.bandwidth = np.array([e.capacity for e in network.links], dtype=np.float64)
        self.node_costs = tuple(n.capacity_cost for n in network.nodes)
        self.link_costs = tuple(e.capacity_cost for e in network.links)
        self.memory = np.array(network.node_memory, dtype=np.float64)
        self.memory_costs = tuple(network.node_memory_cost(k) for k in range(len(network.nodes)))
        for costs, kind in ((self.node_costs, "node"), (self.link_costs, "link"),
                            (self.memory_costs, "node")):  # fmt: skip
            for k, cost in enumerate(costs):
                if isinstance(cost, FunctionCost):
                    name = network.nodes[k].id if kind == "node" else network.links[k].label
                    raise InvalidArgument(
                        f"a function cost ({cost.name!r}) cannot be priced on a shared need; "
                        "joint planning takes linear, modules and tiers costs",
                        field=f"{kind} {name}",
                    )

    @property
    def intervals(self) -> list[float]:
        return [s.interval for s in self.services]

    def loads(self, choices: Sequence[Choice | None]) -> tuple[FloatDict, FloatDict]:
        """What each node and link carries (FLOP/s, bit/s), summed over the services that have
        a choice (``None``: a service left out), by element index."""
        node: FloatDict = {}
        link: FloatDict = {}
        for s, choice in enumerate(choices):
            if choice is None:
                continue
            inst, beta = self.instances[s], self.services[s].interval
            run = stages(inst, choice[0], choice[1])
            for v, w in zip(run.nodes, run.work, strict=True):
                if w > 0:
                    k = int(self.node_of[s][v])
                    node[k] = node.get(k, 0.0) + w / beta
            for e, d in zip(run.links, run.bits, strict=True):
                if d > 0:
                    k = int(self.link_of[s][e])
                    link[k] = link.get(k, 0.0) + d / beta
        return node, link

    def memory_loads(self, choices: Sequence[Choice | None]) -> FloatDict:
        """What each node holds (bytes), summed over the services that have a choice: each
        one's need there (:func:`~inferplan.codesign.memory.path_needs`), by node index."""
        held: FloatDict = {}
        for s, choice in enumerate(choices):
            if choice is None:
                continue
            needs = path_needs(self.instances[s], choice[0], choice[1])
            for v, need in zip(choice[0], needs, strict=True):
                k = int(self.node_of[s][v])
                held[k] = held.get(k, 0.0) + need
        return held

    def cost(self, choices: Sequence[Choice]) -> float:
        """The exact price of ``choices`` (``inf`` when a cap is exceeded)."""
        node, link = self.loads(choices)
        prices = [
            _price(self.node_costs[k], max(0.0, x - self.capacity[k])) for k, x in node.items()
        ]
        prices += [
            _price(self.link_costs[k], max(0.0, x - self.bandwidth[k])) for k, x in link.items()
        ]
        prices += [
            _price(self.memory_costs[k], max(0.0, x - self.memory[k]))
            for k, x in self.memory_loads(choices).items()
        ]
        return math.fsum(prices)

    def plan(
        self,
        method: str,
        status: PlanStatus,
        choices: Sequence[Choice],
        lower_bound: float,
        added: tuple[FloatDict, FloatDict] | None = None,
    ) -> ServicesPlan:
        """The :class:`ServicesPlan` of ``choices``: upgrades bought (whole modules where sold
        so), priced exactly, and each service's interval under its share of the capacity.
        ``added``: compute and bandwidth (by element index) to buy at least, beyond the
        needs (what latency bounds ask for).

        Raises
        ------
        Infeasible
            If a purchase exceeds what its cost function can add.
        """
        node, link = self.loads(choices)
        held = self.memory_loads(choices)
        bought: list[FloatDict] = [{}, {}, {}]
        prices: list[float] = []
        for side, (loads, have, costs) in enumerate(
            ((node, self.capacity, self.node_costs), (link, self.bandwidth, self.link_costs),
             (held, self.memory, self.memory_costs))
        ):  # fmt: skip
            for k, need in loads.items():
                excess = need - float(have[k])
                if added is not None and side < 2:
                    excess = max(excess, added[side].get(k, 0.0))
                if excess <= 0:
                    continue
                cost = costs[k]
                amount = cost.purchase(excess)
                if amount > cost.max_amount:
                    if amount > cost.max_amount * (1 + CAP_RTOL):
                        what = (
                            f"link {self.network.links[k].label}"
                            if side == 1
                            else f"{'the memory of ' if side == 2 else ''}node "
                            f"{self.network.nodes[k].id!r}"
                        )
                        raise no_joint_plan(
                            self,
                            f"the services need {amount:.6g} more on {what}, which can add at "
                            f"most {cost.max_amount:.6g}",
                        )
                    amount = cost.max_amount
                bought[side][k] = amount
                prices.append(_price(cost, amount))
        cost_total = math.fsum(prices)
        deployments = []
        for s, (path, partition) in enumerate(choices):
            inst, service = self.instances[s], self.services[s]
            run = stages(inst, path, partition)
            node_k = self.node_of[s][list(run.nodes)].tolist()
            link_k = self.link_of[s][list(run.links)].tolist()
            shares = [
                service.interval * node[k] / (self.capacity[k] + bought[0].get(k, 0.0))
                for k, w in zip(node_k, run.work, strict=True)
                if w > 0
            ]
            shares += [
                service.interval * link[k] / (self.bandwidth[k] + bought[1].get(k, 0.0))
                for k, d in zip(link_k, run.bits, strict=True)
                if d > 0
            ]
            latency = run.latency(
                inst.capacity,
                inst.bandwidth,
                {v: bought[0].get(k, 0.0) for v, k in zip(run.nodes, node_k, strict=True)},
                {e: bought[1].get(k, 0.0) for e, k in zip(run.links, link_k, strict=True)},
            )
            blocks, ideals = cut_fields(inst.cuts.kind, partition)
            deployments.append(
                ServiceDeployment(
                    name=service.name,
                    path=tuple(inst.node_ids[v] for v in path),
                    partition=blocks,
                    ideals=ideals,
                    interval=float(max(shares, default=0.0)),
                    target_interval=service.interval,
                    latency=latency,
                    layers=stage_units(inst, partition),
                    cuts=inst.cuts.kind,
                    target_latency=service.latency,
                )
            )
        nodes, links = self.network.nodes, self.network.links
        return ServicesPlan(
            method=method,
            status=status,
            cost=cost_total,
            lower_bound=min(max(lower_bound, 0.0), cost_total),
            services=tuple(deployments),
            node_upgrades={nodes[k].id: x for k, x in sorted(bought[0].items()) if x > 0},
            link_upgrades={
                (links[k].source, links[k].target): x for k, x in sorted(bought[1].items()) if x > 0
            },
            node_loads={nodes[k].id: x for k, x in sorted(node.items())},
            link_loads={(links[k].source, links[k].target): x for k, x in sorted(link.items())},
            memory_upgrades={nodes[k].id: x for k, x in sorted(bought[2].items()) if x > 0},
            memory_loads={nodes[k].id: x for k, x in sorted(held.items())},
        )


FloatDict = dict[int, float]


def _price(cost: CapacityCost, amount: float) -> float:
    """``cost`` of adding ``amount`` (``inf`` beyond its cap, with the plans' slack)."""
    if amount <= 0.0:
        return 0.0
    if amount > cost.max_amount and amount <= cost.max_amount * (1 + CAP_RTOL):
        amount = cost.max_amount
    return float(cost(np.array([amount]))[0])


def _compile(network: Network, service: Service, require_acyclic: bool) -> CodesignInstance:
    try:
        own = network.with_endpoints(service.source, service.target)
        return compile_instance(own, service.profile, require_acyclic=require_acyclic,
                                node_time=service.node_time)  # fmt: skip
    except NetworkHasCycle as exc:
        raise NetworkHasCycle(exc.message, field=f"service {service.name!r}") from None
    except InferplanError as exc:  # the service's target unreachable from its source
        raise InvalidArgument(exc.message, field=f"service {service.name!r}") from None


def check_services(network: Network, services: Sequence[Service]) -> None:
    """Refuse an empty list, a duplicate name, a source or target that is not a node of
    ``network`` (or from which the target cannot be reached), or measured node times of a
    node not in it, naming the service.

    Raises
    ------
    InvalidArgument
        With ``field`` ``service 'NAME'``.
    """
    if not services:
        raise InvalidArgument("give at least one service", field="services")
    names: set[str] = set()
    nodes = network.node_by_id
    for service in services:
        where = f"service {service.name!r}"
        if service.name in names:
            raise InvalidArgument(f"duplicate service name {service.name!r}", field=where)
        names.add(service.name)
        for end in ("source", "target"):
            node = getattr(service, end)
            if node not in nodes:
                raise InvalidArgument(f"{end} {node!r} is not a node of the network", field=where)
        if service.source == service.target:
            raise InvalidArgument(
                f"source and target must differ, both are {service.source!r}", field=where
            )
        if isinstance(service.node_time, MeasuredBlocks):
            for node, _ in service.node_time.seconds:
                if node not in nodes:
                    raise InvalidArgument(f"its node times measure node {node!r}, which is not "
                                          "a node of the network", field=where)  # fmt: skip


def provision_services(
    network: Network,
    services: Sequence[Service],
    *,
    method: str = "milp",
    time_limit: float | None = None,
    seed: int | None = None,
) -> ServicesPlan:
    """Plan the cheapest capacity upgrades that let several services share ``network``.

    Parameters
    ----------
    network
        The compute network (its own source and target are not used).
    services
        The services, each with its profile, source, target and interval.
    method
        ``"milp"`` (exact on any network) or ``"fast"`` (best responses with PSG and a proven
        lower bound; acyclic networks): :data:`~inferplan.codesign.methods.SERVICE_METHODS`.
    time_limit
        ``"milp"`` only: seconds HiGHS may take; at the limit the plan has status
        ``"time_limit"``.
    seed
        ``"fast"`` only: the seed of its random service orders (default 0).

    Returns
    -------
    ServicesPlan
        With ``cost``, ``lower_bound`` and ``status``.

    Raises
    ------
    Infeasible
        If no plan meets every service's interval within the capacity caps (the MILP proves
        it; the fast planner raises it when even the services' bound has no plan, or when none
        of its starts found one).
    InvalidArgument
        For a bad service (naming it), an unknown method or an option it does not take.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign.services.joint import Service, provision_services
    >>> net = inferplan.tiered(seed=7)
    >>> services = [Service("a", inferplan.vgg16(), "s", "t", interval=0.5),
    ...             Service("b", inferplan.alexnet(), "s", "t", interval=0.1)]
    >>> exact = provision_services(net, services)
    >>> fast = provision_services(net, services, method="fast")
    >>> exact.status, fast.lower_bound <= exact.cost <= fast.cost * (1 + 1e-6)
    ('optimal', True)
    """
    chosen = get_service_method(method)
    given = {k: v for k, v in {"time_limit": time_limit, "seed": seed}.items() if v is not None}
    for key in given:
        if key not in chosen.options:
            takes = ", ".join(chosen.options) or "no options"
            raise InvalidArgument(
                f"method {method!r} does not take {key} (it takes: {takes})", field=key
            )
    problem = JointProblem(network, services, require_acyclic=chosen.acyclic_only)
    try:
        plan: ServicesPlan = chosen.solve(problem, **given)
    except Infeasible as error:
        raise services_beyond_caps(error, problem) from None
    return plan


def services_beyond_caps(error: Infeasible, problem: JointProblem) -> Infeasible:
    """``error`` (no joint plan) told what the caps allow each service alone
    (:func:`~inferplan.codesign.plan.caps_allow`: its best interval with every element at its
    cap, and the caps that bind it). The message names the services that miss their interval
    even alone, with their binding caps; when every one meets it alone, it says that the
    caps they share are what binds. ``details["services"]`` holds, per service, its ``name``,
    ``interval``, and ``best_interval``, ``binding``, ``at_caps`` (``None`` where not even the
    caps fit its model's memory)."""
    from inferplan.codesign.provision import best_at_caps

    alone: list[dict[str, Any]] = []
    missed: list[str] = []
    fits: list[str] = []
    for service, inst in zip(problem.services, problem.instances, strict=True):
        found = best_at_caps(inst)
        entry: dict[str, Any] = {"name": service.name, "interval": service.interval}
        if found is None:
            entry.update(best_interval=None, binding=[], at_caps=None)
            missed.append(f"service {service.name!r} does not fit in memory even at the caps")
        else:
            allowed = caps_allow(*found)
            entry.update(allowed.details())
            if allowed.interval > service.interval * (1 + INTERVAL_RTOL):
                missed.append(f"service {service.name!r} alone: {allowed.says}")
            else:
                fits.append(f"{service.name} {allowed.interval:.4g} s")
        alone.append(entry)
    proven = error.details.get("proven", True)
    if missed:
        said = "; ".join(missed)
    else:
        said = f"each service alone meets its interval within the caps (at best: {', '.join(fits)})"
        bounded = any(service.latency is not None for service in problem.services)
        what = "the caps they share or their latency bounds bind" if bounded else (
            "the caps they share bind")  # fmt: skip
        said += f": {what}" if proven else ""
    return Infeasible(f"{error.message}; {said}", source=error.source, field=error.field,
                      details={**error.details, "services": alone})  # fmt: skip


def no_joint_plan(problem: JointProblem, detail: str = "", *, proven: bool = True) -> Infeasible:
    """The :class:`Infeasible` of a joint problem, naming the services' intervals; with
    ``proven=False`` (a heuristic found no plan) it says one may still exist."""
    targets = ", ".join(f"{s.name} {s.interval:g} s" for s in problem.services)
    more = f" ({detail})" if detail else ""
    if not proven:
        return Infeasible(
            f"the fast planner found no plan serving every service ({targets}) within the "
            f"capacity caps; one may still exist: method 'milp' decides{more}",
            details={"proven": False},
        )
    return Infeasible(f"no plan serves every service ({targets}) within the capacity caps{more}")
