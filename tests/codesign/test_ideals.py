"""Planners on the ideals of a layer graph: PSG, T*, the MILP and the baselines against a brute
force over every chain of ideals; plans re-priced from scratch; path graphs against chains."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Profile
from inferplan.codesign import compile_instance, solve_milp, solve_psg, throughput_optimal
from inferplan.codesign.engine.psg import reference_psg
from inferplan.codesign.heuristics import solve_pfp, solve_pwf
from inferplan.codesign.memory import path_needs
from inferplan.codesign.milp.throughput import throughput_milp
from inferplan.codesign.planfile import check_plan, plan_from_dict
from inferplan.errors import Infeasible, InvalidArgument, InvalidProfile
from inferplan.network.io import network_from_dict
from inferplan.network.network import Network
from inferplan.plots.plan import _runs
from inferplan.profiles import ideals
from inferplan.profiles.graph import LayerGraph
from inferplan.profiles.ideals import graph_cuts

from ..cli import app, invoke_json, runner
from ..oracles import (
    boundary_bits,
    evaluate_graph,
    graph_deployments,
    graph_ideals,
    graph_memory_cost,
)
from ..strategies import layer_graphs, path_graph, small_dags, small_profiles, with_memory

# Brute force enumerates every chain of ideals along every path: keep both small.
MAX_CHAINS = 20_000


def _brute(network: Network, graph: LayerGraph, beta: float) -> tuple[float, float]:
    """Least cost for ``beta`` and least interval, over every deployment."""
    best_cost, best_interval = math.inf, math.inf
    for seen, (path, chain) in enumerate(graph_deployments(network, graph)):
        assume(seen < MAX_CHAINS)
        found = evaluate_graph(network, graph, path, chain, beta)
        best_interval = min(best_interval, evaluate_graph(network, graph, path, chain,
                                                          math.inf).interval)  # fmt: skip
        best_cost = min(best_cost, found.cost)
    return best_cost, best_interval


def _repriced(network: Network, graph: LayerGraph, plan_path: tuple[str, ...],
              layers: tuple[tuple[str, ...], ...], node_up: dict[str, float],
              link_up: dict[tuple[str, str], float]) -> float:  # fmt: skip
    """The interval of a plan read only from its path, its stages' layers and its upgrades."""
    flops = dict(zip(graph.layers, graph.flops, strict=True))
    reads = {v: {u for u, w in graph.edges if w == v and u != "input"} for v in graph.layers}
    nodes = {n.id: n for n in network.nodes}
    links = {(e.source, e.target): e for e in network.links}
    done: frozenset[str] = frozenset()
    interval = 0.0
    for k, (v, names) in enumerate(zip(plan_path, layers, strict=True)):
        assert not done & set(names), "a layer runs twice"
        for name in names:  # every layer a stage runs reads only what is done or its own
            assert reads[name] <= done | set(names)
        done = done | set(names)
        work = math.fsum(flops[x] for x in names)
        interval = max(interval, work / (nodes[v].capacity + node_up.get(v, 0.0)))
        if k + 1 < len(plan_path):
            e = (v, plan_path[k + 1])
            interval = max(interval, boundary_bits(graph, done) /
                           (links[e].capacity + link_up.get(e, 0.0)))  # fmt: skip
    assert done == set(graph.layers), "every layer runs"
    return interval


@settings(max_examples=40)
@given(graph=layer_graphs(max_layers=10))
def test_ideals_are_the_down_closed_sets_with_their_work_and_boundary(graph: LayerGraph) -> None:
    cuts = graph_cuts(graph)
    expected = graph_ideals(graph)
    found = [frozenset(cuts.units_between(0, k)) for k in range(cuts.n_cuts)]
    assert sorted(found, key=sorted) == sorted(expected, key=sorted)
    assert len(set(found)) == len(found)
    flops = dict(zip(graph.layers, graph.flops, strict=True))
    for j, J in enumerate(found):
        assert cuts.bits[j] == boundary_bits(graph, J)
        for i, inner in enumerate(found):
            if inner <= J:
                assert i <= j  # an ideal inside another comes first
                assert cuts.work_between[i, j] == math.fsum(flops[x] for x in J - inner)
            else:
                assert cuts.work_between[i, j] == math.inf


