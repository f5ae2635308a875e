"""T*: the throughput-optimal deployment under the existing capacities.

The PSG state graph with bottleneck (min-max) relaxation of the stage delay
``max((S_j - S_i) / C_v, D_j / B_(v,z))``. Among several optimal deployments the first one met
when reading the labels back from the target is returned: at each node the fewest blocks
received (so later nodes do more of the work), and among links the earliest in file order.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from inferplan.codesign.instance import CodesignInstance
from inferplan.codesign.plan import Deployment, stage_delays
from inferplan.codesign.psg import backtrack

__all__ = ["throughput_optimal"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _compute_delays(S: FloatArray, capacity: float) -> FloatArray:
    """``(S_j - S_i) / capacity`` for ``i <= j``; ``inf`` below the diagonal."""
    delay = (S[None, :] - S[:, None]) / capacity
    delay[np.tril_indices(S.size, -1)] = np.inf
    return delay


def throughput_optimal(
    inst: CodesignInstance,
    capacity: FloatArray | None = None,
    bandwidth: FloatArray | None = None,
) -> Deployment:
    """The deployment of least output interval ``T*`` under ``capacity`` and ``bandwidth``
    (the instance's own when not given)."""
    C = inst.capacity if capacity is None else capacity
    B = inst.bandwidth if bandwidth is None else bandwidth
    S, D = inst.prefix_flops, inst.activation_bits
    V, width = len(inst.node_ids), inst.n_blocks + 1
    label = np.full((V, width), np.inf)
    stage_min = np.full((V, width), np.inf)
    label[inst.source, 0] = 0.0
    for v in range(V):
        stage_min[v] = np.min(np.maximum(label[v][:, None], _compute_delays(S, C[v])), axis=0)
        outs = inst.out_links[v]
        if outs.size:
            targets = inst.link_dst[outs]
            candidate = np.maximum(stage_min[v][None, :], D[None, :] / B[outs, None])
            label[targets] = np.minimum(label[targets], candidate)

    def choose(v: int, j: int) -> int:
        return int(np.argmin(np.maximum(label[v][: j + 1], (S[j] - S[: j + 1]) / C[v])))

    path, partition = backtrack(
        inst,
        stage_min,
        lambda links, j: D[j] / B[links],
        choose,
        combine=np.maximum,
    )
    compute, transfer = stage_delays(inst, path, partition, C, B)
    interval = float(max(compute.max(), transfer.max() if transfer.size else 0.0))
    return Deployment(
        path=tuple(inst.node_ids[v] for v in path),
        partition=tuple(partition),
        interval=interval,
    )
