"""A flow over the states ``(v, j)`` read back: its pipelines and its bottleneck cut.

A state is ``v W + j``. A compute arc ``(v, a) -> (v, b)`` belongs to node ``v``, a link arc
``(u, j) -> (v, j)`` to link ``e``; the flow enters at ``(s, 0)`` and leaves at ``(t, N)``.
Only link arcs can close a cycle (computing raises ``j``), and a cycle carries nothing from
the source to the target, so cycles are cancelled on the way.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["Arc", "cut", "pipelines"]


@dataclass
class Arc:
    """One arc of the state graph with its flow; ``element`` is ``("node", v)`` or
    ``("link", e)``."""

    tail: int
    head: int
    flow: float
    element: tuple[str, int]


def pipelines(
    arcs: Sequence[Arc], source: int, sink: int, total: float
) -> list[tuple[list[int], float]]:
    """A decomposition of the flow on ``arcs`` into source-sink walks: each one's arcs
    (indices) and rate. Cycles and flow below ``1e-9 total`` are dropped; the rates are scaled
    to sum to ``total`` exactly."""
    eps = 1e-9 * total
    rest = [a.flow if a.flow > eps else 0.0 for a in arcs]
    out: dict[int, list[int]] = {}
    for k, a in enumerate(arcs):
        if rest[k] > 0:
            out.setdefault(a.tail, []).append(k)
    found: list[tuple[list[int], float]] = []
    for _ in range(4 * len(arcs) + 4):  # each round empties an arc (or ends)
        walk: list[int] = []
        seen = {source: 0}
        state = source
        while state != sink:
            nxt = next((k for k in out.get(state, ()) if rest[k] > 0), None)
            if nxt is None:
                break
            walk.append(nxt)
            state = arcs[nxt].head
            if state in seen:  # a cycle: cancel it and go on from where it began
                loop = walk[seen[state] :]
                least = min(rest[k] for k in loop)
                for k in loop:
                    rest[k] = rest[k] - least if rest[k] - least > eps else 0.0
                del walk[seen[state] :]
                seen = {source: 0}
                for i, k in enumerate(walk):
                    seen[arcs[k].head] = i + 1
            else:
                seen[state] = len(walk)
        if state != sink:
            if not walk:
                break
            rest[walk[-1]] = 0.0  # a dead end left by the solver's tolerance
            continue
        rate = min(rest[k] for k in walk)
        for k in walk:
            rest[k] = rest[k] - rate if rest[k] - rate > eps else 0.0
        found.append((walk, rate))
    carried = sum(rate for _, rate in found)
    return [(walk, rate * total / carried) for walk, rate in found] if carried > 0 else []


def cut(
    arcs: Sequence[Arc], source: int, saturated: set[tuple[str, int]], total: float
) -> set[tuple[str, int]]:
    """The saturated elements on the edge of what the source still reaches in the residual
    state graph (forward along arcs of unsaturated elements, backward along arcs with flow):
    a cut that no more flow crosses. All of ``saturated`` when the residual graph reaches
    every arc's head (the solver's tolerance)."""
    eps = 1e-9 * total
    forward: dict[int, list[Arc]] = {}
    backward: dict[int, list[Arc]] = {}
    for a in arcs:
        forward.setdefault(a.tail, []).append(a)
        backward.setdefault(a.head, []).append(a)
    reached = {source}
    queue = deque([source])
    while queue:
        state = queue.popleft()
        steps = [a.head for a in forward.get(state, ()) if a.element not in saturated]
        steps += [a.tail for a in backward.get(state, ()) if a.flow > eps]
        for nxt in steps:
            if nxt not in reached:
                reached.add(nxt)
                queue.append(nxt)
    edge = {a.element for a in arcs if a.tail in reached and a.head not in reached}
    found = edge & saturated
    return found if found else set(saturated)
