"""The Helix layout solver against a brute force over every layout (an LP max flow each)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.optimize import linprog

from inferplan.codesign.pipelines import helix
from inferplan.codesign.pipelines.helix import LayoutInstance, LayoutNode, layout_flow, solve_layout
from inferplan.errors import InvalidArgument


def lp_flow(inst: LayoutInstance, layout: dict[str, tuple[int, int]]) -> float:
    """Max flow of a layout as an LP over the usable edges, written apart from the solver."""
    table = {n.name: n.throughput for n in inst.nodes}
    first = {v: s for v, (s, k) in layout.items()}
    last = {v: s + k for v, (s, k) in layout.items()}
    arcs = [
        (u, v, c)
        for (u, v), c in inst.edges.items()
        if c > 0
        and (u == "source" or u in layout)
        and (v == "sink" or v in layout)
        and (u != "source" or first[v] == 0)
        and (v != "sink" or last[u] == inst.layers)
        and (u == "source" or v == "sink" or last[u] == first[v])
    ]
    if not arcs:
        return 0.0
    a_eq, a_ub, b_ub = [], [], []
    for v in layout:
        into = [1.0 if a[1] == v else 0.0 for a in arcs]
        out = [1.0 if a[0] == v else 0.0 for a in arcs]
        a_eq.append(np.subtract(into, out))
        a_ub.append(into)
        b_ub.append(table[v][layout[v][1]])
    res = linprog(
        -np.array([1.0 if a[0] == "source" else 0.0 for a in arcs]),
        A_ub=np.array(a_ub) if a_ub else None,
        b_ub=b_ub or None,
        A_eq=np.array(a_eq) if a_eq else None,
        b_eq=[0.0] * len(a_eq) or None,
        bounds=[(0, a[2]) for a in arcs],
    )
    assert res.status == 0
    return float(-res.fun)


def brute(inst: LayoutInstance) -> float:
    choices = [
        [None] + [(s, k) for k in n.throughput for s in range(inst.layers - k + 1)]
        for n in inst.nodes
    ]
    best = 0.0
    for pick in itertools.product(*choices):
        layout = {n.name: r for n, r in zip(inst.nodes, pick, strict=True) if r is not None}
        best = max(best, lp_flow(inst, layout))
    return best


@st.composite
def instances(draw: st.DrawFn, free: bool) -> LayoutInstance:
    layers = draw(st.integers(1, 4))
    count = draw(st.integers(1, 4))
    kinds = [
        {
            k: float(draw(st.integers(1, 20)))
            for k in draw(st.sets(st.integers(1, layers), min_size=1, max_size=3))
        }
        for _ in range(draw(st.integers(1, 2)))
    ]
    nodes = tuple(
        LayoutNode(f"n{i}", kinds[draw(st.integers(0, len(kinds) - 1))]) for i in range(count)
    )
    names = ["source", *[n.name for n in nodes], "sink"]
    edges = {}
    for u, v in itertools.product(names, names):
        if u == v or u == "sink" or v == "source" or (u, v) == ("source", "sink"):
            continue
        if free:
            edges[(u, v)] = 100.0
        elif draw(st.booleans()):
            edges[(u, v)] = float(draw(st.integers(1, 25)))
    return LayoutInstance(layers, nodes, edges)


@settings(max_examples=40, deadline=None)
@given(instances(free=True))
def test_free_edges_exact(inst: LayoutInstance) -> None:
    best = solve_layout(inst, time_limit_s=30)
    assert best.status == "optimal"
    assert best.flow == pytest.approx(brute(inst), rel=1e-7, abs=1e-9)
    assert lp_flow(inst, dict(best.layout)) == pytest.approx(best.flow, rel=1e-7, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(instances(free=False))
def test_any_edges_certified(inst: LayoutInstance) -> None:
    best = solve_layout(inst, time_limit_s=30)
    truth = brute(inst)
    assert lp_flow(inst, dict(best.layout)) == pytest.approx(best.flow, rel=1e-7, abs=1e-9)
    assert best.flow <= truth + 1e-9
    assert best.bound >= truth - 1e-7 * max(truth, 1.0)
    if best.status == "optimal":
        assert best.flow == pytest.approx(truth, rel=1e-7, abs=1e-9)


def test_layout_flow_matches_lp_on_a_chain() -> None:
    inst = LayoutInstance(
        3,
        (LayoutNode("a", {1: 5.0, 2: 3.0}), LayoutNode("b", {1: 4.0}), LayoutNode("c", {2: 2.5})),
        {
            ("source", "a"): 9.0,
            ("source", "c"): 9.0,
            ("a", "b"): 1.5,
            ("c", "b"): 9.0,
            ("b", "sink"): 9.0,
            ("a", "sink"): 9.0,
        },
    )
    for layout in (
        {"a": (0, 2), "b": (2, 1)},
        {"a": (0, 2), "b": (2, 1), "c": (0, 2)},
        {"a": (0, 1)},
    ):
        assert layout_flow(inst, layout) == pytest.approx(lp_flow(inst, layout))


def test_bad_input_named() -> None:
    with pytest.raises(InvalidArgument, match="throughput for 1 layers must be positive"):
        LayoutInstance(2, (LayoutNode("a", {1: -1.0}),), {})
    with pytest.raises(InvalidArgument, match="time_limit_s"):
        solve_layout(LayoutInstance(1, (LayoutNode("a", {1: 1.0}),), {}), time_limit_s=0)


@st.composite
def regions(draw: st.DrawFn) -> LayoutInstance:
    """Regions of nodes: full meshes of free edges inside, one slow capacity per ordered pair
    of regions between them (every node pair alike), the source and sink in region 0 (the
    other regions' own edges to them slow too): the links the group rows bound."""
    layers = draw(st.integers(1, 3))
    sizes = draw(st.lists(st.integers(1, 2), min_size=2, max_size=3).filter(lambda s: sum(s) <= 4))
    kind = {k: float(draw(st.integers(1, 20))) for k in range(1, layers + 1)}
    nodes, region = [], {}
    for r, size in enumerate(sizes):
        for i in range(size):
            table = kind if draw(st.booleans()) else {1: float(draw(st.integers(1, 20)))}
            nodes.append(LayoutNode(f"r{r}n{i}", table))
            region[f"r{r}n{i}"] = r
    slow = {
        (a, b): float(draw(st.integers(1, 25)))
        for a in range(len(sizes))
        for b in range(len(sizes))
        if a != b
    }
    edges = {}
    for u in region:
        edges[("source", u)] = 100.0 if region[u] == 0 else slow[(0, region[u])]
        edges[(u, "sink")] = 100.0 if region[u] == 0 else slow[(region[u], 0)]
        for v in region:
            if u != v:
                same = region[u] == region[v]
                edges[(u, v)] = 100.0 if same else slow[(region[u], region[v])]
    return LayoutInstance(layers, tuple(nodes), edges)


@settings(max_examples=40, deadline=None)
@given(regions())
def test_regions_with_slow_links_certified(inst: LayoutInstance) -> None:
    best = solve_layout(inst, time_limit_s=30)
    truth = brute(inst)
    assert lp_flow(inst, dict(best.layout)) == pytest.approx(best.flow, rel=1e-7, abs=1e-9)
    assert best.flow <= truth + 1e-9
    assert best.bound >= truth - 1e-7 * max(truth, 1.0)
    if best.status == "optimal":
        assert best.flow == pytest.approx(truth, rel=1e-7, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(regions())
def test_the_interval_holding_the_optimum_bounds_it(inst: LayoutInstance) -> None:
    # The solver's own first layout can reach the optimum and hide a bound that cuts it off:
    # ask the interval model that holds the brute force's optimum directly.
    truth = brute(inst)
    if truth <= 0:
        return
    model = helix._model(inst)
    top = helix._pass_bound(inst)
    assert top >= truth * (1 - 1e-9)
    values = sorted({t for tab in model.table for t in tab.values() if t < top} | {0.0, top})
    lo, hi = next((a, b) for a, b in itertools.pairwise(values) if a < truth <= b * (1 + 1e-12))
    _, bound, _, _ = helix._solve_interval(model, inst.layers, lo, hi, 30.0)
    assert bound >= truth * (1 - 1e-7)
