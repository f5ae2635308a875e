"""Results of the co-design solvers, and turning a solver's choice into a priced plan."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Generic, Literal, TypeVar, get_args, overload

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.instance import CodesignInstance, Pricing
from inferplan.codesign.memory import NodeMemory, most_memory, path_needs
from inferplan.codesign.stages import Stages, stage_sends, stage_units, stages
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.network.costs import CapacityCost, ModuleCost
from inferplan.profiles.ideals import CutKind
from inferplan.units import link_name, si

__all__ = [
    "STATUSES",
    "Bottleneck",
    "CapsAllow",
    "Deployment",
    "Later",
    "LinkUpgrade",
    "Plan",
    "PlanStatus",
    "added",
    "at_caps",
    "beyond_caps",
    "build_plan",
    "caps_allow",
    "check_scale",
    "cut_csv",
    "cut_fields",
    "cut_indices",
    "cut_lists",
    "infeasible",
    "plan_from_path",
]


# Relative slack when comparing an achieved interval with a target: increments are computed to
# hit the target exactly, and floating-point rounding may land a hair above it.
INTERVAL_RTOL = 1e-9

# Relative slack when comparing a purchase with its cost's cap: a solver that buys exactly up
# to a cap computes the amount in floating point and may land a hair above it.
CAP_RTOL = 1e-9

PlanStatus = Literal["optimal", "heuristic", "time_limit", "uncertified"]
STATUSES: tuple[PlanStatus, ...] = get_args(PlanStatus)
"""What a plan's cost is known to be: ``optimal`` (an exact method proved it), ``heuristic``
(a baseline's plan, no claim of optimality), ``time_limit`` (an exact method stopped at its time
limit; the best plan found so far), ``uncertified`` (an exact method finished but could not
prove its plan optimal to its stated gap: the MILP when HiGHS's lower bound stays further below
the plan's exact cost; the plan is the best it found, its cost exact)."""


def cut_fields(
    kind: CutKind, indices: Sequence[int]
) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """``(partition, ideals)`` of a deployment whose stages end at the cuts ``indices``
    (the planners' numbering of the model's cuts, :class:`~inferplan.profiles.ideals.Cuts`):
    on a chain the indices are block counts, the ``partition``, and there are no ``ideals``; at
    the ideals of a layer graph they are ideal numbers, the ``ideals``, and ``partition`` is
    ``None`` (an ideal need not end at a block boundary: a plan cut at ideals has no block
    count)."""
    cut = tuple(int(k) for k in indices)
    return (None, cut) if kind == "graph" else (cut, None)


def cut_lists(
    partition: Sequence[int] | None, ideals: Sequence[int] | None
) -> dict[str, list[int] | None]:
    """``partition`` and ``ideals`` as JSON writes them: lists, ``null`` for the one a
    deployment does not have."""
    return {"partition": None if partition is None else list(partition),
            "ideals": None if ideals is None else list(ideals)}  # fmt: skip


def cut_csv(cut: Sequence[int] | None) -> str:
    """A partition or ideals as one CSV cell: ``0,3,16``; empty when a deployment has none."""
    return ",".join(map(str, cut or ()))


def cut_indices(
    kind: CutKind, partition: tuple[int, ...] | None, ideals: tuple[int, ...] | None
) -> tuple[int, ...]:
    """The planners' cut numbers of a deployment (:func:`cut_fields` the other way)."""
    indices = ideals if kind == "graph" else partition
    if indices is None:  # every constructor here fills the field of its kind
        field = "ideals" if kind == "graph" else "partition"
        raise ValueError(f"a deployment cut by {kind} needs its {field}")
    return indices


T = TypeVar("T")


class Later(Generic[T]):
    """A value made on first read: what a :class:`Plan` or a :class:`Deployment` may be given
    for its ``layers``, ``sends`` and ``memory`` (names and tables most callers never read,
    which would otherwise cost more than a small solve). Pickled or copied as its value."""

    __slots__ = ("make",)

    def __init__(self, make: Callable[[], T]) -> None:
        self.make = make

    def __reduce__(self) -> tuple[Callable[[T], T], tuple[T]]:
        return _itself, (self.make(),)


def _itself(value: T) -> T:
    return value


class _Lazy(Generic[T]):
    """A dataclass field that may be given a :class:`Later`: read, it is the value, made once
    and kept. The field keeps its name, type and default (the dataclass reads the default
    from the class)."""

    def __init__(self, default: T) -> None:
        self.default = default
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, obj: None, owner: type | None = None) -> T: ...
    @overload
    def __get__(self, obj: object, owner: type | None = None) -> T: ...
    def __get__(self, obj: object | None, owner: type | None = None) -> T:
        if obj is None:
            return self.default
        value = obj.__dict__[self.name]
        if type(value) is Later:
            value = value.make()
            obj.__dict__[self.name] = value
        return value  # type: ignore[no-any-return]

    def __set__(self, obj: object, value: T | Later[T]) -> None:
        obj.__dict__[self.name] = value


