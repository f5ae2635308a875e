"""The deployment of least latency, T* within a latency bound, and the check of a bound.

**Least latency** (:func:`least_latency`): the state graph with each transition weighed by
its delay ``w(i, j) / C_v + D_j / B_(v,z) + delay_s(v, z)`` (min-sum), transitions slower than
an interval ruled out.

**T* within a latency bound** (:func:`throughput_within`): the interval is one of the stage
delays, found by bisection over them, each probe one least-latency relaxation.
"""

from __future__ import annotations

import math

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.engine.psg import backtrack, by_chunks, relax_generations, take_min
from inferplan.codesign.instance import CodesignInstance, Generation
from inferplan.codesign.plan import INTERVAL_RTOL, Deployment, build_deployment
from inferplan.errors import Infeasible, InvalidArgument

__all__ = ["check_latency", "least_delay", "least_latency", "throughput_within", "unreachable"]


def check_latency(latency: float) -> None:
    """Refuse a latency bound that is not a positive finite number of seconds."""
    if isinstance(latency, bool) or not (
        isinstance(latency, int | float) and math.isfinite(latency) and latency > 0
    ):
        raise InvalidArgument(f"must be a positive finite number of seconds, got {latency!r}",
                              field="latency")  # fmt: skip


def unreachable(
    beta: float, latency: float, least: float | None = None, floor: float = 0.0
) -> Infeasible:
    """The error every method raises when no plan meets both ``beta`` and ``latency``:
    ``least``, the least latency within the caps, when known, and ``floor``, the propagation
    delays of that deployment's links; when they are all of ``least`` (every stage takes no
    time at the caps, as where nothing is capped), the message blames them, not the caps."""
    if least is not None and least <= floor * (1 + INTERVAL_RTOL):
        return Infeasible(f"no plan reaches an interval of {beta:g} s and a latency of "
                          f"{latency:g} s: the least latency is {least:.6g} s, all of it the "
                          "propagation delays of the links on the way (delay_s), which no "
                          "capacity bought can shorten")  # fmt: skip
    more = "" if least is None else f" (the least latency within the caps is {least:.6g} s)"
    return Infeasible(f"no plan reaches an interval of {beta:g} s and a latency of "
                      f"{latency:g} s within the capacity caps{more}")  # fmt: skip


def least_delay(
    inst: CodesignInstance,
    capacity: FloatArray,
    bandwidth: FloatArray,
    beta: float | None,
    memory: FloatArray | None = None,
) -> tuple[float, list[int], list[int], list[int]]:
    """The deployment of least latency under ``capacity`` and ``bandwidth`` among those whose
    every stage takes at most ``beta`` (any, for ``None``) and whose every node holds its
    blocks within ``memory`` (bytes per node; today's when not given): its latency, path,
    partition and links (``inf`` and no path when none). The state graph, min-sum, each
    transition weighed by its compute, transfer and propagation delays; the nodes' pairs in
    chunks, so no table of every transition is ever held."""
    need = inst.memory_need
    memory = inst.memory if memory is None else memory
    limited = bool(np.isfinite(memory).any())
    forbidden = inst.forbidden
    limit = math.inf if beta is None else beta * (1 + INTERVAL_RTOL)

    def stage(gen: Generation, dist: FloatArray) -> tuple[FloatArray, IntArray]:
        have, room = capacity[gen.rows], memory[gen.rows]
        loads, work = inst.loads_of(gen.rows), inst.loads_or_zero_of(gen.rows)

        def step(part: slice) -> tuple[FloatArray, IntArray]:
            one = len(loads) == 1  # every node shares the loads (or one node)
            if np.isfinite(have[part]).all():  # inf / C is inf where i > j: one pass less
                delay = (loads if one else loads[part]) / have[part, None, None]
            else:  # 0 where no work, even at an unbounded capacity
                delay = (work if one else work[part]) / have[part, None, None]
                delay += forbidden
            if limited:
                delay[need[None] > room[part, None, None]] = np.inf
            if beta is not None:
                delay[delay > limit] = np.inf
            delay += dist[part, :, None]
            return take_min(delay)

        rows, width = dist.shape
        return by_chunks(rows, width, step)

    links = inst.sweep_links
    with np.errstate(divide="ignore"):
        link = inst.activation_bits[None, :] / bandwidth[links, None]
    if beta is not None:
        link[link > limit] = np.inf
    link += inst.link_delay[links, None]
    start = np.full((len(inst.node_ids), inst.n_cuts), np.inf)
    start[inst.source, 0] = 0.0
    relaxed = relax_generations(inst, start, stage, link, np.add)
    total = float(relaxed.stage_min[inst.target, -1])
    if not math.isfinite(total):
        return total, [], [], []
    return (total, *backtrack(inst, relaxed))


def least_latency(inst: CodesignInstance, beta: float | None = None) -> Deployment:
    """The deployment of least latency under the existing capacities, among those whose
    every stage takes at most ``beta`` when given (acyclic instances).

    Raises
    ------
    Infeasible
        If no deployment meets ``beta``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> fast = least_latency(inst)
    >>> fast.latency <= throughput_optimal(inst).latency
    True
    """
    inst.check_acyclic("the least-latency deployment")
    _, path, partition, links = least_delay(inst, inst.capacity, inst.bandwidth, beta)
    if not path:
        raise Infeasible(
            "no deployment runs the model as the network is (its memory fits no path's nodes, "
            "or every latency is beyond floating point)"
            if beta is None
            else f"no deployment reaches an interval of {beta:g} s as the network is"
        )
    return build_deployment(inst, path, partition, links=links)


def throughput_within(inst: CodesignInstance, latency: float) -> Deployment:
    """The deployment of least interval under the existing capacities among those whose
    latency is at most ``latency`` (acyclic instances): the interval is one of the stage
    delays, found by bisection over them, each probe one :func:`least_delay`.

    Raises
    ------
    Infeasible
        If every deployment is slower than ``latency``.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> best = throughput_optimal(inst)
    >>> throughput_within(inst, best.latency).interval == best.interval
    True
    """
    inst.check_acyclic("T* with a latency bound")
    check_latency(latency)
    C, B = inst.capacity, inst.bandwidth
    slack = latency * (1 + INTERVAL_RTOL)  # sums of the same delays in another order
    if least_delay(inst, C, B, None)[0] > slack:
        fastest = least_latency(inst).latency
        raise Infeasible(f"no deployment has a latency of {latency:g} s as the network is "
                         f"(the least is {fastest:.6g} s)")  # fmt: skip
    with np.errstate(divide="ignore", invalid="ignore"):
        work = inst.loads_or_zero_of(slice(None))
        node = np.where(work > 0, work / C[:, None, None], 0)
    candidates = np.unique(np.concatenate((
        node[:, ~inst.no_transition].ravel(),
        (inst.activation_bits[None, :] / B[:, None]).ravel(),
    )))  # fmt: skip
    lo, hi = 0, candidates.size - 1  # the largest delay admits every deployment
    while lo < hi:
        mid = (lo + hi) // 2
        if least_delay(inst, C, B, float(candidates[mid]))[0] <= slack:
            hi = mid
        else:
            lo = mid + 1
    _, path, partition, links = least_delay(inst, C, B, float(candidates[lo]))
    return build_deployment(inst, path, partition, links=links)
