"""Helix's layout problem, solved exactly: nodes with measured throughput tables.

Each node ``v`` sustains ``T_v(k)`` tokens/s when it holds ``k`` consecutive layers (a key of its
table). A *layout* gives every node one range ``(s, s + k]`` or nothing. Flow runs from the
source to the sink; an edge ``(u, v)`` carries flow only if ``v``'s range starts where ``u``'s
ends (the source feeds ranges starting at 0, the sink takes ranges ending at ``L``), within the
edge's capacity; a node computes every token it receives (no relays). The layout's value is its
maximum source-sink flow; the solver maximises it. The formulation and the proof that it is exact
are in docs/pipelines.md; in short:

* Equal nodes (same table, same capacity to and from every other node) form a *class*; the model
  counts, per class, how many of its nodes hold each range ``(s, s + k]`` -- integer
  ``n[g, s, k]`` -- and carries flow over layer positions ``0..L`` (a range moves flow from
  position ``s`` to ``s + k``), so no two equal nodes are ever told apart.
* The flow ``F`` is searched interval by interval between consecutive table values. Inside one
  interval each range is either *full* (``T >= hi``: it alone carries the whole flow) or *partial*
  (``T <= lo < F``: it needs a partner), so every layer is covered by ``2 n_full + n_partial >= 2``
  -- the cut that closes the integrality gap of the position flow -- and ``f <= min(T, hi) n``.
* An edge no flow through its ends can fill is *free*; a slower one caps the class-pair transfer
  at position ``p`` by ``c N_h E[g, p]`` and ``c N_g S[h, p]`` (ends and starts there), exact when
  the classes are single nodes and a relaxation otherwise. Every layout found is therefore
  re-valued by an exact max flow over the nodes, and that value -- never the model's -- is the
  flow returned; the model's values bound it.
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

import networkx as nx
import numpy as np

from inferplan.codesign.pipelines.layout_milp import Rows, solve_milp
from inferplan.errors import InvalidArgument

__all__ = [
    "LayoutInstance",
    "LayoutNode",
    "LayoutSolution",
    "layout_flow",
    "solve_layout",
]

SOURCE = "source"
SINK = "sink"
_REL = 1e-9


@dataclass(frozen=True)
class LayoutNode:
    """A compute node and its measured throughput table.

    Parameters
    ----------
    name
        The node's id (not ``"source"`` or ``"sink"``).
    throughput
        Tokens/s the node sustains when holding ``k`` consecutive layers, by ``k``.
    """

    name: str
    throughput: Mapping[int, float]


@dataclass(frozen=True)
class LayoutInstance:
    """A cluster: ``layers`` alike layers, the nodes, and directed edges in tokens/s.

    ``edges`` maps ``(tail, head)`` to a capacity; ``"source"`` and ``"sink"`` are the two ends.
    A missing edge carries nothing.
    """

    layers: int
    nodes: tuple[LayoutNode, ...]
    edges: Mapping[tuple[str, str], float]

    def __post_init__(self) -> None:
        if self.layers < 1:
            raise InvalidArgument(f"`layers` must be a positive integer, got {self.layers}")
        names = [n.name for n in self.nodes]
        if len(set(names)) != len(names) or {SOURCE, SINK} & set(names):
            raise InvalidArgument("node names must be distinct and not 'source' or 'sink'")
        for n in self.nodes:
            for k, t in n.throughput.items():
                if not (isinstance(k, int) and 1 <= k <= self.layers):
                    raise InvalidArgument(
                        f"node {n.name!r}: layer count {k} not in 1..{self.layers}"
                    )
                if not (math.isfinite(t) and t > 0):
                    raise InvalidArgument(
                        f"node {n.name!r}: throughput for {k} layers must be positive, got {t}"
                    )
        known = {*names, SOURCE, SINK}
        for (u, v), c in self.edges.items():
            if u not in known or v not in known or u in (v, SINK) or v == SOURCE:
                raise InvalidArgument(f"edge {u!r}->{v!r}: not an edge between known nodes")
            if not (c >= 0 and math.isfinite(c)):
                raise InvalidArgument(
                    f"edge {u!r}->{v!r}: capacity must be finite and >= 0, got {c}"
                )


@dataclass(frozen=True)
class LayoutSolution:
    """The best layout found, its exact max flow, and an upper bound on every layout's.

    ``layout`` maps each node holding layers to ``(first_layer, k)`` (layers ``first+1..first+k``);
    nodes absent hold nothing. ``status`` is ``"optimal"`` when ``flow`` reaches ``bound``.
    """

    flow: float
    bound: float
    status: Literal["optimal", "time_limit"]
    seconds: float
    layout: Mapping[str, tuple[int, int]] = field(default_factory=dict)

    @property
    def gap(self) -> float:
        """``(bound - flow) / flow`` (infinite with no flow)."""
        return (self.bound - self.flow) / self.flow if self.flow > 0 else math.inf


def layout_flow(instance: LayoutInstance, layout: Mapping[str, tuple[int, int]]) -> float:
    """The maximum source-sink flow of ``layout`` under the rules of the module docstring."""
    table = {n.name: n.throughput for n in instance.nodes}
    g = nx.DiGraph()
    for v, (s, k) in layout.items():
        if k not in table[v] or s < 0 or s + k > instance.layers:
            raise InvalidArgument(f"node {v!r}: range ({s}, {s + k}] not allowed")
        g.add_edge(("in", v), ("out", v), capacity=table[v][k])
    ends = {v: (s, s + k) for v, (s, k) in layout.items()}
    for (u, v), c in instance.edges.items():
        if c <= 0:
            continue
        if u == SOURCE and v in ends and ends[v][0] == 0:
            g.add_edge(SOURCE, ("in", v), capacity=c)
        elif v == SINK and u in ends and ends[u][1] == instance.layers:
            g.add_edge(("out", u), SINK, capacity=c)
        elif u in ends and v in ends and ends[u][1] == ends[v][0]:
            g.add_edge(("out", u), ("in", v), capacity=c)
    if SOURCE not in g or SINK not in g:
        return 0.0
    return float(nx.maximum_flow_value(g, SOURCE, SINK))


def _classes(instance: LayoutInstance) -> list[list[str]]:
    """Partition the nodes into classes of interchangeable ones (refined until uniform)."""
    cap = {uv: c for uv, c in instance.edges.items() if c > 0}
    key = {
        n.name: (
            tuple(sorted(n.throughput.items())),
            cap.get((SOURCE, n.name), 0.0),
            cap.get((n.name, SINK), 0.0),
        )
        for n in instance.nodes
    }
    groups: dict[object, list[str]] = {}
    for n in instance.nodes:
        groups.setdefault(key[n.name], []).append(n.name)
    classes = list(groups.values())
    changed = True
    while changed:
        changed = False
        for c_idx, members in enumerate(classes):
            for v in (w for cl in classes for w in cl):
                split: dict[tuple[float, float], list[str]] = {}
                for w in members:
                    if w != v:
                        split.setdefault((cap.get((v, w), 0.0), cap.get((w, v), 0.0)), []).append(w)
                if len(split) > 1:
                    # v tells members apart: split off one capacity group (v stays where it is).
                    part = next(iter(split.values()))
                    rest = [w for w in members if w not in part]
                    classes[c_idx : c_idx + 1] = [part, rest]
                    changed = True
                    break
            if changed:
                break
    return classes


@dataclass(frozen=True)
class _Model:
    """The position-indexed model's columns, shared by every interval.

    Classes joined pairwise by free edges (both ways, and between their own nodes) form a
    *group*: flow ending in a group at ``p`` may go to any range of it starting at ``p``. Between
    two groups whose every node pair has one capacity ``c`` (a *link*) the transfer at ``p`` is
    at most ``c E[A, p] S[B, p]``, linearised exactly; other class pairs between groups keep the
    linear bounds ``c N_h E[g, p]`` and ``c N_g S[h, p]``.
    """

    classes: list[list[str]]
    table: list[dict[int, float]]
    ranges: list[tuple[int, int, int, float]]  # (class, first, k, T)
    groups: list[list[int]]  # classes of each group
    links: list[tuple[int, int, float, bool]]  # (tail group, head group, capacity, free)
    pairs: list[tuple[int, int, float, bool]]  # (tail class, head class, capacity, free)
    src: list[tuple[int, float, bool]]
    snk: list[tuple[int, float, bool]]


def _model(instance: LayoutInstance) -> _Model:
    classes = _classes(instance)
    by_name = {n.name: n for n in instance.nodes}
    table = [dict(by_name[c[0]].throughput) for c in classes]
    top = [max(t.values()) for t in table]
    cap = instance.edges
    ranges = [
        (g, s, k, t)
        for g, tab in enumerate(table)
        for k, t in sorted(tab.items())
        for s in range(instance.layers - k + 1)
    ]
    pair_cap: dict[tuple[int, int], float] = {}
    for g, cg in enumerate(classes):
        for h, ch in enumerate(classes):
            w = next((x for x in ch if x != cg[0]), None)
            if w is not None and (c := cap.get((cg[0], w), 0.0)) > 0:
                pair_cap[(g, h)] = c

    def free(g: int, h: int) -> bool:
        return pair_cap.get((g, h), 0.0) >= min(top[g], top[h])

    groups: list[list[int]] = []
    for g, cg in enumerate(classes):
        home = None
        if len(cg) == 1 or free(g, g):
            home = next((a for a in groups if all(free(g, h) and free(h, g) for h in a)), None)
        if home is None:
            groups.append([g])
        else:
            home.append(g)
    links: list[tuple[int, int, float, bool]] = []
    pairs: list[tuple[int, int, float, bool]] = []
    for a, ga in enumerate(groups):
        for b, gb in enumerate(groups):
            if a == b:
                continue
            caps = {pair_cap.get((g, h), 0.0) for g in ga for h in gb}
            if len(caps) == 1 and (c := caps.pop()) > 0:
                tops = max(top[g] for g in (*ga, *gb))
                links.append((a, b, c, c >= tops))
            else:
                pairs.extend(
                    (g, h, pair_cap[(g, h)], free(g, h))
                    for g in ga
                    for h in gb
                    if (g, h) in pair_cap
                )
    src = [
        (g, c, c >= top[g])
        for g, cg in enumerate(classes)
        if (c := cap.get((SOURCE, cg[0]), 0.0)) > 0
    ]
    snk = [
        (g, c, c >= top[g])
        for g, cg in enumerate(classes)
        if (c := cap.get((cg[0], SINK), 0.0)) > 0
    ]
    return _Model(classes, table, ranges, groups, links, pairs, src, snk)


def _solve_interval(
    m: _Model, layers: int, lo: float, hi: float, seconds: float
) -> tuple[float, float, dict[tuple[int, int, int], int] | None, bool]:
    """Maximise ``F`` in ``[lo, hi]``: (best F, bound, counts of the best, proven)."""
    nr, L = len(m.ranges), layers
    group_of = {g: a for a, ga in enumerate(m.groups) for g in ga}
    size = [sum(len(m.classes[g]) for g in ga) for ga in m.groups]
    slow = [j for j, link in enumerate(m.links) if not link[3]]
    heads = sorted({m.links[j][1] for j in slow})
    bits = {b: max(size[b].bit_length(), 1) for b in heads}
    # columns: n | f | z[group, p] | x[link, p] | x[pair, p] | y[head, p, bit] | w[link, p, bit]
    #          | xs (src) | xt (snk) | F,   for p in 1..L-1
    ncol = 2 * nr
    oz = ncol
    ncol += len(m.groups) * (L - 1)
    ol = ncol
    ncol += len(m.links) * (L - 1)
    op = ncol
    ncol += len(m.pairs) * (L - 1)
    oy: dict[int, int] = {}
    for b in heads:
        oy[b] = ncol
        ncol += bits[b] * (L - 1)
    ow: dict[int, int] = {}
    for j in slow:
        ow[j] = ncol
        ncol += bits[m.links[j][1]] * (L - 1)
    os_ = ncol
    ot = os_ + len(m.src)
    of = ot + len(m.snk)
    ncol = of + 1
    constraints = Rows()
    row = constraints.add

    starts: dict[tuple[int, int], list[int]] = {}  # (class, p) -> ranges
    ends: dict[tuple[int, int], list[int]] = {}
    gstarts: dict[tuple[int, int], list[int]] = {}  # (group, p) -> ranges
    gends: dict[tuple[int, int], list[int]] = {}
    # A range at 0 (at L) takes all its flow from (gives it all to) its node's edge to the source
    # (sink), so that edge caps it too.
    fed_cap = dict.fromkeys(range(len(m.classes)), 0.0) | {g: c for g, c, _ in m.src}
    drained_cap = dict.fromkeys(range(len(m.classes)), 0.0) | {g: c for g, c, _ in m.snk}
    for i, (g, s, k, t) in enumerate(m.ranges):
        cap = min(t, hi, fed_cap[g] if s == 0 else t, drained_cap[g] if s + k == L else t)
        row([(nr + i, 1.0), (i, -cap)], -np.inf, 0.0)
        starts.setdefault((g, s), []).append(i)
        ends.setdefault((g, s + k), []).append(i)
        gstarts.setdefault((group_of[g], s), []).append(i)
        gends.setdefault((group_of[g], s + k), []).append(i)
    for g, members in enumerate(m.classes):
        row([(i, 1.0) for i, r in enumerate(m.ranges) if r[0] == g], 0.0, len(members))
    # Every layer is covered: one full range, or two ranges that each carry less than F.
    for layer in range(L):
        row(
            [
                (i, 2.0 if t > lo else 1.0)
                for i, (g, s, k, t) in enumerate(m.ranges)
                if s <= layer < s + k
            ],
            2.0,
            np.inf,
        )
    inflow: dict[tuple[int, int], list[tuple[int, float]]] = {}  # (group, p) -> columns
    outflow: dict[tuple[int, int], list[tuple[int, float]]] = {}
    for a in range(len(m.groups)):
        for p in range(1, L):
            col = oz + a * (L - 1) + p - 1
            outflow.setdefault((a, p), []).append((col, -1.0))
            inflow.setdefault((a, p), []).append((col, -1.0))
    for b in heads:
        for p in range(1, L):
            row(
                [(oy[b] + (p - 1) * bits[b] + e, float(2**e)) for e in range(bits[b])]
                + [(i, -1.0) for i in gstarts.get((b, p), [])],
                0.0,
                0.0,
            )
    for j, (a, b, c, free) in enumerate(m.links):
        for p in range(1, L):
            col = ol + j * (L - 1) + p - 1
            outflow.setdefault((a, p), []).append((col, -1.0))
            inflow.setdefault((b, p), []).append((col, -1.0))
            if free:
                continue
            e_a = [(i, -1.0) for i in gends.get((a, p), [])]
            s_b = [(i, -1.0) for i in gstarts.get((b, p), [])]
            row([(col, 1.0)] + [(i, v * c * size[b]) for i, v in e_a], -np.inf, 0.0)
            row([(col, 1.0)] + [(i, v * c * size[a]) for i, v in s_b], -np.inf, 0.0)
            # x <= c E S with S = sum_e 2^e y_e, each w_e = E y_e bounded by E and size(A) y_e.
            w0 = ow[j] + (p - 1) * bits[b]
            y0 = oy[b] + (p - 1) * bits[b]
            row([(col, 1.0)] + [(w0 + e, -c * 2**e) for e in range(bits[b])], -np.inf, 0.0)
            for e in range(bits[b]):
                row([(w0 + e, 1.0), *e_a], -np.inf, 0.0)
                row([(w0 + e, 1.0), (y0 + e, -float(size[a]))], -np.inf, 0.0)
    for j, (g, h, c, free) in enumerate(m.pairs):
        for p in range(1, L):
            col = op + j * (L - 1) + p - 1
            outflow.setdefault((group_of[g], p), []).append((col, -1.0))
            inflow.setdefault((group_of[h], p), []).append((col, -1.0))
            if not free:
                row(
                    [(col, 1.0)] + [(i, -c * len(m.classes[h])) for i in ends.get((g, p), [])],
                    -np.inf,
                    0.0,
                )
                row(
                    [(col, 1.0)] + [(i, -c * len(m.classes[g])) for i in starts.get((h, p), [])],
                    -np.inf,
                    0.0,
                )
    # The source feeds each class's own ranges at 0 and the sink takes each class's at L.
    fed: dict[int, list[tuple[int, float]]] = {}
    drained: dict[int, list[tuple[int, float]]] = {}
    for j, (g, c, free) in enumerate(m.src):
        fed.setdefault(g, []).append((os_ + j, -1.0))
        if not free:
            row([(os_ + j, 1.0)] + [(i, -c) for i in starts.get((g, 0), [])], -np.inf, 0.0)
    for j, (g, c, free) in enumerate(m.snk):
        drained.setdefault(g, []).append((ot + j, -1.0))
        if not free:
            row([(ot + j, 1.0)] + [(i, -c) for i in ends.get((g, L), [])], -np.inf, 0.0)
    for g in range(len(m.classes)):
        row([(nr + i, 1.0) for i in starts.get((g, 0), [])] + fed.get(g, []), 0.0, 0.0)
        row([(nr + i, 1.0) for i in ends.get((g, L), [])] + drained.get(g, []), 0.0, 0.0)
    for a in range(len(m.groups)):
        for p in range(1, L):
            row([(nr + i, 1.0) for i in gstarts.get((a, p), [])] + inflow.get((a, p), []), 0.0, 0.0)
            row([(nr + i, 1.0) for i in gends.get((a, p), [])] + outflow.get((a, p), []), 0.0, 0.0)
    row([(os_ + j, 1.0) for j in range(len(m.src))] + [(of, -1.0)], 0.0, 0.0)

    c_obj = np.zeros(ncol)
    c_obj[of] = -1.0
    lower = np.zeros(ncol)
    upper = np.full(ncol, np.inf)
    upper[:nr] = [len(m.classes[g]) for g, *_ in m.ranges]
    integrality = np.zeros(ncol)
    integrality[:nr] = 1
    for b in heads:
        upper[oy[b] : oy[b] + bits[b] * (L - 1)] = 1.0
        integrality[oy[b] : oy[b] + bits[b] * (L - 1)] = 1
    lower[of], upper[of] = lo, hi
    res = solve_milp(c_obj, constraints, integrality, lower, upper, seconds)
    proven = res.status in (0, 2)  # optimal or infeasible
    if res.x is None:
        bound = -math.inf if res.status == 2 else hi
        return -math.inf, bound, None, proven
    bound = -float(res.mip_dual_bound) if res.mip_dual_bound is not None else hi
    counts = {
        (g, s, k): round(res.x[i])
        for i, (g, s, k, _) in enumerate(m.ranges)
        if round(res.x[i]) > 0 and res.x[nr + i] > _REL * max(hi, 1.0)
    }
    return -float(res.fun), min(max(bound, -float(res.fun)), hi), counts, proven


def _layout(m: _Model, counts: Mapping[tuple[int, int, int], int]) -> dict[str, tuple[int, int]]:
    free = [sorted(c) for c in m.classes]
    layout: dict[str, tuple[int, int]] = {}
    for (g, s, k), n in sorted(counts.items()):
        for _ in range(n):
            layout[free[g].pop(0)] = (s, k)
    return layout


def _pass_bound(instance: LayoutInstance) -> float:
    """The largest ``F`` with ``sum_v max_k k min(T_v(k), F) >= L F``: above every layout's flow.

    A layout of flow ``F`` passes every token through ``L`` layers, and node ``v`` holding ``k``
    layers passes at most ``min(T_v(k), F)`` tokens/s through each of them. The left side over
    ``F`` never increases with ``F``, so bisection finds the crossing; its upper end is returned.
    """

    def passes(f: float) -> float:
        return sum(max(k * min(t, f) for k, t in n.throughput.items()) for n in instance.nodes)

    lo, hi = 0.0, passes(math.inf) / instance.layers
    for _ in range(60):
        mid = (lo + hi) / 2
        if passes(mid) >= instance.layers * mid:
            lo = mid
        else:
            hi = mid
    return hi * (1 + _REL)


def _moves(
    instance: LayoutInstance, layout: Mapping[str, tuple[int, int]]
) -> list[dict[str, tuple[int, int]]]:
    """Layouts one step from ``layout``: a cut between ranges moved by a layer, one range
    grown or shrunk at either end, a node added beside (or moved to) another's range, removed."""
    table = {n.name: n.throughput for n in instance.nodes}
    L = instance.layers
    out: list[dict[str, tuple[int, int]]] = []

    def ok(v: str, s: int, k: int) -> bool:
        return k in table[v] and s >= 0 and s + k <= L

    cuts = sorted({s for s, _ in layout.values()} | {s + k for s, k in layout.values()} - {0, L})
    for p in cuts:
        for d in (-1, 1):
            new = dict(layout)
            for v, (s, k) in layout.items():
                if s + k == p:
                    new[v] = (s, k + d)
                elif s == p:
                    new[v] = (s + d, k - d)
            if all(ok(v, *r) for v, r in new.items()):
                out.append(new)
    for v, (s, k) in layout.items():
        for r in ((s, k + 1), (s, k - 1), (s - 1, k + 1), (s + 1, k - 1)):
            if ok(v, *r):
                out.append({**layout, v: r})
        out.append({u: r for u, r in layout.items() if u != v})
    held = sorted(set(layout.values()))
    for n in instance.nodes:
        for r in held:
            if layout.get(n.name) != r and ok(n.name, *r):
                out.append({**layout, n.name: r})
    return out


