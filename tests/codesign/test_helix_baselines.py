"""Helix's own methods: its per-node MILP against a brute force over every layout on small
random instances, the Petals and Swarm heuristics' layouts checked against their rules and
against hand-worked examples, their errors, and ``benchmarks/helix.py --baselines``."""

from __future__ import annotations

import importlib.util
import itertools
import json
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tests.codesign.test_helix_layout as reference
from inferplan.codesign.pipelines.helix import LayoutInstance, LayoutNode, layout_flow
from inferplan.codesign.pipelines.helix_baselines import helix_milp, petals_layout, swarm_layout
from inferplan.errors import InvalidArgument

ROOT = Path(__file__).parents[2]


def _benchmark():
    where = ROOT / "benchmarks" / "helix.py"
    spec = importlib.util.spec_from_file_location("helix_benchmark", where)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def assert_valid(inst: LayoutInstance, layout: dict[str, tuple[int, int]]) -> None:
    """One range per known node, its k a key of the node's table, within the layers."""
    table = {n.name: n.throughput for n in inst.nodes}
    for v, (s, k) in layout.items():
        assert v in table
        assert k in table[v]
        assert s >= 0 and s + k <= inst.layers


def mesh(layers: int, nodes: tuple[LayoutNode, ...], c: float = 100.0) -> LayoutInstance:
    names = [n.name for n in nodes]
    edges = {(u, v): c for u in names for v in names if u != v}
    edges |= {("source", v): c for v in names} | {(v, "sink"): c for v in names}
    return LayoutInstance(layers, nodes, edges)


@settings(max_examples=25, deadline=None)
@given(st.booleans().flatmap(reference.instances))
def test_helix_milp_equals_brute_force(inst: LayoutInstance) -> None:
    best = helix_milp(inst, time_limit_s=30)
    truth = reference.brute(inst)
    layout = dict(best.layout)
    assert_valid(inst, layout)
    assert best.flow == pytest.approx(reference.lp_flow(inst, layout), rel=1e-7, abs=1e-9)
    assert best.flow <= truth + 1e-9
    assert best.bound >= truth - 1e-6 * max(truth, 1.0)
    assert best.status == "optimal"  # these are tiny: HiGHS proves them at once
    assert best.flow == pytest.approx(truth, rel=1e-6, abs=1e-9)


def test_helix_milp_needs_matching_ends() -> None:
    # a alone reaches the sink only holding both layers (1 token/s); a then b (or b then a)
    # carry 3.
    inst = mesh(2, (LayoutNode("a", {1: 3.0, 2: 1.0}), LayoutNode("b", {1: 4.0})))
    best = helix_milp(inst, time_limit_s=10)
    assert best.status == "optimal" and best.flow == pytest.approx(3.0)
    assert {best.layout["a"], best.layout["b"]} == {(0, 1), (1, 1)}
    # With no edge from the source nothing flows, whatever the layout.
    cut = LayoutInstance(1, (LayoutNode("a", {1: 2.0}),), {("a", "sink"): 5.0})
    assert helix_milp(cut, time_limit_s=10).flow == 0.0


@settings(max_examples=60, deadline=None)
@given(st.booleans().flatmap(reference.instances), st.integers(0, 5))
def test_petals_follows_its_rule(inst: LayoutInstance, seed: int) -> None:
    got = petals_layout(inst, seed=seed)
    layout = dict(got.layout)
    assert_valid(inst, layout)
    assert got.flow == pytest.approx(reference.lp_flow(inst, layout), rel=1e-7, abs=1e-9)
    assert got.flow == layout_flow(inst, layout)
    # Replayed in its order, each node took its most layers at the weakest window (sorted
    # per-layer throughputs lexicographically least, the first on ties).
    order = list(inst.nodes)
    random.Random(seed).shuffle(order)
    served = [0.0] * inst.layers
    for n in order:
        s, k = layout[n.name]
        assert k == max(n.throughput)
        window = sorted(served[s : s + k])
        for other in range(inst.layers - k + 1):
            assert window <= sorted(served[other : other + k])
            if other < s:
                assert window < sorted(served[other : other + k])
        for layer in range(s, s + k):
            served[layer] += n.throughput[k]


def test_petals_by_hand() -> None:
    # Three equal nodes of 2 layers on 4: the first takes 1-2, the second the empty 3-4, the
    # third ties everywhere and takes 1-2. Two nodes feed one: flow 1.
    inst = mesh(4, tuple(LayoutNode(v, {1: 5.0, 2: 1.0}) for v in "abc"))
    got = petals_layout(inst, seed=3)
    assert sorted(got.layout.values()) == [(0, 2), (0, 2), (2, 2)]
    assert got.flow == pytest.approx(1.0)


