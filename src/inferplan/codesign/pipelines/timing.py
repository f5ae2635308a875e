"""How long a node takes for a block range in a flow plan, read off the instance's node time
model (:mod:`inferplan.codesign.timing`, the seam every co-design planner reads).

With the default model a node's time is the range's FLOPs over the node's capacity:
``W(a, b) / C_v`` seconds per inference, so that a node holding ``(a, b]`` sustains
``C_v / W(a, b)`` inferences per second and its load at rate ``f`` is ``f W(a, b)`` FLOP/s. A
per-node model (:class:`~inferplan.codesign.timing.stage.PerNodeTimeModel`) gives node ``v``
its own load ``w_v(a, b)`` in place of ``W(a, b)``.
"""

from __future__ import annotations

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.instance import CodesignInstance

__all__ = ["range_seconds", "range_work"]


def range_work(inst: CodesignInstance) -> FloatArray:
    """``work[v, a, b]``: what one inference through blocks ``a+1..b`` asks of node ``v``, in
    units of its capacity (FLOPs; ``inf`` where ``(a, b]`` is empty or no range: cut ``a`` not
    inside cut ``b``). A read-only view of one shared table when every node shares it."""
    V, K = len(inst.node_ids), inst.n_cuts
    diagonal = np.arange(K)
    if inst.shared_work:
        shared = np.array(inst.work_between, dtype=np.float64)
        shared[diagonal, diagonal] = np.inf  # an empty range is no range (relaying is free)
        return np.broadcast_to(shared, (V, K, K))
    work = np.array(inst.node_loads, dtype=np.float64)
    work[:, diagonal, diagonal] = np.inf
    return work


def range_seconds(inst: CodesignInstance) -> FloatArray:
    """``seconds[v, a, b]``: the time node ``v`` takes for one inference through blocks
    ``a+1..b`` (``inf`` where it cannot run them at all)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = range_work(inst) / inst.capacity[:, None, None]
    seconds[np.isnan(seconds)] = 0.0  # no work on no capacity: free
    return seconds
