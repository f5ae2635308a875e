"""Node memory in the co-design problem: the memory term of each transition, and what a
deployment needs, has and buys.

A node ``v`` running blocks ``a+1..b`` needs ``need(a, b)`` bytes
(:func:`~inferplan.profiles.memory.memory_need`). With memory ``M_v`` (bytes; unlimited when
not given) and a memory cost ``h_v`` (``memory_price`` per byte, or any cost function; none
when memory cannot be added), the transition's memory term is

    h_v(max(0, need(a, b) - M_v))          (inf beyond what h_v can add)

which depends on ``(v, a, b)`` alone: one of the extra terms of the state graph
(:class:`~inferplan.codesign.instance.Terms`, built by
:func:`~inferplan.codesign.instance.memory_terms`). A node whose memory cannot be added has a pure
limit, ``need(a, b) <= M_v``, which the compiled engine keeps linear; a node that can buy
memory and needs to for some transition is priced into a table (``O(N^2)`` for that node).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from inferplan.arrays import FloatArray
from inferplan.codesign.instance import CodesignInstance
from inferplan.errors import Infeasible
from inferplan.units import si

__all__ = ["NodeMemory", "fits_somewhere", "memory_infeasible", "most_memory", "path_needs"]


def path_needs(
    inst: CodesignInstance, path: Sequence[int], partition: Sequence[int]
) -> list[float]:
    """The bytes each node of a deployment needs (node indices and cumulative partition)."""
    if len(path) != len(partition):
        raise ValueError("one partition point per path node")
    done = [0, *partition[:-1]]
    return [inst.need(a, b) for a, b in zip(done, partition, strict=True)]


@dataclass(frozen=True)
class NodeMemory:
    """What one path node of a plan needs and has: ``need`` (bytes), ``memory`` after the
    upgrades (``None``: unlimited) and the bytes ``added``."""

    id: str
    need: float
    memory: float | None
    added: float

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "need": self.need, "memory": self.memory, "added": self.added}


def most_memory(inst: CodesignInstance) -> FloatArray:
    """The most memory each node can have: its own and all it can add (bytes)."""
    return inst.memory + inst.memory_pricing.cap


def fits_somewhere(inst: CodesignInstance, limit: FloatArray) -> bool:
    """Whether some deployment's every node needs at most ``limit`` bytes (per node):
    reachability on the state graph, node by node in topological order (sweeps until nothing
    changes when the instance has cycles; a walk through a cycle counts then). On a chain of
    blocks the feasible ``a`` of each ``b`` are a window (``need`` is non-increasing in
    ``a``); on ideals every pair is checked (``O(W^2)`` per node)."""
    need = inst.memory_need
    W = need.shape[0]
    reach = np.zeros((len(inst.node_ids), W), dtype=bool)
    reach[inst.source, 0] = True
    above = np.arange(W)[::-1]  # the entries below the diagonal of each column (need inf)
    changed = True
    while changed:
        changed = False
        for v in range(len(inst.node_ids)):
            row = reach[v]
            if not row.any():
                continue
            if inst.cuts.is_chain:
                first = (need > limit[v]).sum(axis=0) - above  # the least feasible a of each b
                done = np.concatenate(([0], np.cumsum(row)))
                sent = done[np.arange(W) + 1] - done[np.minimum(first, W)] > 0
            else:  # ideals: no window, every pair
                sent = (row[:, None] & (need <= limit[v])).any(axis=0)
            if v == inst.target:
                if sent[-1]:
                    return True
                continue
            heads = inst.link_dst[inst.out_links[v]]
            grown = reach[heads] | sent[None, :]
            if not np.array_equal(grown, reach[heads]):
                reach[heads] = grown
                changed = not inst.acyclic
    return False


def memory_infeasible(
    inst: CodesignInstance, limit: FloatArray, beta: float | None = None
) -> Infeasible:
    """The error when no deployment fits ``limit`` (bytes per node, what each node can hold
    at most): it names the node or the block (or layer) whose need does not fit."""
    N = inst.last_cut
    head = "no deployment fits the nodes' memory"
    if beta is not None:
        head = f"no plan reaches an interval of {beta:g} s: {head}"
    ends = ((inst.source, inst.need(0, 0), "the input it holds"),
            (inst.target, inst.need(N, N), "the output it holds"))  # fmt: skip
    for v, least, what in ends:
        if limit[v] < least:
            return Infeasible(f"{head} (node {inst.node_ids[v]!r} holds at most "
                              f"{si(float(limit[v]), 'B')} and needs at least {si(least, 'B')}, "
                              f"{what})")  # fmt: skip
    alone = _alone(inst)
    n = int(np.argmax(alone))  # the block whose need alone is largest
    most = float(np.max(limit))
    block = inst.cuts.units[n]
    if alone[n] > most:
        return Infeasible(f"{head} (block {block!r} alone needs {si(float(alone[n]), 'B')}; no "
                          f"node holds more than {si(most, 'B')})")  # fmt: skip
    return Infeasible(f"{head} (the blocks need {si(inst.need(0, N), 'B')} in all, the largest "
                      f"one alone, {block!r}, {si(float(alone[n]), 'B')}: no path's nodes hold "
                      "them, each at most its memory and what it can add)")  # fmt: skip


def _alone(inst: CodesignInstance) -> FloatArray:
    """The need of each block, or each layer of a layer graph, run alone (from one pair of
    ideals per layer, one ideal less that layer: no table of pairs)."""
    members = inst.cuts.members
    if members is None or inst.cuts.is_chain:
        return np.array([inst.need(n - 1, n) for n in range(1, inst.n_cuts)])
    assert inst.cuts.covers is not None
    lower, upper = inst.cuts.covers
    layer = np.argmax(members[upper] & ~members[lower], axis=1)  # the one layer each adds
    alone = np.zeros(members.shape[1])
    for x, k in zip(*np.unique(layer, return_index=True), strict=True):
        alone[x] = inst.need(int(lower[k]), int(upper[k]))
    return alone
