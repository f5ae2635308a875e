"""T*: the throughput-optimal deployment under the existing capacities.

The PSG state graph with bottleneck (min-max) relaxation of the stage delay
``max((S_j - S_i) / C_v, D_j / B_(v,z))``: by the compiled kernel
(:mod:`~inferplan.codesign.compiled`, ``O(N)`` per node) or, in this module, one topological
generation at a time with numpy. Among several
optimal deployments the first one met when reading the labels back from the target is
returned: at each node the fewest blocks received (so later nodes do more of the work), and
among links the earliest in file order. The labels are exact (every label is one of the
candidate delays, compared, never recomputed), so the rule does not depend on the engine or on
which of the two numpy compute steps below ran.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from inferplan.codesign import compiled
from inferplan.codesign.compiled import Engine, compiled_engine
from inferplan.codesign.instance import CodesignInstance, Generation
from inferplan.codesign.plan import Deployment, slowest_stage
from inferplan.codesign.psg import (
    DENSE_WIDTH,
    backtrack,
    range_min,
    relax_generations,
    sparse_table,
)

__all__ = ["throughput_optimal"]

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]


def _bottleneck_dense(
    work: FloatArray, C: FloatArray, label: FloatArray
) -> tuple[FloatArray, IntArray]:
    """``min_{i<=j} max(label[r, i], (S_j - S_i) / C[r])`` comparing all pairs, ``O(N^2)``,
    and the smallest ``i`` attaining it."""
    total = np.maximum(label[:, :, None], work / C[:, None, None])
    return total.min(axis=1), total.argmin(axis=1)


def _bottleneck_search(S: FloatArray, C: FloatArray, label: FloatArray) -> FloatArray:
    """The same minimum by bisection, ``O(N log N)`` per row.

    With ``R(i) = min(label[i..j])`` (non-decreasing in ``i``) and the compute delay
    ``g(i) = (S_j - S_i) / C`` (non-increasing), ``min_i max(label_i, g(i)) = min_i max(R(i),
    g(i))``, reached where the two cross: at the first ``i`` with ``R(i) >= g(i)`` (value
    ``R(i)``) or just before it (value ``g(i - 1)``).
    """
    rows, width = label.shape
    table = sparse_table(label)
    j = np.broadcast_to(np.arange(width), (rows, width))
    lo, hi = np.zeros((rows, width), dtype=np.int64), j + 1  # the crossing lies in [lo, hi]
    row = np.arange(rows)[:, None]

    def crossed(i: IntArray) -> npt.NDArray[np.bool_]:
        return range_min(table, i, j) >= (S[j] - S[np.minimum(i, j)]) / C[row]

    while (lo < hi).any():
        mid = (lo + hi) // 2
        up = crossed(mid)
        hi = np.where(up & (lo < hi), mid, hi)
        lo = np.where(~up & (lo < hi), mid + 1, lo)
    at = np.where(lo <= j, range_min(table, np.minimum(lo, j), j), np.inf)
    before = np.where(lo > 0, (S[j] - S[np.maximum(lo - 1, 0)]) / C[row], np.inf)
    return np.minimum(at, before)


def throughput_optimal(
    inst: CodesignInstance,
    capacity: FloatArray | None = None,
    bandwidth: FloatArray | None = None,
    *,
    engine: Engine = "auto",
) -> Deployment:
    """The deployment of least output interval ``T*`` under ``capacity`` and ``bandwidth``
    (the instance's own when not given).

    ``engine`` as for :func:`~inferplan.codesign.psg.psg_path`: the compiled kernel
    (``O(N)`` per node and per link) or the vectorised relaxation below. Both compare the
    same candidate delays, so they return the same deployment.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> best = throughput_optimal(compile_instance(inferplan.tiered(seed=2), inferplan.vgg16()))
    >>> best.path[0], best.partition[-1]
    ('s', 16)
    """
    inst.check_acyclic("T*")
    C = inst.capacity if capacity is None else capacity
    B = inst.bandwidth if bandwidth is None else bandwidth
    if compiled_engine(engine, inst):
        # the kernel's label at the target is the path's slowest stage, bit for bit
        interval, path, partition = compiled.throughput_kernel(inst, C, B)
        _, bottleneck = slowest_stage(inst, path, partition, capacity, bandwidth)
    else:
        path, partition = _vectorised(inst, C, B)
        interval, bottleneck = slowest_stage(inst, path, partition, capacity, bandwidth)
    names = inst.node_ids
    return Deployment(tuple([names[v] for v in path]), tuple(partition), interval, bottleneck)


def _vectorised(
    inst: CodesignInstance, C: FloatArray, B: FloatArray
) -> tuple[list[int], list[int]]:
    """The path and partition of :func:`throughput_optimal` by the vectorised relaxation."""
    S, D = inst.prefix_flops, inst.activation_bits
    V, W = len(inst.node_ids), S.size
    start = np.full((V, W), np.inf)
    start[inst.source, 0] = 0.0
    work = inst.work_between

    def stage(gen: Generation, labels: FloatArray) -> tuple[FloatArray, IntArray | None]:
        if W <= DENSE_WIDTH:
            return _bottleneck_dense(work, C[gen.rows], labels)
        return _bottleneck_search(S, C[gen.rows], labels), None

    relaxed = relax_generations(
        inst, start, stage, D[None, :] / B[inst.sweep_links, None], np.maximum
    )

    def choose(v: int, j: int) -> int:
        return int(np.argmin(np.maximum(relaxed.label[v][: j + 1], (S[j] - S[: j + 1]) / C[v])))

    path, partition, _ = backtrack(inst, relaxed, choose)
    return path, partition
