"""All the throughput-optimal deployments at once: counting them and drawing one at random.

Many deployments usually share ``T*`` (they share the bottleneck stage and differ elsewhere),
and the paper's PWF takes "the first found by the solver". Which one that is depends on
details of a solver the paper does not give, and it changes PWF's cost a lot. Drawing an
optimum uniformly at random models "some optimum" without favouring any solver.

A deployment reaches interval ``T`` exactly when each of its transitions does: a state graph
keeping only transitions with delay ``<= T``, whose source-to-terminal paths are the
deployments. Counting those paths backwards (in log space, since the count grows
exponentially with the network) and walking forwards with probabilities proportional to the
counts draws each deployment with equal probability.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from inferplan.arrays import FloatArray
from inferplan.codesign.instance import CodesignInstance

__all__ = ["OptimalDeployments"]


# A transition whose delay is within this relative slack of T counts as reaching T.
SLACK = 1e-9


def _logsumexp(values: FloatArray, axis: int) -> FloatArray:
    """``log(sum(exp(values)))`` along ``axis``, ``-inf`` for empty sums (numpy only: scipy's
    version costs more than the rest of a small count)."""
    peak = np.max(values, axis=axis, keepdims=True)
    safe = np.where(np.isfinite(peak), peak, 0.0)
    with np.errstate(divide="ignore"):
        out = np.log(np.sum(np.exp(values - safe), axis=axis, keepdims=True)) + safe
    result: FloatArray = np.squeeze(out, axis=axis)
    return result


def _log_counts(
    inst: CodesignInstance,
    capacity: FloatArray,
    bandwidth: FloatArray,
    interval: float,
    memory: FloatArray,
) -> tuple[FloatArray, list[npt.NDArray[np.bool_]]]:
    """``log`` of the number of ways to finish from each state ``(v, i)`` within ``interval``,
    and for each node which ``(i, j)`` compute stages fit (its time and its ``memory``)."""
    D = inst.activation_bits
    V, W = len(inst.node_ids), D.size
    limit = interval * (1 + SLACK)
    upper = ~inst.no_transition
    loads = inst.node_loads
    fits = [upper & (loads[v if len(loads) > 1 else 0] <= limit * capacity[v])
            & (inst.memory_need <= memory[v]) for v in range(V)]  # fmt: skip
    log_count = np.full((V, W), -np.inf)
    for v in reversed(range(V)):  # nodes are indexed in topological order
        if v == inst.target:
            log_count[v] = np.where(fits[v][:, W - 1], 0.0, -np.inf)
            continue
        outs = inst.out_links[v]
        if outs.size == 0:
            continue
        # log of sum over links e=(v,z) of [D_j fits B_e] * count(z, j), for each j
        sendable = D[None, :] <= limit * bandwidth[outs, None]
        arriving = np.where(sendable, log_count[inst.link_dst[outs]], -np.inf)
        after = _logsumexp(arriving, axis=0)
        log_count[v] = _logsumexp(np.where(fits[v], after[None, :], -np.inf), axis=1)
    return log_count, fits


@dataclass(frozen=True, eq=False)
class OptimalDeployments:
    """The deployments of ``inst`` that reach ``interval`` under ``capacity``/``bandwidth``
    and fit ``memory`` (bytes per node; the instance's own when not given): their number, and
    uniform draws among them (the counts are computed once).

    Examples
    --------
    >>> import inferplan, numpy as np
    >>> from inferplan.codesign import compile_instance, throughput_optimal
    >>> inst = compile_instance(inferplan.tiered(seed=4), inferplan.resnet50())
    >>> ties = OptimalDeployments(inst, inst.capacity, inst.bandwidth,
    ...                           throughput_optimal(inst).interval)
    >>> ties.count >= 1
    True
    >>> path, partition = ties.draw(np.random.default_rng(0))
    >>> partition[-1]
    18
    """

    inst: CodesignInstance
    capacity: FloatArray
    bandwidth: FloatArray
    interval: float
    memory: FloatArray | None = None

    @cached_property
    def _tables(self) -> tuple[FloatArray, list[npt.NDArray[np.bool_]]]:
        memory = self.inst.memory if self.memory is None else self.memory
        return _log_counts(self.inst, self.capacity, self.bandwidth, self.interval, memory)

    @property
    def count(self) -> float:
        """How many deployments reach the interval (a float: it can be astronomically large)."""
        return float(np.exp(self._tables[0][self.inst.source, 0]))

    def draw(self, rng: np.random.Generator) -> tuple[list[int], list[int]]:
        """A deployment drawn uniformly: node indices of the path and the partition (blocks
        completed up to and including each node).

        Raises
        ------
        ValueError
            If no deployment reaches the interval.
        """
        inst, (log_count, fits) = self.inst, self._tables
        if not np.isfinite(log_count[inst.source, 0]):
            raise ValueError(f"no deployment reaches an interval of {self.interval:g} s")
        D, W = inst.activation_bits, inst.activation_bits.size
        limit = self.interval * (1 + SLACK)
        path, partition = [inst.source], []
        v, i = inst.source, 0
        while True:
            options: list[tuple[int, int]] = []
            weights: list[float] = []
            if v == inst.target and fits[v][i, W - 1]:
                options.append((-1, W - 1))
                weights.append(0.0)
            for e in inst.out_links[v]:
                z = int(inst.link_dst[e])
                ok = fits[v][i] & (limit * self.bandwidth[e] >= D) & np.isfinite(log_count[z])
                for block in np.flatnonzero(ok).tolist():
                    options.append((z, block))
                    weights.append(float(log_count[z, block]))
            logw = np.asarray(weights)
            p = np.exp(logw - logw.max())
            z, done = options[int(rng.choice(len(options), p=p / p.sum()))]
            partition.append(done)
            if z == -1:
                return path, partition
            path.append(z)
            v, i = z, done