Names = tuple[tuple[str, ...], ...]


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
    """A path through the network and where it cuts the model.

    On a chain (``cuts`` ``"chain"``) ``partition[l]`` is the number of blocks done up to and
    including ``path[l]`` (the last entry ``N``) and ``ideals`` is ``None``. Cut at the ideals
    of the layer graph (``cuts`` ``"graph"``) ``ideals[l]`` is the number of the ideal done up
    to ``path[l]`` (the planners' numbering, by size; the last entry the ideal holding every
    layer) and ``partition`` is ``None``: an ideal is no block count. :attr:`cut_indices` is
    whichever of the two the deployment has (see :func:`cut_fields`). ``layers[l]``
    names the blocks or layers ``path[l]`` runs and ``sends[l]`` the tensors (``input`` or
    the layers whose outputs) the link after it carries. ``interval`` is the output interval in
    seconds under the capacities the deployment was evaluated with, ``bottleneck`` the stage
    that sets it, and ``latency`` the seconds one inference takes through it (see
    :meth:`~inferplan.codesign.stages.Stages.latency`).
    """

    path: tuple[str, ...]
    partition: tuple[int, ...] | None
    interval: float
    bottleneck: _Lazy[Bottleneck | None] = _Lazy(None)
    latency: _Lazy[float | None] = _Lazy(None)
    layers: _Lazy[Names] = _Lazy(())
    sends: _Lazy[Names] = _Lazy(())
    cuts: CutKind = "chain"
    ideals: tuple[int, ...] | None = None

    @property
    def cut_indices(self) -> tuple[int, ...]:
        """The cut each path node ends at, in the planners' numbering: ``partition`` on a
        chain, ``ideals`` on a layer graph."""
        return cut_indices(self.cuts, self.partition, self.ideals)

    @property
    def throughput(self) -> float:
        """Inferences per second, ``1 / interval``."""
        return 1.0 / self.interval if self.interval > 0 else math.inf

    def to_dict(self) -> dict[str, Any]:
        return {
            "interval": self.interval,
            "throughput": self.throughput,
            "latency": self.latency,
            "path": list(self.path),
            **cut_lists(self.partition, self.ideals),
            "cuts": self.cuts,
            "layers": [list(names) for names in self.layers],
            "sends": [list(names) for names in self.sends],
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
        ``"optimal"``, ``"heuristic"``, ``"time_limit"`` or ``"uncertified"`` (see
        :data:`STATUSES`). A request that no plan can meet raises
        :class:`~inferplan.errors.Infeasible` instead, whatever the method.
    cost
        Total price of the upgrades.
    interval
        The deployment's output interval (s) after the upgrades.
    target_interval
        The interval ``beta`` that was asked for.
    path, partition, ideals, layers, sends, cuts
        The deployment (see :class:`Deployment`): ``partition`` block counts on a chain,
        ``None`` for a plan cut at ideals of the layer graph, whose ``ideals`` number them.
    node_upgrades
        Compute (FLOP/s) added per node id; only non-zero amounts.
    link_upgrades
        Bandwidth (bit/s) added per link; only non-zero amounts.
    bottleneck
        The stage that sets ``interval`` after the upgrades (see :class:`Bottleneck`).
    latency
        Seconds one inference takes through the deployment after the upgrades (compute,
        transfer and propagation delays; ``None`` only for a plan file that does not say).
    target_latency
        The latency bound that was asked for, if any.
    memory
        Each path node's memory need, its memory after the upgrades and the bytes added
        (see :class:`~inferplan.codesign.memory.NodeMemory`).
    """

    method: str
    status: PlanStatus
    cost: float
    interval: float
    target_interval: float
    path: tuple[str, ...]
    partition: tuple[int, ...] | None
    node_upgrades: Mapping[str, float] = field(default_factory=dict)
    link_upgrades: tuple[LinkUpgrade, ...] = ()
    bottleneck: Bottleneck | None = None
    latency: float | None = None
    target_latency: float | None = None
    layers: _Lazy[Names] = _Lazy(())
    sends: _Lazy[Names] = _Lazy(())
    cuts: CutKind = "chain"
    memory: _Lazy[tuple[NodeMemory, ...]] = _Lazy(())
    ideals: tuple[int, ...] | None = None

    @property
    def cut_indices(self) -> tuple[int, ...]:
        """As :attr:`Deployment.cut_indices`: ``partition`` on a chain, ``ideals`` on a layer
        graph."""
        return cut_indices(self.cuts, self.partition, self.ideals)

    @property
    def memory_upgrades(self) -> dict[str, float]:
        """Memory (bytes) added per node id; only non-zero amounts."""
        return {m.id: m.added for m in self.memory if m.added > 0}

    @property
    def feasible(self) -> bool:
        """Whether the plan meets its target interval (and its latency bound, if any)."""
        on_time = (
            self.target_latency is None
            or self.latency is None
            or self.latency <= self.target_latency * (1 + INTERVAL_RTOL)
        )
        return on_time and self.interval <= self.target_interval * (1 + INTERVAL_RTOL)

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "status": self.status,
            "cost": self.cost,
            "interval": self.interval,
            "target_interval": self.target_interval,
            "latency": self.latency,
            "target_latency": self.target_latency,
            "path": list(self.path),
            **cut_lists(self.partition, self.ideals),
            "cuts": self.cuts,
            "layers": [list(names) for names in self.layers],
            "sends": [list(names) for names in self.sends],
            "node_upgrades": dict(self.node_upgrades),
            "link_upgrades": [
                {"source": u.source, "target": u.target, "amount": u.amount}
                for u in self.link_upgrades
            ],
            "bottleneck": self.bottleneck.to_dict() if self.bottleneck else None,
            "memory_upgrades": self.memory_upgrades,
            "memory": [m.to_dict() for m in self.memory],
        }


def check_scale(inst: CodesignInstance, beta: float, cost: float | None = None) -> None:
    """Refuse a target whose capacities, or a plan whose costs, overflow floating point.

    Before solving (``cost=None``): meeting ``beta`` may need up to ``S_N / beta`` FLOP/s on
    a node and ``max D / beta`` bit/s on a link; beyond ``1.8e308`` the solvers could only
    answer ``inf``, which would read as "infeasible"; almost always the units are off.

    After solving, with the ``cost`` of the best plan found: a finite cost passes, however
    large other prices are (a node priced at ``1e300`` that the plan avoids is no reason to
    refuse). An infinite one is refused here when the largest unit price times those
    capacities overflows, so that ``inf`` may come from the arithmetic rather than from the
    capacity caps; otherwise the caller reports the target infeasible.

    Raises
    ------
    InvalidArgument
        If those magnitudes are not finite floats.
    """
    if cost is not None and math.isfinite(cost):
        return
    D, _, _ = inst.scalars
    compute = inst.most_work / beta
    bandwidth = max(D) / beta
    magnitudes = [compute, bandwidth]
    if cost is not None:
        node_price, link_price = inst.highest_prices
        magnitudes.append(max(node_price * compute, link_price * bandwidth))
    if not all(math.isfinite(x) for x in magnitudes):
        what = "capacities" if cost is None else "costs"
        raise InvalidArgument(
            f"an interval of {beta:g} s needs {what} beyond floating point "
            f"(up to {compute:.3g} FLOP/s and {bandwidth:.3g} bit/s"
            + (
                ""
                if cost is None
                else f" at up to {inst.highest_prices[0]:.3g} per FLOP/s and "
                f"{inst.highest_prices[1]:.3g} per bit/s"
            )
            + "): check the units of the target, the profile and the network",
            field="interval",
        )


def infeasible(beta: float, detail: str = "") -> Infeasible:
    """The error every method raises when no plan it can make meets ``beta`` within the caps."""
    more = f" ({detail})" if detail else ""
    return Infeasible(f"no plan reaches an interval of {beta:g} s within the capacity caps{more}")


def at_caps(inst: CodesignInstance) -> CodesignInstance:
    """``inst`` with every node and link at its cap: its capacity plus the most its cost
    function can add (whole modules, for capacity sold in modules), and every node's memory at
    the most it can have. Its ``T*`` is the least interval any plan can reach. Where nothing
    caps an element its capacity is the largest float."""
    # the largest float rather than inf where nothing caps an element: inf / inf is no delay
    most = np.finfo(np.float64).max
    node_cap = _most_added(inst.node_pricing, inst.node_costs)
    link_cap = _most_added(inst.link_pricing, inst.link_costs)
    capped = inst.priced(np.minimum(inst.capacity + node_cap, most), inst.node_costs,
                         np.minimum(inst.bandwidth + link_cap, most), inst.link_costs)  # fmt: skip
    return capped.with_memory(most_memory(inst))


def _most_added(pricing: Pricing, costs: Sequence[CapacityCost]) -> FloatArray:
    """The most each element can add: its cap, or the whole modules that fit under it."""
    most = pricing.cap.copy()
    for k in pricing.other.tolist():
        cost = costs[k]
        if isinstance(cost, ModuleCost):
            most[k] = cost.max_modules * cost.size
    return most


@dataclass(frozen=True)
class CapsAllow:
    """What the capacity caps allow one model on its path: the best ``interval`` (``T*`` with
    every element at its cap; 0 when only uncapped elements bind), the ``binding`` caps (each
    ``kind``, ``id`` and ``capacity`` at its cap, FLOP/s or bit/s), that deployment
    (``at_caps``), and the words saying so."""

    interval: float
    binding: list[dict[str, Any]]
    at_caps: Deployment
    says: str

    def details(self) -> dict[str, Any]:
        """``best_interval``, ``binding`` and ``at_caps`` (as :meth:`Deployment.to_dict`)."""
        return {"best_interval": self.interval, "binding": self.binding,
                "at_caps": self.at_caps.to_dict()}  # fmt: skip


def caps_allow(capped: CodesignInstance, best: Deployment) -> CapsAllow:
    """What the caps allow, from ``best``, ``T*`` of ``capped`` (:func:`at_caps`): the caps that
    bind are the stages of that deployment as slow as its interval."""
    index = {v: k for k, v in enumerate(capped.node_ids)}
    path = [index[v] for v in best.path]
    deployment = stages(capped, path, best.cut_indices)
    _, C, B = capped.scalars
    compute, transfer = deployment.delays(C, B)
    most = np.finfo(np.float64).max
    binding: list[dict[str, Any]] = []
    named: list[str] = []
    slow = best.interval * (1 - INTERVAL_RTOL)
    for k, v in enumerate(deployment.nodes):
        if compute[k] >= slow and C[v] < most:
            binding.append({"kind": "node", "id": capped.node_ids[v], "capacity": C[v]})
            named.append(f"node {capped.node_ids[v]!r} at its cap of {si(C[v], 'FLOP/s')}")
        e = deployment.links[k] if k < len(deployment.links) else None
        if e is not None and transfer[k] >= slow and B[e] < most:
            link = capped.links[e]
            binding.append({"kind": "link", "id": f"{link.source}->{link.target}",
                            "capacity": B[e]})  # fmt: skip
            named.append(f"link {link_name(link.source, link.target)} at its cap of "
                         f"{si(B[e], 'bit/s')}")  # fmt: skip
    interval = best.interval if binding else 0.0  # only uncapped elements: no interval binds
    if not binding:
        says = "the caps allow any interval"
    else:
        says = f"the caps allow at best {interval:.4g} s ({best.throughput:.4g} inferences/s)"
        says += f", bound by {' and '.join(named)}"
    return CapsAllow(interval, binding, best, says)


def beyond_caps(
    error: Infeasible, capped: CodesignInstance, best: Deployment, beta: float
) -> Infeasible:
    """``error`` (the :func:`infeasible` of a method) told what the caps allow
    (:func:`caps_allow`; ``best`` is ``T*`` of ``capped``, :func:`at_caps`).

    Its message names the binding caps and the best interval; its ``details`` hold
    ``best_interval``, ``binding`` and ``at_caps`` (:meth:`CapsAllow.details`). When ``best``
    meets the target ``beta`` (a baseline's deployment fell short, not the caps), the message
    says so."""
    allowed = caps_allow(capped, best)
    said = allowed.says
    if allowed.interval <= beta * (1 + INTERVAL_RTOL):  # a baseline's own deployment fell short
        said += f", which meets {beta:g} s: an exact method (psg, milp) finds that plan"
    return Infeasible(f"{error.message}; {said}", source=error.source, field=error.field,
                      details=allowed.details())  # fmt: skip


def _named(inst: CodesignInstance, kind: str, k: int) -> Bottleneck:
    """The bottleneck stage ``k`` of ``kind`` (``"node"`` or ``"link"``) by name."""
    if kind == "node":
        return Bottleneck("node", inst.node_ids[k])
    link = inst.links[k]
    return Bottleneck("link", f"{link.source}->{link.target}")


def build_deployment(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    capacity: Sequence[float] | FloatArray | None = None,
    bandwidth: Sequence[float] | FloatArray | None = None,
    *,
    links: Sequence[int] | None = None,
    interval: float | None = None,
) -> Deployment:
    """The :class:`Deployment` of ``partition`` along ``path`` (node indices; ``links`` its
    links, when known) under ``capacity`` and ``bandwidth`` (the instance's own when not
    given), its stages evaluated once: one place that turns any solver's path into a
    deployment. ``interval``: the solver's own, bit for bit the slowest stage (else
    computed); given it, under the instance's own capacities, the bottleneck and the latency
    are evaluated when first read."""
    cuts, points, nodes = inst.cuts, tuple(map(int, partition)), tuple(path)
    names = tuple(map(inst.node_ids.__getitem__, nodes))
    layers, sends = (
        Later(partial(stage_units, cuts, points)),
        Later(partial(stage_sends, cuts, points)),
    )
    blocks, ideals = (None, points) if cuts.kind == "graph" else (points, None)  # cut_fields
    if interval is not None and capacity is None and bandwidth is None:
        later = _Outcome(inst, nodes, points, None if links is None else tuple(links))
        # every field set at once: the frozen dataclass's __init__ sets them one at a time,
        # through the lazy fields' descriptors, longer than a small chain's whole solve
        made = object.__new__(Deployment)
        made.__dict__.update(path=names, partition=blocks, interval=interval,
                             bottleneck=Later(later.bottleneck), latency=Later(later.latency),
                             layers=layers, sends=sends, cuts=cuts.kind, ideals=ideals)  # fmt: skip
        return made
    deployment, C, B = _evaluated(inst, path, partition, capacity, bandwidth, links)
    slowest, (kind, k), latency = deployment.outcome(C, B)
    return Deployment(
        path=names,
        partition=blocks,
        ideals=ideals,
        interval=slowest if interval is None else interval,
        bottleneck=_named(inst, kind, k),
        latency=latency,
        layers=layers,
        sends=sends,
        cuts=cuts.kind,
    )


class _Outcome:
    """A deployment's bottleneck and latency under its instance's own capacities, evaluated
    once, when the first of them is read."""

    def __init__(self, inst: CodesignInstance, path: Sequence[int], partition: Sequence[int],
                 links: Sequence[int] | None) -> None:  # fmt: skip
        self.args = (inst, path, partition, links)
        self.made: tuple[Bottleneck, float] | None = None

    def _made(self) -> tuple[Bottleneck, float]:
        if self.made is None:
            inst, path, partition, links = self.args
            deployment, C, B = _evaluated(inst, path, partition, None, None, links)
            _, (kind, k), latency = deployment.outcome(C, B)
            self.made = (_named(inst, kind, k), latency)
        return self.made

    def bottleneck(self) -> Bottleneck:
        return self._made()[0]

    def latency(self) -> float:
        return self._made()[1]


def _evaluated(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    capacity: Sequence[float] | FloatArray | None,
    bandwidth: Sequence[float] | FloatArray | None,
    links: Sequence[int] | None,
) -> tuple[Stages, Sequence[float] | FloatArray, Sequence[float] | FloatArray]:
    """The stages of a deployment, and the capacities to evaluate them under (the
    instance's own where not given)."""
    _, own_capacity, own_bandwidth = inst.scalars
    return (
        stages(inst, path, partition, links),
        own_capacity if capacity is None else capacity,
        own_bandwidth if bandwidth is None else bandwidth,
    )


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
    target_latency: float | None = None,
    memory_added: Mapping[int, float] | None = None,
    deployment: Stages | None = None,
) -> Plan:
    """Round the requested increments (capacity per node and per link index; any node or
    link, not only the path's) to what the cost functions sell, price them, and check the
    resulting interval of ``partition`` along ``path`` (``links`` its links, when known): one
    place that turns any solver's choice into a :class:`Plan`. Memory is bought likewise:
    ``memory_added`` bytes per node, by default what each path node needs beyond its memory.
    The stages are evaluated once (``deployment``, the solver's when it has them).

    Plain Python on the path's few stages: on the paper's networks numpy's cost per call would
    outweigh the solve.

    Raises
    ------
    Infeasible
        If a purchase exceeds what its cost function can add (its cap): the plan cannot be
        bought, whichever method asked for it.
    """
    own_memory = [float(inst.memory[v]) for v in path]
    if memory_added is None:  # what each path node with limited memory needs beyond it
        done = [0, *partition[:-1]]
        memory_added = {v: inst.need(a, b) - own
                        for v, own, a, b in zip(path, own_memory, done, partition, strict=True)
                        if own < math.inf}  # fmt: skip
    node_bought: dict[int, float] = {}
    link_bought: dict[int, float] = {}
    memory_bought: dict[int, float] = {}
    prices: list[float] = []
    for bought, wanted, costs, name in (
        (node_bought, node_added, inst.node_costs, _node_name),
        (link_bought, link_added, inst.link_costs, _link_name),
        (memory_bought, memory_added, inst.memory_costs, _memory_name),
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
    if deployment is None:
        deployment = stages(inst, path, partition, links)
    _, C, B = inst.scalars
    interval, (kind, k), latency = deployment.outcome(C, B, node_bought, link_bought)
    cuts, points, nodes = inst.cuts, tuple(int(b) for b in partition), tuple(path)
    blocks, ideals = cut_fields(cuts.kind, points)
    return Plan(
        method=method,
        status=status,
        cost=math.fsum(prices),
        interval=interval,
        target_interval=target_interval,
        path=tuple(inst.node_ids[v] for v in path),
        partition=blocks,
        ideals=ideals,
        node_upgrades={inst.node_ids[v]: x for v, x in node_bought.items() if x > 0},
        link_upgrades=tuple(
            LinkUpgrade(inst.links[e].source, inst.links[e].target, y)
            for e, y in link_bought.items()
            if y > 0
        ),
        bottleneck=_named(inst, kind, k),
        latency=latency,
        target_latency=target_latency,
        layers=Later(partial(stage_units, cuts, points)),
        sends=Later(partial(stage_sends, cuts, points)),
        cuts=cuts.kind,
        memory=Later(partial(_memory_table, inst, nodes, points, own_memory, memory_bought)),
    )


def _memory_table(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    own_memory: Sequence[float],
    bought: Mapping[int, float],
) -> tuple[NodeMemory, ...]:
    """Each path node's memory need, memory after the upgrades (``None``: unlimited) and the
    bytes ``bought``."""
    return tuple(
        NodeMemory(
            inst.node_ids[v],
            need,
            None if math.isinf(own) else own + bought.get(v, 0.0),
            bought.get(v, 0.0),
        )
        for v, need, own in zip(path, path_needs(inst, path, partition), own_memory, strict=True)
    )


def _memory_name(inst: CodesignInstance, v: int) -> str:
    return f"the memory of node {inst.node_ids[v]!r}"


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
    ``beta``: ``rho`` and ``sigma`` of the paper (:meth:`Stages.increments`)."""
    deployment = stages(inst, path, partition, links)
    _, C, B = inst.scalars
    node_added, link_added = deployment.increments(beta, C, B)
    return build_plan(
        inst, method, beta, path, partition, node_added, link_added, deployment.links,
        status=status, deployment=deployment,
    )  # fmt: skip