@settings(max_examples=60, deadline=None)
@given(st.booleans().flatmap(reference.instances))
def test_swarm_follows_its_rule(inst: LayoutInstance) -> None:
    L = inst.layers
    sizes = [
        k for k in range(1, L + 1) if L % k == 0 and all(k in n.throughput for n in inst.nodes)
    ]
    if not sizes:
        with pytest.raises(InvalidArgument, match="no stage size"):
            swarm_layout(inst)
        return
    got = swarm_layout(inst)
    layout = dict(got.layout)
    assert_valid(inst, layout)
    assert set(layout) == {n.name for n in inst.nodes}
    assert {k for _, k in layout.values()} == {max(sizes)}
    assert all(s % max(sizes) == 0 for s, _ in layout.values())
    assert got.flow == pytest.approx(reference.lp_flow(inst, layout), rel=1e-7, abs=1e-9)


def test_swarm_by_hand() -> None:
    # Stages of 2 layers (the largest size in every table dividing 4), nodes by T(2) = 6, 5,
    # 3, 2: each joins the stage of least total so far.
    nodes = tuple(
        LayoutNode(v, {1: 9 * t, 2: t, 3: t / 2} if v == "a" else {1: 9 * t, 2: t})
        for v, t in (("a", 6.0), ("b", 5.0), ("c", 3.0), ("d", 2.0))
    )
    got = swarm_layout(mesh(4, nodes))
    # a -> stage 0 (6); b -> stage 1 (5); c -> stage 1 (8); d -> stage 0 (8).
    assert dict(got.layout) == {"a": (0, 2), "b": (2, 2), "c": (2, 2), "d": (0, 2)}
    assert got.flow == pytest.approx(8.0)
    # Four stages of one layer each, explicitly: a, b, c, d in turn.
    four = swarm_layout(mesh(4, nodes), stages=4)
    assert dict(four.layout) == {"a": (0, 1), "b": (1, 1), "c": (2, 1), "d": (3, 1)}
    assert four.flow == pytest.approx(9 * 2.0)


def test_bad_input_named() -> None:
    inst = mesh(4, (LayoutNode("a", {1: 1.0, 2: 1.0}), LayoutNode("b", {1: 1.0, 3: 1.0})))
    with pytest.raises(InvalidArgument, match="time_limit_s"):
        helix_milp(inst, time_limit_s=0)
    with pytest.raises(InvalidArgument, match="`stages` must divide the 4 layers, got 3"):
        swarm_layout(inst, stages=3)
    with pytest.raises(InvalidArgument, match="node 'b' cannot hold a stage of 2 layers"):
        swarm_layout(inst, stages=2)
    odd = mesh(3, (LayoutNode("a", {2: 1.0}),))
    with pytest.raises(InvalidArgument, match="no stage size divides the 3 layers"):
        swarm_layout(odd)


def test_benchmark_baselines(tmp_path, monkeypatch, capsys) -> None:
    bench = _benchmark()
    nodes = {v: {"throughput": {"1": 4.0, "2": 1.5}} for v in "abc"}
    edges = [[u, v, 50.0] for u, v in itertools.permutations("abc", 2)]
    edges += [["source", v, 50.0] for v in "abc"] + [[v, "sink", 50.0] for v in "abc"]
    path = tmp_path / "three.json"
    path.write_text(json.dumps({"layers": 2, "nodes": nodes, "edges": edges}))
    argv = ["helix.py", str(path), "--time-limit", "5", "--json", "--baselines"]
    monkeypatch.setattr(sys, "argv", [*argv, "--helix-milp-seconds", "5"])
    assert bench.main() == 0
    out = json.loads(capsys.readouterr().out)
    assert {"flow", "bound", "status", "seconds", "layout"} <= set(out)
    # Best: one node holds both layers (1.5 tokens/s) beside a chain of the other two (4).
    assert out["baselines"]["helix_milp"]["flow"] == pytest.approx(5.5)
    assert out["baselines"]["helix_milp"]["status"] == "optimal"
    # Petals and Swarm put both layers on every node: 3 x 1.5.
    assert out["baselines"]["petals"]["flow"] == pytest.approx(4.5)
    assert out["baselines"]["swarm"]["flow"] == pytest.approx(4.5)
    monkeypatch.setattr(sys, "argv", [*argv, "--helix-milp-seconds", "0"])
    with pytest.raises(SystemExit) as stop:
        bench.main()
    assert stop.value.code == 2
    assert "--helix-milp-seconds: must be a positive number of seconds" in capsys.readouterr().err
