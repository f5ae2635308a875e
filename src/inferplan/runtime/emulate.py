"""Emulating planned infrastructure: pacing stages to planned times, the planned times, and
the verdicts on a run: a stage that cannot hold its time, inferences that queued.

A stage (a node's compute, a link's transfer) emulates a capacity by taking *at least* the time
that capacity would need: it does its real work, then sleeps until ``started + planned``. The
sleep blocks in the kernel (no busy-wait), so stages that share few cores leave them to the
stages that compute. Real work slower than planned is never hidden: the stage then takes its
real time.

Examples
--------
>>> import time
>>> started = time.monotonic()
>>> pace(started, 0.02) - started >= 0.02
True
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

from inferplan.arrays import FloatArray
from inferplan.codesign.instance import CodesignInstance, compile_instance
from inferplan.codesign.plan import Plan
from inferplan.codesign.stages import stages
from inferplan.network.network import Network
from inferplan.profiles.profile import Profile
from inferplan.units import si

__all__ = [
    "OVERRUN_SHARE",
    "Overrun",
    "Queueing",
    "Server",
    "overrun",
    "pace",
    "path_bandwidths",
    "planned_latency",
    "planned_times",
]


def pace(started: float, at_least_s: float) -> float:
    """Sleep until ``started + at_least_s`` (``time.monotonic`` seconds); return the time then.

    Returns at once if that moment has passed. ``time.sleep`` may wake a little early on some
    systems, so the sleep repeats until the moment is reached.
    """
    now = time.monotonic()
    deadline = started + at_least_s
    while now < deadline:
        time.sleep(deadline - now)
        now = time.monotonic()
    return now


class Server:
    """One stage serving one item at a time, each for at least ``seconds`` when given.

    Item ``i`` starts when it has arrived and item ``i - 1`` has ended,
    ``start_i = max(arrived_i, end_{i-1})``. With ``seconds`` (emulation) it ends at
    ``end_i = start_i + seconds``, the schedule a server of that capacity keeps, and
    :meth:`finish` sleeps until then. Ends are counted on that schedule, not from when the sleep
    happened to return, so a late wake-up (a busy machine) delays one item, not every later
    one; idle time is never banked. Without ``seconds`` an item ends when :meth:`finish` is
    called. Either way ``finish(start) - start``, the time the stage held the item, is at least
    ``seconds``.

    Examples
    --------
    >>> server = Server(0.01)
    >>> t0 = time.monotonic()
    >>> held = []
    >>> for _ in range(3):  # three items queued at t0
    ...     start = server.start(t0)
    ...     held.append(server.finish(start) - start)
    >>> min(held) >= 0.01, time.monotonic() - t0 >= 0.03
    (True, True)
    """

    def __init__(self, seconds: float | None = None) -> None:
        self.seconds = seconds
        self._free_at = -math.inf

    def start(self, arrived: float) -> float:
        """When the item that arrived at ``arrived`` starts: ``max(arrived, end of the last)``."""
        return max(arrived, self._free_at)

    def finish(self, start: float) -> float:
        """End the item that started at ``start``; return the time then."""
        if self.seconds is None:
            self._free_at = time.monotonic()
            return self._free_at
        self._free_at = start + self.seconds
        return pace(start, self.seconds)


def planned_times(
    network: Network, profile: Profile, plan: Plan
) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """The planned time per inference of each path node and each path link (seconds).

    Node ``path[l]`` computes its blocks in ``Q / (C + x)`` (its work over its capacity after
    the plan's upgrade; 0 for a node that only forwards), link ``path[l] -> path[l+1]`` sends the
    activation after ``partition[l]`` in ``D / (B + y)``: the planner's own
    :meth:`~inferplan.codesign.stages.Stages.delays`, so the plan's interval is their maximum.
    The plan must fit the network and profile (see :func:`~inferplan.codesign.planfile.check_plan`).

    Examples
    --------
    >>> import inferplan
    >>> net = inferplan.load_network("examples/network.json")
    >>> vgg = inferplan.load_profile("vgg16")
    >>> plan = inferplan.provision(net, vgg, interval=0.05)
    >>> nodes, links = planned_times(net, vgg, plan)
    >>> abs(max(nodes + links) - plan.interval) < 1e-12
    True
    """
    inst, path, capacity, bandwidth = _upgraded(network, profile, plan)
    compute, transfer = stages(inst, path, plan.cut_indices).delays(capacity, bandwidth)
    return tuple(compute), tuple(transfer)


def planned_latency(
    network: Network, profile: Profile, plan: Plan
) -> tuple[float, tuple[float, ...]]:
    """The plan's latency (seconds, one inference through the idle pipeline at the planned
    times: :meth:`~inferplan.codesign.stages.Stages.latency`) and the propagation delay of
    each path link, which a run adds to its link's transfer (its data arrives that much later,
    the link itself is free again at once).

    Examples
    --------
    >>> import inferplan
    >>> net = inferplan.load_network("examples/network.json")
    >>> vgg = inferplan.load_profile("vgg16")
    >>> plan = inferplan.provision(net, vgg, interval=0.05)
    >>> latency, delays = planned_latency(net, vgg, plan)
    >>> abs(latency - plan.latency) < 1e-12, len(delays) == len(plan.path) - 1
    (True, True)
    """
    inst, path, capacity, bandwidth = _upgraded(network, profile, plan)
    run = stages(inst, path, plan.cut_indices)
    return run.latency(capacity, bandwidth), run.propagation


def path_bandwidths(network: Network, profile: Profile, plan: Plan) -> tuple[float, ...]:
    """The bandwidth (bit/s) of each path link after the plan's upgrades, ``B + y``.

    Examples
    --------
    A chain of two nodes has one link, of 1 Mbit/s unless the plan upgrades it:

    >>> from inferplan import Network, Node, Link, load_profile, provision
    >>> chain = Network([Node("s", 1e12, 1e-9), Node("t", 1e12, 1e-9)],
    ...                 [Link("s", "t", 1e6, 1e-3)], source="s", target="t")
    >>> alex = load_profile("alexnet")
    >>> bandwidths = path_bandwidths(chain, alex, provision(chain, alex, interval=10.0))
    >>> len(bandwidths), bandwidths[0] >= 1e6
    (1, True)
    """
    inst, path, _, bandwidth = _upgraded(network, profile, plan)
    links = stages(inst, path, plan.cut_indices).links
    return tuple(float(bandwidth[e]) for e in links)


def _upgraded(network: Network, profile: Profile, plan: Plan) -> tuple[
    CodesignInstance, list[int], FloatArray, FloatArray
]:  # fmt: skip
    """The compiled instance, the path as node indices, and the capacities and bandwidths
    after the plan's upgrades."""
    inst = compile_instance(network, profile, require_acyclic=False, cuts=plan.cuts)
    index = {v: k for k, v in enumerate(inst.node_ids)}
    capacity = inst.capacity.copy()
    for node, amount in plan.node_upgrades.items():
        capacity[index[node]] += amount
    bandwidth = inst.bandwidth.copy()
    for up in plan.link_upgrades:
        bandwidth[inst.link_index(index[up.source], index[up.target])] += up.amount
    return inst, [index[v] for v in plan.path], capacity, bandwidth


