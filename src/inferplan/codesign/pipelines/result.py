"""The answer of a flow plan: its rate, layout, pipelines, loads and bottleneck cut."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["FlowPlan", "Load", "Pipeline"]

FlowStatus = Literal["optimal", "time_limit"]


@dataclass(frozen=True)
class Pipeline:
    """One pipeline of a flow decomposition: the nodes it visits (``path``), the blocks done
    when it leaves each (``partition``, cumulative, as a one-path deployment's) and the
    ``rate`` it carries (inferences/s)."""

    path: tuple[str, ...]
    partition: tuple[int, ...]
    rate: float

    def to_dict(self) -> dict[str, Any]:
        return {"path": list(self.path), "partition": list(self.partition), "rate": self.rate}


@dataclass(frozen=True)
class Load:
    """What one node (FLOP/s) or link (bit/s) carries: ``load``, its ``capacity`` after the
    upgrades, ``headroom = capacity - load`` and the amount ``added``."""

    kind: Literal["node", "link"]
    id: str
    load: float
    capacity: float
    added: float = 0.0

    @property
    def headroom(self) -> float:
        return self.capacity - self.load

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "id": self.id, "load": self.load, "capacity": self.capacity,
                "headroom": self.headroom, "added": self.added}  # fmt: skip


@dataclass(frozen=True)
class FlowPlan:
    """A flow plan: inferences at rate ``throughput`` through many pipelines at once.

    Attributes
    ----------
    method
        ``"flow-throughput"`` (the largest rate as the network is) or ``"flow-provision"``
        (the cheapest upgrades for a target rate).
    status
        ``"optimal"`` when HiGHS's bound certifies the answer, ``"time_limit"`` when the
        limit stopped it first (the best plan found, with ``bound`` and ``gap``).
    throughput, interval
        The rate ``F`` (inferences/s) and ``1 / F`` (s).
    cost
        The exact price of the upgrades (0 for ``flow-throughput``).
    bound, gap
        HiGHS's bound on the objective (the largest rate, or the least cost) and the relative
        gap of the answer to it.
    layout
        Each node holding blocks: ``(a, b)``, it runs blocks ``a+1..b``.
    pipelines
        A flow decomposition: rates that sum to ``throughput``.
    loads
        Every node that computes and every link that carries flow.
    bottleneck
        The saturated nodes and links that separate the source from the target (ids; a link
        as ``"u->v"``).
    memory_added
        Bytes of memory bought per node.
    """

    method: str
    status: FlowStatus
    throughput: float
    cost: float
    bound: float
    gap: float
    layout: Mapping[str, tuple[int, int]]
    pipelines: tuple[Pipeline, ...]
    loads: tuple[Load, ...]
    bottleneck: tuple[str, ...]
    target_throughput: float | None = None
    memory_added: Mapping[str, float] = field(default_factory=dict)

    @property
    def interval(self) -> float:
        return 1.0 / self.throughput if self.throughput > 0 else float("inf")

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready values (``--json``)."""
        return {
            "method": self.method,
            "status": self.status,
            "throughput": self.throughput,
            "interval": self.interval,
            "target_throughput": self.target_throughput,
            "cost": self.cost,
            "bound": self.bound,
            "gap": self.gap,
            "layout": {v: list(r) for v, r in self.layout.items()},
            "pipelines": [p.to_dict() for p in self.pipelines],
            "loads": [x.to_dict() for x in self.loads],
            "bottleneck": list(self.bottleneck),
            "memory_added": dict(self.memory_added),
        }
