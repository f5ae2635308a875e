"""T* on any directed network, cycles included: the least output interval by MILPs.

The state-graph relaxation of :mod:`~inferplan.codesign.engine.throughput` needs an acyclic network
(on a cycle a state path may visit a node twice). Here the deployment is a simple path of the
co-design MILP's state flow (:class:`~inferplan.codesign.milp.cost.StateFlow`), each transition
weighed by its delay: ``w(i, j) / C_v`` for a node that receives ``i`` blocks and sends ``j``,
``D_j / B_e`` for a link. ``T*`` is one of those delays, so it is found by bisection over them:
an interval ``T`` is reachable when a simple path uses only transitions of delay at most ``T``,
a question of feasibility for HiGHS whose constraints have only 0 and +-1 coefficients. Every
delay is compared exactly, never scaled, so the answer does not depend on how many decades the
capacities, bandwidths and block sizes span. The interval returned is recomputed from the
deployment by the stage arithmetic of :mod:`~inferplan.codesign.plan`.
"""

from __future__ import annotations

import math
import time

import numpy as np

from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.memory import memory_infeasible
from inferplan.codesign.milp.cost import StateFlow
from inferplan.codesign.plan import Deployment, build_deployment
from inferplan.errors import InvalidArgument

__all__ = ["throughput_milp"]


def throughput_milp(inst: CodesignInstance, *, time_limit: float | None = None) -> Deployment:
    """The deployment of least output interval ``T*`` under the instance's capacities, on any
    directed network (compile it with ``require_acyclic=False`` for cycles).

    Parameters
    ----------
    inst
        A compiled instance.
    time_limit
        Seconds HiGHS may take in all; ``None`` for no limit.

    Raises
    ------
    InvalidArgument
        If HiGHS stops at the time limit before the bisection ends (naming ``time_limit``), or
        every deployment has a delay beyond floating point.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=2), inferplan.vgg16())
    >>> abs(throughput_milp(inst).interval / throughput_optimal(inst).interval - 1) < 1e-6
    True
    """
    if time_limit is not None and not (math.isfinite(time_limit) and time_limit > 0):
        raise InvalidArgument(f"must be a positive finite number of seconds, got {time_limit!r}",
                              field="time_limit")  # fmt: skip
    deadline = None if time_limit is None else time.monotonic() + time_limit
    with np.errstate(over="ignore", divide="ignore"):
        node_delay = inst.node_loads / inst.capacity[:, None, None]
        link_delay = inst.activation_bits[None, :] / inst.bandwidth[:, None]
    limited = bool(np.any(inst.memory < inst.most_need))
    if limited:  # only the transitions that fit today's memory
        node_delay = np.where(inst.memory_need[None] > inst.memory[:, None, None], np.inf,
                              node_delay)  # fmt: skip
    flow = StateFlow(inst, node_delay, link_delay)
    delays = np.unique(flow.cost)  # sorted; T* is one of them
    if limited and not delays.size:
        raise memory_infeasible(inst, inst.memory)
    lo, hi, found = 0, delays.size - 1, None
    while found is None or lo < hi:
        mid = hi if found is None else (lo + hi) // 2
        left = None if deadline is None else deadline - time.monotonic()
        code, x, _, message = flow.solve(flow.cost <= delays[mid], 1.0, left, objective=False)
        if x is not None:
            hi, found = mid, x
        elif code == 2 and found is not None:
            lo = mid + 1
        elif code == 2 and limited:
            raise memory_infeasible(inst, inst.memory)
        elif code == 2:
            raise InvalidArgument(
                "every deployment has a stage whose delay is beyond floating "
                "point: check the units of the network and the profile"
            )
        else:
            raise InvalidArgument(f"HiGHS stopped before T* was found: {message}",
                                  field="time_limit")  # fmt: skip
    path, partition = flow.deployment(found)
    return build_deployment(inst, path, partition)