@settings(max_examples=60)
@given(
    network=small_dags(max_nodes=4),
    graph=layer_graphs(max_layers=10),
    factor=st.floats(min_value=0.1, max_value=1.2),
)
def test_psg_tstar_and_milp_equal_the_brute_force_on_layer_graphs(
    network: Network, graph: LayerGraph, factor: float
) -> None:
    profile = Profile.from_graph("random", graph)
    inst = compile_instance(network, profile, cuts="graph")
    assume(inst.n_cuts <= 200)
    best = throughput_optimal(inst)
    beta = factor * best.interval
    cost, interval = _brute(network, graph, beta)
    assert best.interval == pytest.approx(interval, rel=1e-12)
    assert throughput_milp(inst).interval == pytest.approx(interval, rel=1e-9)
    ups = {}
    for plan in (solve_psg(inst, beta), reference_psg(inst, beta), solve_milp(inst, beta)):
        assert plan.cost == pytest.approx(cost, rel=1e-7, abs=1e-9)
        ups[plan.method] = plan
    for plan in (*ups.values(), _or_none(solve_pfp, inst, beta), _or_none(solve_pwf, inst, beta)):
        if plan is None:
            continue
        assert plan.cost >= cost * (1 - 1e-9) - 1e-9
        again = _repriced(network, graph, plan.path, plan.layers, dict(plan.node_upgrades),
                          {(u.source, u.target): u.amount for u in plan.link_upgrades})  # fmt: skip
        assert again == pytest.approx(plan.interval, rel=1e-12)
        assert plan.feasible


def _or_none(solver, inst, beta):  # type: ignore[no-untyped-def]
    try:
        return solver(inst, beta)
    except Infeasible:
        return None


@settings(max_examples=60)
@given(
    network=small_dags(max_nodes=5),
    profile=small_profiles(max_blocks=6),
    factor=st.floats(min_value=0.1, max_value=1.2),
    engine=st.sampled_from(["numpy", "auto"]),
)
def test_a_path_graph_plans_as_its_chain(
    network: Network, profile: Profile, factor: float, engine: str
) -> None:
    graphed = Profile.from_graph("path", path_graph(profile))
    chain = compile_instance(network, profile, cuts="chain")
    graph = compile_instance(network, graphed, cuts="graph")
    assert graph.cuts.kind == "graph" and graph.cuts.is_chain
    assert (graph.work_between == chain.work_between).all()
    assert (graph.activation_bits == chain.activation_bits).all()
    a, b = throughput_optimal(chain, engine=engine), throughput_optimal(graph, engine=engine)
    # a path graph's ideals are the chain's prefixes, numbered alike: its ideals, no partition
    assert (a.interval, a.path, a.partition) == (b.interval, b.path, b.ideals)
    assert b.partition is None and a.ideals is None
    beta = factor * a.interval
    for solver in (solve_psg, solve_milp, solve_pfp, solve_pwf):
        p, q = solver(chain, beta), solver(graph, beta)
        assert (p.cost, p.interval, p.path, p.partition) == (q.cost, q.interval, q.path,
                                                             q.ideals)  # fmt: skip
        assert [len(x) for x in p.layers] == [len(x) for x in q.layers]


@settings(max_examples=30)
@given(network=small_dags(max_nodes=4), graph=layer_graphs(max_layers=8))
def test_graph_cuts_never_plan_worse_than_the_chain(network: Network, graph: LayerGraph) -> None:
    profile = Profile.from_graph("random", graph)
    chain = throughput_optimal(compile_instance(network, profile, cuts="chain"))
    best = throughput_optimal(compile_instance(network, profile, cuts="graph"))
    assert best.interval <= chain.interval


