"""How long a node takes for a block range in a flow plan, read off the instance's node time
model (:mod:`inferplan.codesign.timing`, the seam every co-design planner reads).

With the default model a node's time is the range's FLOPs over the node's capacity:
``W(a, b) / C_v`` seconds per inference, so that a node holding ``(a, b]`` sustains
``C_v / W(a, b)`` inferences per second and its load at rate ``f`` is ``f W(a, b)`` FLOP/s.
"""

from __future__ import annotations

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.instance import CodesignInstance

__all__ = ["range_seconds", "range_work"]


def range_work(inst: CodesignInstance) -> FloatArray:
    """``work[a, b]``: what one inference through blocks ``a+1..b`` asks of a node, in units
    of its capacity (FLOPs; ``inf`` where ``(a, b]`` is empty or no range: cut ``a`` not
    inside cut ``b``)."""
    work = np.array(inst.work_between, dtype=np.float64)
    np.fill_diagonal(work, np.inf)  # an empty range is no range (relaying costs no time)
    return work


def range_seconds(inst: CodesignInstance) -> FloatArray:
    """``seconds[v, a, b]``: the time node ``v`` takes for one inference through blocks
    ``a+1..b`` (``inf`` where it cannot run them at all)."""
    work = range_work(inst)
    with np.errstate(divide="ignore", invalid="ignore"):
        seconds = work[None, :, :] / inst.capacity[:, None, None]
    seconds[np.isnan(seconds)] = 0.0  # no work on no capacity: free
    return seconds
