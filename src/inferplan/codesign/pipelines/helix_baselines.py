"""Helix's own layout methods, as comparators for :func:`~.helix.solve_layout`.

The problem and its rules are those of :mod:`.helix` (one contiguous range of ``k`` layers per
node, ``k`` a key of its table; an edge carries flow only if its head starts where its tail
ends; no relays). Three methods Helix (Mei et al., ASPLOS 2025) reports, restated in
docs/pipelines.md:

* :func:`helix_milp` -- Helix's MILP as Helix formulates it: per node an integer start layer and
  one binary per layer count, per edge a binary "valid" (head starts where tail ends, big-M),
  flow on an edge at most its capacity times its binary, a node's inflow at most
  ``sum_k T(k) [holds k]``; solved by HiGHS under a time limit.
* :func:`petals_layout` -- the Petals heuristic (Borzunov et al., 2023) as Helix runs it: nodes
  in a seeded random order, each taking as many layers as it can hold where the swarm is
  weakest.
* :func:`swarm_layout` -- the SWARM heuristic (Ryabinin et al., 2023) as Helix runs it: equal
  stages, each node (fastest first) joining the stage of least total throughput.

Every layout returned is valued by :func:`~.helix.layout_flow`, the exact max flow.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from inferplan.codesign.pipelines.helix import (
    SINK,
    SOURCE,
    LayoutInstance,
    LayoutSolution,
    layout_flow,
)
from inferplan.codesign.pipelines.layout_milp import Rows, solve_milp
from inferplan.errors import InvalidArgument

__all__ = ["HeuristicLayout", "helix_milp", "petals_layout", "swarm_layout"]

_TOL = 1e-5


@dataclass(frozen=True)
class HeuristicLayout:
    """A heuristic's layout ``{node: (first_layer, k)}`` and its exact max flow (tokens/s)."""

    layout: Mapping[str, tuple[int, int]]
    flow: float


def _valued(instance: LayoutInstance, layout: dict[str, tuple[int, int]]) -> HeuristicLayout:
    return HeuristicLayout(layout=layout, flow=layout_flow(instance, layout))