OVERRUN_SHARE = 0.05
"""The share of inferences a stage may take longer than planned before the run says that
emulation cannot hold the plan (a few late wake-ups on a busy machine are not a verdict)."""


@dataclass(frozen=True)
class Overrun:
    """A stage whose real work took longer than its planned time in ``share`` of the
    inferences: emulation, which only ever adds time, cannot hold the plan there.

    ``real_s`` is the median real time of the stage's work, ``planned_s`` its planned time.
    """

    share: float
    real_s: float
    planned_s: float

    def says(self, stage: str, planned: str, held: str, change: str) -> str:
        """The warning: ``stage`` took its real time against its ``planned`` time, so
        emulation cannot hold the ``held`` (plan, system); what to ``change``."""
        return (f"{stage} took {si(self.real_s, 's')} (median) against "
                f"{si(self.planned_s, 's')} {planned}, longer in {self.share:.0%} of the "
                f"inferences: emulation cannot hold the {held}; {change}")  # fmt: skip


def overrun(
    planned_s: float | Sequence[float], real_s: Sequence[float], *, share: float = OVERRUN_SHARE
) -> Overrun | None:
    """The :class:`Overrun` of a stage planned at ``planned_s`` whose work took ``real_s``
    (seconds, one per inference), if more than ``share`` of them exceed ``planned_s`` (one
    planned time for all, or one per inference; ``planned_s`` of the verdict is then their
    median).

    Examples
    --------
    >>> overrun(0.001, [0.0021] * 9 + [0.0005])
    Overrun(share=0.9, real_s=0.0021, planned_s=0.001)
    >>> overrun(0.001, [0.0005] * 99 + [0.002]) is None  # 1 % late: not a verdict
    True
    """
    if not real_s:
        return None
    planned = [planned_s] * len(real_s) if isinstance(planned_s, int | float) else planned_s
    late = sum(1 for t, p in zip(real_s, planned, strict=True) if t > p) / len(real_s)
    if late <= share:
        return None
    return Overrun(late, statistics.median(real_s), statistics.median(planned))