KICKS_IN_VAIN = 50
"""The hill climb stops after this many kicks in a row that found no better layout."""


def _improve(
    instance: LayoutInstance, layout: Mapping[str, tuple[int, int]], deadline: float
) -> tuple[float, dict[str, tuple[int, int]]]:
    """Hill-climb from ``layout`` by ``_moves`` (first improvement); at a local optimum, kick
    the best layout by a few random moves and climb again, until ``deadline`` or until
    ``KICKS_IN_VAIN`` kicks in a row found nothing better."""
    rng = random.Random(0)
    best_layout = dict(layout)
    best = layout_flow(instance, best_layout)
    here, flow = dict(best_layout), best
    in_vain = 0
    while time.monotonic() < deadline and in_vain < KICKS_IN_VAIN:
        moves = _moves(instance, here)
        rng.shuffle(moves)
        for new in moves:
            if time.monotonic() >= deadline:
                break
            value = layout_flow(instance, new)
            if value > flow * (1 + 1e-9):
                here, flow = new, value
                break
        else:
            if flow > best:
                best, best_layout, in_vain = flow, dict(here), 0
            else:
                in_vain += 1
            here = dict(best_layout)
            for _ in range(rng.randint(2, 4)):
                kicks = _moves(instance, here)
                if kicks:
                    here = rng.choice(kicks)
            flow = layout_flow(instance, here)
    if flow > best:
        best, best_layout = flow, here
    return best, best_layout