def helix_milp(instance: LayoutInstance, *, time_limit_s: float = 150.0) -> LayoutSolution:
    """Helix's per-node MILP, solved by HiGHS within ``time_limit_s``.

    Every node with a table holds one range (as in Helix: a range that carries nothing is as
    good as none). ``flow`` is the exact max flow of the incumbent's layout (at least the
    MILP's value of it); ``bound`` is HiGHS's dual bound; ``status`` is ``"optimal"`` when HiGHS
    proved the incumbent optimal, else ``"time_limit"`` (with no incumbent: flow 0, no layout).

    Examples
    --------
    >>> from inferplan.codesign.pipelines.helix import LayoutNode
    >>> two = LayoutInstance(
    ...     layers=2,
    ...     nodes=(LayoutNode("a", {1: 3.0, 2: 1.0}), LayoutNode("b", {1: 2.0})),
    ...     edges={("source", "a"): 9.0, ("a", "b"): 9.0, ("b", "sink"): 9.0, ("a", "sink"): 9.0},
    ... )
    >>> best = helix_milp(two, time_limit_s=10)
    >>> best.flow, best.status, dict(best.layout)
    (2.0, 'optimal', {'a': (0, 1), 'b': (1, 1)})
    """
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        raise InvalidArgument(
            f"`time_limit_s` must be a positive number of seconds, got {time_limit_s}"
        )
    start = time.monotonic()
    L = instance.layers
    nodes = [n for n in instance.nodes if n.throughput]
    names = {n.name for n in nodes}
    # columns: s_v (integer start) | b_vk (binary, holds k) | f_e (flow) | d_e (binary, valid)
    s_col = {n.name: i for i, n in enumerate(nodes)}
    b_col: dict[str, dict[int, int]] = {}
    col = len(nodes)
    for n in nodes:
        b_col[n.name] = {}
        for k in sorted(n.throughput):
            b_col[n.name][k] = col
            col += 1
    edges = [
        (u, v, c)
        for (u, v), c in instance.edges.items()
        if c > 0 and u in names | {SOURCE} and v in names | {SINK} and (u, v) != (SOURCE, SINK)
    ]
    f0 = col
    d0 = f0 + len(edges)
    ncol = d0 + len(edges)
    if not edges:
        return LayoutSolution(0.0, 0.0, "optimal", time.monotonic() - start, {})

    constraints = Rows()
    row = constraints.add

    def end(v: str) -> list[tuple[int, float]]:
        """The end layer ``s_v + sum_k k b_vk`` as (column, coefficient) pairs."""
        return [(s_col[v], 1.0)] + [(c, float(k)) for k, c in b_col[v].items()]

    table = {n.name: n.throughput for n in nodes}
    for v in names:
        row([(c, 1.0) for c in b_col[v].values()], 1.0, 1.0)  # exactly one layer count
        row(end(v), -np.inf, float(L))  # the range ends within the model
    into: dict[str, list[int]] = {v: [] for v in names}
    out: dict[str, list[int]] = {v: [] for v in names}
    for j, (u, v, c) in enumerate(edges):
        f, d = f0 + j, d0 + j
        row([(f, 1.0), (d, -c)], -np.inf, 0.0)  # flow <= capacity * valid
        if u == SOURCE:
            row([(s_col[v], 1.0), (d, float(L))], -np.inf, float(L))  # valid only if s_v = 0
        elif v == SINK:
            row([(d, float(L))] + [(c_, -a) for c_, a in end(u)], -np.inf, 0.0)  # e_u = L
        else:
            # valid only if s_v = e_u: L d <= L + (s_v - e_u) and L d <= L - (s_v - e_u)
            gap = [(s_col[v], 1.0)] + [(c_, -a) for c_, a in end(u)]
            row([(d, float(L))] + [(c_, -a) for c_, a in gap], -np.inf, float(L))
            row([(d, float(L)), *gap], -np.inf, float(L))
        if u != SOURCE:
            out[u].append(f)
        if v != SINK:
            into[v].append(f)
    for v in names:
        row([(f, 1.0) for f in into[v]] + [(f, -1.0) for f in out[v]], 0.0, 0.0)
        row(
            [(f, 1.0) for f in into[v]] + [(c, -table[v][k]) for k, c in b_col[v].items()],
            -np.inf,
            0.0,
        )

    c_obj = np.zeros(ncol)
    for j, (u, _, _) in enumerate(edges):
        if u == SOURCE:
            c_obj[f0 + j] = -1.0
    lower = np.zeros(ncol)
    upper = np.ones(ncol)
    upper[: len(nodes)] = L - 1
    upper[f0:d0] = [c for _, _, c in edges]
    integrality = np.ones(ncol)
    integrality[f0:d0] = 0
    left = time_limit_s - (time.monotonic() - start)
    res = solve_milp(c_obj, constraints, integrality, lower, upper, left)
    # A valid bound without HiGHS's: the source's edges carry every token.
    trivial = float(sum(c for u, _, c in edges if u == SOURCE))
    dual = getattr(res, "mip_dual_bound", None)
    bound = -float(dual) if dual is not None and math.isfinite(dual) else trivial
    bound = min(bound, trivial)
    if res.x is None:
        return LayoutSolution(0.0, bound, "time_limit", time.monotonic() - start, {})
    layout: dict[str, tuple[int, int]] = {}
    for n in nodes:
        k = max(b_col[n.name], key=lambda k: res.x[b_col[n.name][k]])
        layout[n.name] = (min(round(res.x[s_col[n.name]]), L - k), k)
    flow = layout_flow(instance, layout)
    # HiGHS's optimum may exceed the exact flow by its feasibility tolerance (1e-6 a row).
    optimal = res.status == 0 and flow >= bound - _TOL * max(bound, 1.0)
    return LayoutSolution(
        flow=flow,
        bound=flow if optimal else max(bound, flow),
        status="optimal" if optimal else "time_limit",
        seconds=time.monotonic() - start,
        layout=layout,
    )