QUEUE_SHARE = 0.5
"""How much of an interval inferences may wait in all, at the median, before a run says they
queued (the wake-ups of paced stages on a busy machine are a few milliseconds late)."""


@dataclass(frozen=True)
class Queueing:
    """Whether a run's inferences waited for busy stages, from its numbers: the measured
    median ``latency_s``, the ``idle_s`` latency of the idle pipeline at the measured stage
    times (their sum, plus the propagation delays the run imposed), the measured
    ``interval_s``, ``in_flight``, the mean number of inferences in the pipeline as one
    entered (itself included), the plan's ``predicted_s`` latency, and ``feed_s``, the
    interval at which inputs came open loop (the plan's, as a camera would send them), or
    ``None`` when they came as fast as the pipeline took them (closed loop: the pipeline kept
    full).

    A full pipeline holds more inferences than its stages serve at once, so they wait: by
    Little's law its latency is about (inferences in flight) x interval, not the plan's.

    Examples
    --------
    >>> full = Queueing(latency_s=0.12, idle_s=0.05, interval_s=0.02, in_flight=6,
    ...                 predicted_s=0.05)
    >>> full.queued, full.little_s
    (True, 0.12)
    >>> Queueing(latency_s=0.051, idle_s=0.05, interval_s=0.025, in_flight=2.0,
    ...          predicted_s=0.05, feed_s=0.025).queued
    False
    """

    latency_s: float
    idle_s: float
    interval_s: float
    in_flight: float
    predicted_s: float
    feed_s: float | None = None

    @property
    def little_s(self) -> float:
        """The latency Little's law gives: inferences in flight times the interval."""
        return self.in_flight * self.interval_s

    @property
    def queued(self) -> bool:
        """Whether inferences waited, at the median, more than :data:`QUEUE_SHARE` of an
        interval in all beyond the idle pipeline's latency."""
        return self.latency_s - self.idle_s > QUEUE_SHARE * self.interval_s

    def says(self) -> str:
        """The verdict in one sentence, with its numbers."""
        lat, idle, gap = si(self.latency_s, "s"), si(self.idle_s, "s"), si(self.interval_s, "s")
        plan = si(self.predicted_s, "s")
        if self.feed_s is None and self.queued:
            return (f"the pipeline was kept full, so inferences queued: {self.in_flight:.3g} "
                    f"in flight x {gap} interval = {si(self.little_s, 's')} (Little's law; "
                    f"measured {lat}), against {idle} through the idle pipeline; run with "
                    f"--rate to feed inputs at the plan's throughput and compare with its "
                    f"{plan}")  # fmt: skip
        if self.feed_s is None:
            return (f"no inference queued although the pipeline was kept full: the latency "
                    f"{lat} is the idle pipeline's {idle} (the plan's {plan})")  # fmt: skip
        if self.queued:
            return (f"fed at the plan's throughput, inferences still queued: "
                    f"{self.in_flight:.3g} in flight, latency {lat} against {idle} through the "
                    f"idle pipeline: a stage is slower than the {si(self.feed_s, 's')} between "
                    f"inputs (see the stage times)")  # fmt: skip
        return (f"fed at the plan's throughput, no inference queued: the latency {lat} is the "
                f"idle pipeline's {idle} (the plan's {plan})")  # fmt: skip