def test_the_default_cuts_and_the_refusals(monkeypatch: pytest.MonkeyPatch) -> None:
    g = LayerGraph(tuple(f"l{k}" for k in range(8)), flops=(1.0,) * 8, output_bits=(8.0,) * 8,
                   edges=tuple(("input", f"l{k}") for k in range(8)), input_bits=8.0)  # fmt: skip
    profile = Profile.from_graph("wide", g)  # 2**8 = 256 ideals
    net = network_from_dict({"source": "s", "target": "t",
                             "nodes": [{"id": "s", "capacity": 1.0, "price": 1.0},
                                       {"id": "t", "capacity": 1.0, "price": 1.0}],
                             "links": [{"source": "s", "target": "t", "capacity": 1.0,
                                        "price": 1.0}]})  # fmt: skip
    assert compile_instance(net, profile).cuts.kind == "graph"
    assert compile_instance(net, profile, max_ideals=100).cuts.kind == "chain"
    with pytest.raises(InvalidArgument, match="more than 100 ideals") as err:
        compile_instance(net, profile, cuts="graph", max_ideals=100)
    assert err.value.field == "max_ideals"
    monkeypatch.setattr(ideals, "MAX_STATE_CUTS", 100)
    assert compile_instance(net, profile).cuts.kind == "chain"
    assert compile_instance(net, profile, pairs=False).cuts.kind == "graph"
    with pytest.raises(InvalidArgument, match="more than 100 cuts are more than this planner"):
        compile_instance(net, profile, cuts="graph")  # a planner of tables: refused at once
    big = compile_instance(net, profile, cuts="graph", pairs=False)  # the tables refuse, T* not
    with pytest.raises(InvalidArgument, match="256 cuts are more than this planner holds") as err:
        big.work_between  # noqa: B018
    assert err.value.field == "cuts"
    # nor PSG's subset step: Algorithm 1 as written, an entry of work at a time, agrees
    assert solve_psg(big, 10.0).cost == reference_psg(big, 10.0).cost
    assert throughput_optimal(big).interval == 8.0  # the 8 layers on one node, or 64 bits
    assert inferplan.throughput(net, profile).cuts == "graph"
    assert inferplan.provision(net, profile, interval=10.0).cuts == "graph"
    assert inferplan.provision(net, profile, interval=10.0, latency=100.0).cuts == "chain"
    for method in ("pfp", "pwf"):  # their T* is the lattice engine's: no tables either
        assert inferplan.provision(net, profile, interval=4.0, method=method).cuts == "graph"
    assert inferplan.provision(net, profile, interval=4.0, method="pfp-random").cuts == "chain"
    with pytest.raises(InvalidArgument, match="no layer graph"):
        compile_instance(net, Profile("p", (1.0,), (1.0, 1.0)), cuts="graph")


EXAMPLES = Path(__file__).parents[2] / "examples"
TWO = str(EXAMPLES / "two-branch.yaml")
NET = str(EXAMPLES / "network.json")


def test_plans_say_what_runs_where_in_the_json_the_table_and_the_plan_file() -> None:
    out = invoke_json(["provision", NET, TWO, "--throughput", "20", "--json"])
    graph = inferplan.load_profile(TWO).graph
    assert graph is not None and out["cuts"] == "graph"
    ran = [name for names in out["layers"] for name in names]
    assert sorted(ran) == sorted(graph.layers)
    assert len(out["sends"]) == len(out["path"]) - 1
    plan = plan_from_dict(out)
    check_plan(inferplan.load_network(NET), inferplan.load_profile(TWO), plan)
    wrong = {"layers": [["stem"]] * len(out["path"]), "sends": [["join"]] * len(out["sends"])}
    for field, value in wrong.items():
        with pytest.raises(InvalidArgument, match="not those of the ideals") as err:
            check_plan(inferplan.load_network(NET), inferplan.load_profile(TWO),
                       plan_from_dict({**out, field: value}))  # fmt: skip
        assert err.value.field == field
    chain = invoke_json(["provision", NET, TWO, "--throughput", "20", "--json", "--cuts", "chain"])
    assert chain["cuts"] == "chain" and chain["cost"] >= out["cost"] * (1 - 1e-12)
    table = runner.invoke(app, ["throughput", NET, TWO])
    assert table.exit_code == 0
    best = inferplan.throughput(inferplan.load_network(NET), inferplan.load_profile(TWO))
    for names in best.layers:
        if names:
            assert ", ".join(names[:4]) in table.stdout
    assert "sends " + ", ".join(best.sends[-1]) in table.stdout