def petals_layout(instance: LayoutInstance, *, seed: int = 0) -> HeuristicLayout:
    """Petals' layout: nodes in a random order (``seed``), each at its most layers, weakest spot.

    Each node in turn takes ``k`` = the largest key of its table and the window of ``k``
    consecutive layers whose per-layer throughputs, sorted, are lexicographically least (the
    weakest layer first, then the next; the first such window on ties); then every layer of the
    window gains ``T(k)``. The order is Python's ``random.Random(seed).shuffle`` of the nodes.

    Examples
    --------
    >>> from inferplan.codesign.pipelines.helix import LayoutNode
    >>> one = LayoutInstance(2, (LayoutNode("a", {1: 3.0}), LayoutNode("b", {1: 2.0})), {})
    >>> sorted(petals_layout(one).layout.values())
    [(0, 1), (1, 1)]
    """
    order = [n for n in instance.nodes if n.throughput]
    random.Random(seed).shuffle(order)
    served = [0.0] * instance.layers
    layout: dict[str, tuple[int, int]] = {}
    for n in order:
        k = max(n.throughput)
        first = min(range(instance.layers - k + 1), key=lambda s: (sorted(served[s : s + k]), s))
        for layer in range(first, first + k):
            served[layer] += n.throughput[k]
        layout[n.name] = (first, k)
    return _valued(instance, layout)


def swarm_layout(instance: LayoutInstance, *, stages: int | None = None) -> HeuristicLayout:
    """SWARM's layout: ``stages`` equal stages; the fastest node first joins the weakest stage.

    A stage is ``L / stages`` consecutive layers, a key of every node's table. Nodes are taken
    by their throughput on one stage, fastest first (on ties the later node first), and each
    joins the stage whose nodes' throughputs sum least (the first on ties). ``stages`` defaults
    to the fewest stages every node can hold.

    Raises
    ------
    InvalidArgument
        If ``stages`` does not divide the layers, or some node cannot hold one stage.

    Examples
    --------
    >>> from inferplan.codesign.pipelines.helix import LayoutNode
    >>> two = LayoutInstance(
    ...     2, tuple(LayoutNode(v, {1: t, 2: t / 3}) for v, t in (("a", 3.0), ("b", 2.0))), {}
    ... )
    >>> dict(swarm_layout(two, stages=2).layout)
    {'a': (0, 1), 'b': (1, 1)}
    """
    L = instance.layers
    nodes = list(instance.nodes)
    if not nodes:
        return _valued(instance, {})
    if stages is None:
        sizes = [k for k in range(L, 0, -1) if L % k == 0 and all(k in n.throughput for n in nodes)]
        if not sizes:
            raise InvalidArgument(
                f"swarm: no stage size divides the {L} layers and is in every node's table"
            )
        stages = L // sizes[0]
    if not (isinstance(stages, int) and 1 <= stages <= L and L % stages == 0):
        raise InvalidArgument(f"swarm: `stages` must divide the {L} layers, got {stages}")
    size = L // stages
    for n in nodes:
        if size not in n.throughput:
            raise InvalidArgument(f"swarm: node {n.name!r} cannot hold a stage of {size} layers")
    ranked = sorted(range(len(nodes)), key=lambda i: (nodes[i].throughput[size], i), reverse=True)
    total = [0.0] * stages
    layout: dict[str, tuple[int, int]] = {}
    for i in ranked:
        stage = total.index(min(total))
        total[stage] += nodes[i].throughput[size]
        layout[nodes[i].name] = (stage * size, size)
    return _valued(instance, layout)