def solve_layout(instance: LayoutInstance, *, time_limit_s: float = 150.0) -> LayoutSolution:
    """The layout of greatest max flow, with a certified bound, within ``time_limit_s``.

    Parameters
    ----------
    instance
        The cluster and its throughput tables.
    time_limit_s
        Wall-clock budget in seconds; on expiry the best layout so far is returned with
        ``status="time_limit"`` and the bound proven so far.

    Returns
    -------
    LayoutSolution
        ``flow`` is the exact max flow of ``layout`` (recomputed over the nodes, not the model's
        value); ``bound`` is at least every layout's max flow.

    Examples
    --------
    >>> two = LayoutInstance(
    ...     layers=2,
    ...     nodes=(LayoutNode("a", {1: 3.0, 2: 1.0}), LayoutNode("b", {1: 2.0})),
    ...     edges={("source", "a"): 9.0, ("a", "b"): 9.0, ("b", "sink"): 9.0, ("a", "sink"): 9.0},
    ... )
    >>> best = solve_layout(two, time_limit_s=10)
    >>> best.flow, best.status, sorted(best.layout.items())
    (2.0, 'optimal', [('a', (0, 1)), ('b', (1, 1))])
    """
    if not (time_limit_s > 0 and math.isfinite(time_limit_s)):
        raise InvalidArgument(
            f"`time_limit_s` must be a positive number of seconds, got {time_limit_s}"
        )
    start = time.monotonic()
    m = _model(instance)
    L = instance.layers
    trivial = _pass_bound(instance)
    values = sorted({t for tab in m.table for t in tab.values() if t < trivial} | {0.0, trivial})
    best_flow, best_layout = 0.0, dict[str, tuple[int, int]]()
    if len(m.groups) > 1:
        # A first layout: each group alone (with its own source and sink edges), side by side,
        # then improved move by move, each move valued exactly.
        share = 0.5 * time_limit_s
        for a, ga in enumerate(m.groups):
            names = {v for g in ga for v in m.classes[g]}
            sub = LayoutInstance(
                L,
                tuple(n for n in instance.nodes if n.name in names),
                {
                    (u, v): c
                    for (u, v), c in instance.edges.items()
                    if {u, v} <= names | {SOURCE, SINK}
                },
            )
            left = share - (time.monotonic() - start)
            if left > 0:
                best_layout |= solve_layout(sub, time_limit_s=left / (len(m.groups) - a)).layout
        best_flow, best_layout = _improve(instance, best_layout, start + 0.85 * time_limit_s)
    bound = 0.0
    proven = True
    for i in range(len(values) - 1, 0, -1):
        lo, hi = values[i - 1], values[i]
        if hi <= best_flow * (1 + _REL):
            break
        left = time_limit_s - (time.monotonic() - start)
        if left <= 0:
            bound = max(bound, hi)
            proven = False
            break
        # One hard interval must not take all the time: the ones below may hold layouts.
        value, ibound, counts, done = _solve_interval(m, L, max(lo, best_flow), hi, left / 3)
        bound = max(bound, ibound)
        proven = proven and done
        if counts is not None:
            layout = _layout(m, counts)
            flow = layout_flow(instance, layout)
            if flow > best_flow:
                best_flow, best_layout = flow, layout
            if flow < value * (1 - 1e-7):
                proven = False  # the model over-valued this layout: its bound stands, not its flow
    bound = max(bound, best_flow)
    optimal = bound <= best_flow * (1 + 1e-7) or (proven and best_flow >= bound * (1 - 1e-7))
    return LayoutSolution(
        flow=best_flow,
        bound=best_flow if optimal else bound,
        status="optimal" if optimal else "time_limit",
        seconds=time.monotonic() - start,
        layout=best_layout,
    )
