"""The stages of one deployment: what each does, how long it takes, and what makes it faster.

A deployment (a source-target path and a partition) runs as a pipeline of stages: each path
node ``v`` computes its blocks, ``w_v`` FLOPs taking ``w_v / C_v`` seconds, and each path link
``e`` carries the activation after the blocks done so far, ``D_b`` bits taking ``D_b / B_e``
seconds, and delays it by its propagation delay ``delay_e``. The slowest stage sets the output
interval; the latency, what one inference takes through the idle pipeline, is the sum of every
stage's delay and every propagation delay. To reach an interval ``beta`` a stage needs ``rho_v
= max(0, w_v / beta - C_v)`` more compute or ``sigma_e = max(0, D_b / beta - B_e)`` more
bandwidth.

This is the one place that arithmetic is written: plans, the baselines, ``T*`` read-backs,
plan files and the runtime's pacing all call it. Plain Python over the path's few stages: on
the paper's networks numpy's cost per call would outweigh the work.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from inferplan.codesign.instance import CodesignInstance
from inferplan.profiles.ideals import Cuts

__all__ = ["Stages", "stage_names", "stage_sends", "stage_units", "stages"]

Capacities = Sequence[float] | npt.NDArray[np.float64]


@dataclass(frozen=True)
class Stages:
    """The stages of a deployment (indices into a :class:`CodesignInstance`).

    Attributes
    ----------
    nodes, work
        Each path node and the FLOPs it computes (``0`` for a node that only forwards).
    links, bits, propagation
        Each path link, the bits it carries and its propagation delay (s).
    """

    nodes: tuple[int, ...]
    work: tuple[float, ...]
    links: tuple[int, ...]
    bits: tuple[float, ...]
    propagation: tuple[float, ...]

    def delays(
        self,
        capacity: Capacities,
        bandwidth: Capacities,
        added_capacity: Mapping[int, float] | None = None,
        added_bandwidth: Mapping[int, float] | None = None,
    ) -> tuple[list[float], list[float]]:
        """Seconds per node stage and per link stage under ``capacity`` and ``bandwidth`` (per
        node and link index) plus any ``added_capacity`` and ``added_bandwidth``."""
        more_c = added_capacity or {}
        more_b = added_bandwidth or {}
        compute = [
            float(w / (capacity[v] + more_c.get(v, 0.0)))
            for v, w in zip(self.nodes, self.work, strict=True)
        ]
        transfer = [
            float(d / (bandwidth[e] + more_b.get(e, 0.0)))
            for e, d in zip(self.links, self.bits, strict=True)
        ]
        return compute, transfer

    def interval(
        self,
        capacity: Capacities,
        bandwidth: Capacities,
        added_capacity: Mapping[int, float] | None = None,
        added_bandwidth: Mapping[int, float] | None = None,
    ) -> float:
        """The output interval: the slowest stage's delay (seconds)."""
        compute, transfer = self.delays(capacity, bandwidth, added_capacity, added_bandwidth)
        return _slowest(compute, transfer)

    def latency(
        self,
        capacity: Capacities,
        bandwidth: Capacities,
        added_capacity: Mapping[int, float] | None = None,
        added_bandwidth: Mapping[int, float] | None = None,
    ) -> float:
        """The latency (seconds): one inference through the idle pipeline, every stage's
        delay and every link's propagation delay. At an interval no stage exceeds, with
        deterministic stage times, no inference waits, so each one takes exactly this."""
        compute, transfer = self.delays(capacity, bandwidth, added_capacity, added_bandwidth)
        return self._latency(compute, transfer)

    def _latency(self, compute: list[float], transfer: list[float]) -> float:
        try:
            return math.fsum([*compute, *transfer, *self.propagation])
        except OverflowError:  # non-negative terms: the true sum is beyond floating point
            return math.inf

    def bottleneck(
        self,
        capacity: Capacities,
        bandwidth: Capacities,
        added_capacity: Mapping[int, float] | None = None,
        added_bandwidth: Mapping[int, float] | None = None,
    ) -> tuple[Literal["node", "link"], int]:
        """The stage that sets the interval, ``("node", v)`` or ``("link", e)``: the first along
        the path (node, link, node, ...) among equally slow stages."""
        compute, transfer = self.delays(capacity, bandwidth, added_capacity, added_bandwidth)
        return self._bottleneck(compute, transfer)

    def _bottleneck(
        self, compute: list[float], transfer: list[float]
    ) -> tuple[Literal["node", "link"], int]:
        slowest = _slowest(compute, transfer)
        for k, v in enumerate(self.nodes):
            if compute[k] == slowest:
                return "node", v
            if k < len(self.links) and transfer[k] == slowest:
                return "link", self.links[k]
        raise AssertionError("the slowest stage is one of the stages")  # pragma: no cover

    def outcome(
        self,
        capacity: Capacities,
        bandwidth: Capacities,
        added_capacity: Mapping[int, float] | None = None,
        added_bandwidth: Mapping[int, float] | None = None,
    ) -> tuple[float, tuple[Literal["node", "link"], int], float]:
        """:meth:`interval`, :meth:`bottleneck` and :meth:`latency` from one evaluation of
        the delays."""
        compute, transfer = self.delays(capacity, bandwidth, added_capacity, added_bandwidth)
        return (
            _slowest(compute, transfer),
            self._bottleneck(compute, transfer),
            self._latency(compute, transfer),
        )

    def increments(
        self, interval: float, capacity: Capacities, bandwidth: Capacities
    ) -> tuple[dict[int, float], dict[int, float]]:
        """The least compute per path node and bandwidth per path link that bring every
        stage down to ``interval``: ``rho`` and ``sigma`` of the paper, by node and link."""
        rho = {
            v: max(0.0, w / interval - float(capacity[v]))
            for v, w in zip(self.nodes, self.work, strict=True)
        }
        sigma = {
            e: max(0.0, d / interval - float(bandwidth[e]))
            for e, d in zip(self.links, self.bits, strict=True)
        }
        return rho, sigma


