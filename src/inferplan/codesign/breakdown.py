"""A plan taken apart for a reader: each stage's load, capacity, time, utilisation and
headroom, and what each upgrade costs. The plan report (:mod:`inferplan.plots.report`) renders
it; the numbers come from the same stage arithmetic as the solvers (:mod:`.stages`)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

from inferplan.codesign.instance import compile_instance
from inferplan.codesign.plan import Plan
from inferplan.codesign.stages import stage_sends, stage_units, stages
from inferplan.codesign.timing.stage import FLOPS_OVER_CAPACITY, NodeTimeModel, PerNodeTimeModel
from inferplan.network.network import Network
from inferplan.profiles.profile import Profile

__all__ = ["LatencyParts", "PlanBreakdown", "StageRow", "UpgradeCost", "plan_breakdown"]


@dataclass(frozen=True)
class StageRow:
    """One stage of a plan: a path node's compute or a path link's transfer.

    ``blocks`` is ``(first, last)`` of the blocks a node runs (1-based; ``None`` for a node that
    only forwards, and for a link, which carries the activation after block ``after``).
    ``load`` is the FLOPs (node) or bits (link) per inference; ``capacity`` what the element
    has, ``added`` what the plan buys; ``seconds`` the stage's time per inference after the
    upgrades; ``utilisation`` is ``seconds / interval`` (1 for the bottleneck) and ``headroom``
    ``interval - seconds``, the time the stage waits per inference. ``units`` names what a
    node runs: its blocks, or its layers for a plan cut at ideals of a layer graph (where
    ``blocks`` and ``after`` count ideals' cuts, not blocks); for a link, the tensors it
    carries (``input`` or the layers or blocks whose outputs).
    """

    kind: Literal["node", "link"]
    id: str
    blocks: tuple[int, int] | None
    after: int
    load: float
    capacity: float
    added: float
    seconds: float
    utilisation: float
    headroom: float
    bottleneck: bool
    units: tuple[str, ...] = ()
    delay: float = 0.0  # a link's propagation delay (s), on top of ``seconds``


@dataclass(frozen=True)
class LatencyParts:
    """What one inference's latency is made of (seconds): the nodes' compute, the links'
    transfers and the links' propagation delays; ``total`` is their sum."""

    compute: float
    transfer: float
    propagation: float

    @property
    def total(self) -> float:
        return math.fsum([self.compute, self.transfer, self.propagation])

    def to_dict(self) -> dict[str, float]:
        """The parts and their ``total``, for JSON."""
        return {"compute": self.compute, "transfer": self.transfer,
                "propagation": self.propagation, "total": self.total}  # fmt: skip


@dataclass(frozen=True)
class UpgradeCost:
    """What one upgrade buys (``amount``, FLOP/s or bit/s) and costs, and its share of the
    plan's cost."""

    kind: Literal["node", "link"]
    id: str
    amount: float
    cost: float
    share: float
    for_interval: float = 0.0  # of ``amount``: what the stage needs to meet the target interval
    for_latency: float = 0.0  # the rest: bought to meet the latency bound

    @property
    def serves(self) -> str:
        """Which bound the upgrade serves: ``interval``, ``latency`` or both."""
        parts = [name for name, x in (("interval", self.for_interval),
                                      ("latency", self.for_latency)) if x > 0]  # fmt: skip
        return " + ".join(parts) or "nothing"


@dataclass(frozen=True)
class PlanBreakdown:
    """A plan's stages in path order and its upgrades' costs (largest first)."""

    plan: Plan
    block_names: tuple[str, ...]
    stages: tuple[StageRow, ...]
    upgrades: tuple[UpgradeCost, ...]

    def latency_parts(self) -> LatencyParts:
        """The latency as the sum of its parts, from the stages' own times.

        Examples
        --------
        >>> import inferplan
        >>> net, vgg = inferplan.tiered(seed=1), inferplan.vgg16()
        >>> parts = plan_breakdown(net, vgg, inferplan.provision(net, vgg, throughput=30))
        >>> abs(parts.latency_parts().total - parts.plan.latency) < 1e-12
        True
        """
        nodes = [s.seconds for s in self.stages if s.kind == "node"]
        links = [s for s in self.stages if s.kind == "link"]
        return LatencyParts(math.fsum(nodes), math.fsum(s.seconds for s in links),
                            math.fsum(s.delay for s in links))  # fmt: skip


def plan_breakdown(
    network: Network,
    profile: Profile,
    plan: Plan,
    *,
    node_time: NodeTimeModel | PerNodeTimeModel = FLOPS_OVER_CAPACITY,
) -> PlanBreakdown:
    """The stages and upgrade costs of ``plan`` (made for ``network`` and ``profile`` under
    ``node_time``, how long a stage takes on a node).

    Examples
    --------
    >>> import inferplan
    >>> net, vgg = inferplan.tiered(seed=1), inferplan.vgg16()
    >>> parts = plan_breakdown(net, vgg, inferplan.provision(net, vgg, throughput=30))
    >>> [s.id for s in parts.stages if s.bottleneck] == [parts.plan.bottleneck.id]
    True
    >>> round(sum(u.cost for u in parts.upgrades), 9) == round(parts.plan.cost, 9)
    True
    """
    inst = compile_instance(network, profile, require_acyclic=False, cuts=plan.cuts,
                            node_time=node_time)  # fmt: skip
    index = {v: k for k, v in enumerate(inst.node_ids)}
    path = [index[v] for v in plan.path]
    deployment = stages(inst, path, plan.cut_indices)
    _, C, B = inst.scalars
    node_added = {index[v]: x for v, x in plan.node_upgrades.items() if v in index}
    link_added = {inst.link_index(index[u.source], index[u.target]): u.amount
                  for u in plan.link_upgrades}  # fmt: skip
    compute, transfer = deployment.delays(C, B, node_added, link_added)
    units = stage_units(inst, plan.cut_indices)
    sends = stage_sends(inst, plan.cut_indices)
    interval = max(compute + transfer)
    rows: list[StageRow] = []
    previous = 0
    slowest = plan.bottleneck.id if plan.bottleneck else None
    for k, v in enumerate(deployment.nodes):
        done = plan.cut_indices[k]
        node = inst.node_ids[v]
        blocks = (previous + 1, done) if done > previous else None
        rows.append(_row("node", node, blocks, done, deployment.work[k], C[v],
                         node_added.get(v, 0.0), compute[k], interval, slowest,
                         units[k]))  # fmt: skip
        if k < len(deployment.links):
            e = deployment.links[k]
            link = inst.links[e]
            rows.append(_row("link", f"{link.source}->{link.target}", None, done,
                             deployment.bits[k], B[e], link_added.get(e, 0.0), transfer[k],
                             interval, slowest, sends[k],
                             deployment.propagation[k]))  # fmt: skip
        previous = done
    upgrades = [
        *(("node", v, x, network.node_cost(network.node_position[v])) for v, x in
          plan.node_upgrades.items()),
        *(("link", f"{u.source}->{u.target}", u.amount,
           network.link_cost(_link_position(network, u.source, u.target)))
          for u in plan.link_upgrades),
    ]  # fmt: skip
    priced = [(kind, name, x, float(cost(np.array([x]))[0])) for kind, name, x, cost in upgrades]
    total = math.fsum(c for *_, c in priced)
    row_of = {r.id: r for r in rows}

    def split(name: str, x: float) -> tuple[float, float]:
        """Of ``x`` bought at ``name``: what the target interval needs, and the rest."""
        row = row_of.get(name)
        if row is None:
            return x, 0.0
        need = max(0.0, row.load / plan.target_interval - row.capacity)
        need = x if need >= x * (1 - 1e-9) else need
        return need, x - need

    costs = sorted(
        (UpgradeCost(kind, name, x, c, c / total if total > 0 else 0.0,  # type: ignore[arg-type]
                     *split(name, x))
         for kind, name, x, c in priced),
        key=lambda u: -u.cost,
    )  # fmt: skip
    return PlanBreakdown(plan, tuple(profile.blocks), tuple(rows), tuple(costs))


def _row(
    kind: Literal["node", "link"],
    name: str,
    blocks: tuple[int, int] | None,
    after: int,
    load: float,
    capacity: float,
    added: float,
    seconds: float,
    interval: float,
    slowest: str | None,
    units: tuple[str, ...] = (),
    delay: float = 0.0,
) -> StageRow:
    share = seconds / interval if interval > 0 else 0.0
    return StageRow(kind, name, blocks, after, load, capacity, added, seconds, share,
                    interval - seconds, name == slowest, units, delay)  # fmt: skip


def _link_position(network: Network, source: str, target: str) -> int:
    for k, link in enumerate(network.links):
        if (link.source, link.target) == (source, target):
            return k
    raise KeyError(f"{source}->{target}")  # pragma: no cover  # a plan's link is the network's