def test_cuts_graph_without_a_graph_is_one_line_naming_the_flag() -> None:
    result = runner.invoke(app, ["throughput", NET, "vgg16", "--cuts", "graph"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: --cuts: profile 'vgg16' has no layer graph: its cuts are its blocks' (chain)"
    ]


def test_the_plan_picture_names_the_layers() -> None:
    plan = inferplan.provision(inferplan.load_network(NET), inferplan.load_profile(TWO),
                               throughput=20)  # fmt: skip
    labels = _runs(plan, None)
    for node, names in zip(plan.path, plan.layers, strict=True):
        assert labels[node] == ("forwards" if not names else ", ".join(names[:3]) +
                                (f" +{len(names) - 3}" if len(names) > 3 else ""))  # fmt: skip
    chain = inferplan.provision(inferplan.load_network(NET), inferplan.vgg16(), throughput=30)
    last = _runs(chain, None)[chain.path[-1]]
    assert last.startswith("blocks ") and chain.layers[-1][0] in last
    assert last.endswith(chain.layers[-1][-1])


def test_profile_graph_shows_its_size_and_ideals() -> None:
    result = runner.invoke(app, ["profile", TWO, "--graph"])
    assert result.exit_code == 0
    graph = inferplan.load_profile(TWO).graph
    assert graph is not None
    count = len(graph_ideals(graph))
    assert f"{graph.n_layers} layers, {len(graph.edges)} edges, {count} ideals" in result.stdout
    capped = runner.invoke(app, ["profile", TWO, "--graph", "--max-ideals", str(count - 1)])
    assert f"more than {count - 1} ideals" in capped.stdout


GOOD = {"name": "g", "input_bits": 8.0,
        "graph": {"layers": [{"id": "a", "flops": 1.0, "output_bits": 4.0},
                             {"id": "b", "flops": 2.0, "output_bits": 2.0}],
                  "edges": [["input", "a"], ["a", "b"]]}}  # fmt: skip


CYCLE = [["input", "a"], ["a", "b"], ["b", "a"]]
BAD_GRAPHS = [
    ({"edges": CYCLE}, "graph.edges: the layer graph has a cycle"),
    ({"edges": [["input", "a"], ["a", "zz"]]}, "graph.edges[1]: unknown layer 'zz'"),
    ({"edges": [["input", "a"], ["x", "b"]]},
     "graph.edges[1]: unknown tensor 'x' (a layer id or 'input')"),
    ({"edges": [["input", "a"], ["a", "b"], ["a", "b"]]},
     "graph.edges[2]: edge 'a' -> 'b' given twice"),
    ({"edges": [["input", "a"]]},
     "graph.layers[1]: layer 'b' reads no tensor (add an edge from 'input' or a layer)"),
    ({"edges": [["a", "b"], ["b", "a"]]}, "graph.edges: no layer reads 'input'"),
    ({"layers": [{"id": "a", "flops": 1.0, "output_bits": 4.0}] * 2},
     "graph.layers[1].id: duplicate layer id 'a'"),
    ({"layers": [{"id": "input", "flops": 1.0, "output_bits": 4.0}]},
     "graph.layers[0].id: 'input' names the model's input, not a layer"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "expected"), BAD_GRAPHS)  # fmt: skip
def test_bad_layer_graphs_are_one_line_naming_the_field(
    tmp_path: Path, change: dict[str, object], expected: str
) -> None:
    path = tmp_path / "bad.json"
    graph: dict[str, object] = {**GOOD["graph"], **change}  # type: ignore[dict-item]
    path.write_text(json.dumps({**GOOD, "graph": graph}))
    result = runner.invoke(app, ["throughput", NET, str(path)])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [f"error: {path}: {expected}"]


def test_graph_beside_blocks_must_describe_the_same_model(tmp_path: Path) -> None:
    path = tmp_path / "both.json"
    path.write_text(json.dumps({**GOOD, "flops": [3.0], "activation_bits": [8.0, 2.0]}))
    assert runner.invoke(app, ["throughput", NET, str(path)]).exit_code == 0
    path.write_text(json.dumps({**GOOD, "flops": [4.0], "activation_bits": [8.0, 2.0]}))
    result = runner.invoke(app, ["throughput", NET, str(path)])
    assert result.stderr.strip() == (f"error: {path}: graph: the layer graph's total FLOPs are 3, "
                                     "the blocks' 4")  # fmt: skip


@settings(max_examples=40)
@given(data=st.data(), graph=layer_graphs(max_layers=8),
       factor=st.floats(min_value=0.2, max_value=1.2))  # fmt: skip
def test_memory_terms_hold_on_ideals(data: st.DataObject, graph: LayerGraph, factor: float) -> None:
    profile = Profile.from_graph("random", graph)
    most = 4.0 * sum(graph.params) + sum(graph.output_bits) / 4.0 + graph.input_bits / 8.0
    network = data.draw(with_memory(data.draw(small_dags(max_nodes=4)), most))
    inst = compile_instance(network, profile, cuts="graph")
    assume(inst.n_cuts <= 100)
    deployments = list(graph_deployments(network, graph))
    assume(len(deployments) <= MAX_CHAINS)
    fastest = min(evaluate_graph(network, graph, p, c, math.inf).interval for p, c in deployments)
    beta = factor * fastest
    best = math.inf
    for path, chain in deployments:
        cost = evaluate_graph(network, graph, path, chain, beta).cost
        best = min(best, cost + graph_memory_cost(network, graph, path, chain))
    for solver in (solve_psg, solve_milp):
        if math.isinf(best):
            with pytest.raises(Infeasible):
                solver(inst, beta)
            continue
        plan = solver(inst, beta)
        assert plan.cost == pytest.approx(best, rel=1e-7, abs=1e-9)
        assert all(m.memory is None or m.need <= m.memory * (1 + 1e-9) for m in plan.memory)


@pytest.mark.parametrize("method", ["milp", "fast"])
def test_services_plan_at_ideals_and_say_what_runs_where(method: str) -> None:
    from inferplan.codesign.services.joint import Service, provision_services

    net = inferplan.load_network(NET)
    two = inferplan.load_profile(TWO)
    graph = two.graph
    assert graph is not None
    services = [Service("two", two, "s", "t", interval=1 / 15),
                Service("vgg", inferplan.vgg16(), "s", "t", interval=1 / 10)]  # fmt: skip
    plan = provision_services(net, services, method=method)
    first, second = plan.services
    assert first.cuts == "graph" and second.cuts == "chain"
    assert sorted(x for names in first.layers for x in names) == sorted(graph.layers)
    assert [x for names in second.layers for x in names] == list(inferplan.vgg16().blocks)
    assert first.interval <= first.target_interval * (1 + 1e-9)


def test_merging_layers_no_cut_should_separate() -> None:
    graph = inferplan.load_profile(TWO).graph
    assert graph is not None
    merged = graph.merged([["left1", "left2"]])
    assert merged.layers == ("stem", "left1", "right1", "right2", "join")
    assert math.fsum(merged.flops) == math.fsum(graph.flops)
    assert merged.output_bits[1] == graph.output_bits[graph.index["left2"]]  # left1's stays inside
    assert len(graph_ideals(merged)) == len(graph_ideals(graph)) - 3 == graph_cuts(merged).n_cuts
    with pytest.raises(InvalidProfile, match="merging these layers the layer graph has a cycle"):
        graph.merged([["stem", "join"]])
    with pytest.raises(InvalidProfile, match="is in two groups"):
        graph.merged([["left1", "left2"], ["left2", "right1"]])


def test_a_node_that_only_forwards_holds_its_boundary() -> None:
    # a and b (1 Mbit each) are read by x and y: a node forwarding {a, b} holds 250 kB, more
    # than the whole model's need (125 kB: one layer's working set); memory is 200 kB
    g = LayerGraph(("a", "b", "x", "y"), flops=(1e9,) * 4, output_bits=(1e6, 1e6, 8.0, 8.0),
                   edges=(("input", "a"), ("input", "b"), ("a", "x"), ("b", "y")),
                   input_bits=8.0)  # fmt: skip
    nodes = [{"id": v, "capacity": c, "price": 1.0, "memory": 2e5}
             for v, c in (("s", 1e9), ("m", 1e6), ("t", 1e9))]  # fmt: skip
    links = [{"source": u, "target": v, "capacity": 1e9, "price": 1.0}
             for u, v in (("s", "m"), ("m", "t"))]  # fmt: skip
    net = network_from_dict({"source": "s", "target": "t", "nodes": nodes, "links": links})
    inst = compile_instance(net, Profile.from_graph("wide", g), cuts="graph")
    assert inst.memory_need[0, -1] < 2e5 < inst.most_need
    # m cannot forward {a, b} (s and t running a branch each, 2 s): s runs a and x, t b and y
    for best in (throughput_optimal(inst), throughput_milp(inst)):
        assert best.interval == 2.0
        assert best.layers == (("a", "x"), (), ("b", "y"))
        path = [inst.node_ids.index(v) for v in best.path]
        assert max(path_needs(inst, path, list(best.cut_indices))) <= 2e5