def _slowest(compute: list[float], transfer: list[float]) -> float:
    return max(compute + transfer)


def stages(
    inst: CodesignInstance,
    path: Sequence[int],
    partition: Sequence[int],
    links: Sequence[int] | None = None,
) -> Stages:
    """The stages of ``partition`` along ``path`` (node indices; ``links`` the links between
    them, when known). ``partition[l]`` is the number of blocks done up to ``path[l]``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance
    >>> inst = compile_instance(inferplan.tiered(seed=1), inferplan.vgg16())
    >>> best = inferplan.throughput(inst.network, inst.profile)
    >>> path = [inst.node_ids.index(v) for v in best.path]
    >>> s = stages(inst, path, best.partition)
    >>> s.interval(inst.capacity, inst.bandwidth) == best.interval
    True
    """
    if links is None:
        links = [inst.link_index(u, v) for u, v in itertools.pairwise(path)]
    done = [0, *partition[:-1]]
    bits, delay = inst.scalars[0], inst.link_delay.item
    work = inst.work
    links, nodes = tuple(map(int, links)), tuple(map(int, path))
    return Stages(
        nodes=nodes,
        work=tuple([work(i, j, v) for i, j, v in zip(done, partition, nodes, strict=True)]),
        links=links,
        bits=tuple([bits[b] for b in partition[: len(links)]]),
        propagation=tuple(map(delay, links)),
    )


def stage_units(
    inst: CodesignInstance | Cuts, partition: Sequence[int]
) -> tuple[tuple[str, ...], ...]:
    """The names of the blocks or layers each path node runs (``partition[l]`` the cut done
    up to the ``l``-th node), in the model's order; empty for a node that only forwards.
    ``inst`` may be the cuts alone."""
    cuts = inst if isinstance(inst, Cuts) else inst.cuts
    done = [0, *partition[:-1]]
    return tuple(cuts.units_between(i, j) for i, j in zip(done, partition, strict=True))


def stage_names(
    inst: CodesignInstance, partition: Sequence[int]
) -> tuple[tuple[tuple[str, ...], ...], tuple[tuple[str, ...], ...]]:
    """:func:`stage_units` and :func:`stage_sends` at once."""
    return stage_units(inst, partition), stage_sends(inst, partition)


def stage_sends(
    inst: CodesignInstance | Cuts, partition: Sequence[int]
) -> tuple[tuple[str, ...], ...]:
    """The tensors each path link carries (``partition[l]`` the cut done before it), in the
    fixed order of :meth:`~inferplan.profiles.ideals.Cuts.boundary`. ``inst`` may be the cuts
    alone."""
    cuts = inst if isinstance(inst, Cuts) else inst.cuts
    return tuple(cuts.boundary(b) for b in partition[:-1])
