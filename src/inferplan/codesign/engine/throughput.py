"""T*: the throughput-optimal deployment under the existing capacities.

The PSG state graph with bottleneck (min-max) relaxation of the stage delay
``max(w(i, j) / C_v, D_j / B_(v,z))``: by the compiled kernel
(:mod:`~inferplan.codesign.engine.compiled`, ``O(N)`` per node) or, in this module, one topological
generation at a time with numpy, all ``(i, j)`` pairs at once (``O(N^2)`` per node). On the
ideals of a layer graph, by reachability over the lattice of ideals inside a bisection on the
interval (:mod:`~inferplan.codesign.engine.lattice`, no tables of pairs). Among
several optimal deployments the first one met when reading the labels back from the target is
returned: at each node the fewest blocks received (so later nodes do more of the work), and
among links the earliest in file order. The labels are exact (every label is one of the
candidate delays, compared, never recomputed), so the rule does not depend on the engine.
"""

from __future__ import annotations

import math

import numpy as np

from inferplan.arrays import FloatArray, IntArray
from inferplan.codesign.engine import compiled
from inferplan.codesign.engine.compiled import Engine, compiled_engine
from inferplan.codesign.engine.lattice import lattice_throughput
from inferplan.codesign.engine.psg import backtrack, by_chunks, relax_generations
from inferplan.codesign.instance import CodesignInstance, Generation
from inferplan.codesign.memory import fits_somewhere, memory_infeasible
from inferplan.codesign.plan import Deployment, build_deployment
from inferplan.profiles import ideals
from inferplan.profiles.memory import graph_most_need

__all__ = ["LATTICE_CUTS", "lattice_engine", "throughput_optimal"]


def throughput_optimal(
    inst: CodesignInstance,
    capacity: FloatArray | None = None,
    bandwidth: FloatArray | None = None,
    *,
    memory: FloatArray | None = None,
    engine: Engine = "auto",
) -> Deployment:
    """The deployment of least output interval ``T*`` under ``capacity`` and ``bandwidth``
    (the instance's own when not given) among the deployments whose every node's need fits
    ``memory`` (bytes per node; the instance's own when not given, ``inf`` for unlimited).

    ``engine`` as for :func:`~inferplan.codesign.engine.psg.psg_path`: the compiled kernel
    (``O(N)`` per node and per link) or the all-pairs relaxation below. Both compare the same
    candidate delays, so they return the same deployment. On the ideals of a layer graph
    (cuts that are no chain) ``"auto"`` and ``"compiled"`` run the lattice engine
    (:mod:`~inferplan.codesign.engine.lattice`: no tables of pairs, the same interval) past
    :data:`LATTICE_CUTS` ideals unless a node's memory may limit it, and ``"numpy"`` the
    all-pairs relaxation.

    Examples
    --------
    >>> import inferplan
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> best = throughput_optimal(compile_instance(inferplan.tiered(seed=2), inferplan.vgg16()))
    >>> best.path[0], best.partition[-1]
    ('s', 16)

    Raises
    ------
    Infeasible
        If no deployment fits ``memory``.
    """
    inst.check_acyclic("T*")
    C = inst.capacity if capacity is None else capacity
    B = inst.bandwidth if bandwidth is None else bandwidth
    M = inst.memory if memory is None else np.asarray(memory, dtype=np.float64)
    if lattice_engine(engine, inst, M):
        path, partition = lattice_throughput(inst, C, B)
        return build_deployment(inst, path, partition, capacity, bandwidth)
    if compiled_engine(engine, inst):
        # the kernel's label at the target is the path's slowest stage, bit for bit
        interval, path, partition = compiled.throughput_kernel(inst, C, B, M)
        if not math.isfinite(interval) and not fits_somewhere(inst, M):
            raise memory_infeasible(inst, M)
        return build_deployment(inst, path, partition, capacity, bandwidth, interval=interval)
    path, partition = _vectorised(inst, C, B, M)
    return build_deployment(inst, path, partition, capacity, bandwidth)


# Below this many ideals the all-pairs step is the faster one (0.05 s against 0.2 s at 496
# ideals on an 8-node chain, 0.64 s against 0.31 s at 1,891: benchmarks/ideals.py); the
# lattice engine's fixed cost is its few dozen sweeps, which a baseline repeats every round.
LATTICE_CUTS = 1_000


def lattice_engine(engine: Engine, inst: CodesignInstance, memory: FloatArray) -> bool:
    """Whether T* runs on the lattice engine: ``engine`` not ``"numpy"``, cuts at the ideals
    of a layer graph that are no chain, more than :data:`LATTICE_CUTS` of them (or than the
    all-pairs step holds), a node time model that is the FLOPs between cuts, and every
    node's ``memory`` unlimited or more than any transition needs (the lattice engine keeps
    no memory limit)."""
    compiled_engine(engine)  # checks the engine's name
    if engine == "numpy" or inst.cuts.is_chain:
        return False
    small = inst.n_cuts <= min(LATTICE_CUTS, ideals.MAX_STATE_CUTS)
    if small or not inst.node_time.additive:
        return False
    return not np.isfinite(memory).any() or bool(
        np.min(memory) >= graph_most_need(inst.profile, inst.cuts)
    )


def _vectorised(
    inst: CodesignInstance, C: FloatArray, B: FloatArray, M: FloatArray
) -> tuple[list[int], list[int]]:
    """The path and partition of :func:`throughput_optimal` by the all-pairs relaxation:
    ``min_{i<=j} max(label[v, i], w(i, j) / C_v)`` over the ``i`` that fit ``M_v`` and the
    smallest ``i`` attaining it."""
    start = np.full((len(inst.node_ids), inst.n_cuts), np.inf)
    start[inst.source, 0] = 0.0
    need, shared = inst.memory_need, inst.shared_work
    loads = inst.work_between if shared else inst.node_loads  # (K, K), or (V, K, K) by node
    limited = bool(np.any(inst.most_need > M))

    def stage(gen: Generation, labels: FloatArray) -> tuple[FloatArray, IntArray]:
        capacity, memory = C[gen.rows], M[gen.rows]
        work = loads if shared else loads[gen.rows]

        def step(part: slice) -> tuple[FloatArray, IntArray]:
            # only the i some row has reached: an unreached i (label inf) never attains a
            # finite minimum, and where none is finite the i attaining is 0, as over all i
            reached = labels[part]
            live = np.flatnonzero(np.isfinite(reached).any(axis=0))
            load = work[live] if shared else work[part][:, live]
            delay = load / capacity[part, None, None]
            np.maximum(delay, reached[:, live, None], out=delay)
            if limited:
                np.copyto(delay, np.inf, where=need[live][None] > memory[part, None, None])
            if not live.size:
                return np.full(reached.shape, np.inf), np.zeros(reached.shape, dtype=np.int64)
            at = delay.argmin(axis=1)
            best = np.take_along_axis(delay, at[:, None, :], axis=1)[:, 0, :]
            chosen = live[at]
            chosen[np.isinf(best)] = 0
            return best, chosen

        rows, width = labels.shape
        return by_chunks(rows, width, step)

    D = inst.activation_bits
    relaxed = relax_generations(
        inst, start, stage, D[None, :] / B[inst.sweep_links, None], np.maximum
    )
    if (
        limited
        and not np.isfinite(relaxed.stage_min[inst.target, -1])
        and not fits_somewhere(inst, M)
    ):
        raise memory_infeasible(inst, M)
    path, partition, _ = backtrack(inst, relaxed)
    return path, partition
