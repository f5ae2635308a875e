"""Why a plan: the runners-up against a brute force over every path and partition (and every
chain of ideals), binding constraints and margins on instances whose answers follow by hand."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import LinearCost, Link, Network, Node, Profile
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.explain import explain_plan
from inferplan.codesign.latency.bound import solve_latency
from inferplan.errors import Infeasible, InvalidArgument
from inferplan.profiles.graph import LayerGraph

from ..cli import app, invoke_json, runner
from ..oracles import (
    brute_force_latency_cost,
    deployments,
    evaluate,
    evaluate_graph,
    graph_deployments,
)
from ..strategies import COST_KINDS, layer_graphs, small_dags, small_profiles

EXAMPLES = Path(__file__).parents[2] / "examples"


def _close(found: float, expected: float) -> bool:
    if math.isinf(expected):
        return math.isinf(found)
    return found == pytest.approx(expected, rel=1e-7, abs=1e-9)


@settings(max_examples=80)
@given(network=small_dags(max_nodes=5, cost_kinds=COST_KINDS),
       profile=small_profiles(max_blocks=4),
       factor=st.floats(min_value=0.1, max_value=1.2))  # fmt: skip
def test_the_runners_up_are_the_best_on_another_path_and_on_other_cuts(
    network: Network, profile: Profile, factor: float
) -> None:
    inst = compile_instance(network, profile, cuts="chain")
    beta = factor * throughput_optimal(inst).interval
    try:
        plan = solve_psg(inst, beta)
    except Infeasible:
        assume(False)
        return
    why = explain_plan(inst, plan)
    other_path, other_cuts = math.inf, math.inf
    for path, partition in deployments(network, profile.n_blocks):
        cost = evaluate(network, profile, path, partition, beta).cost
        if path != plan.path:
            other_path = min(other_path, cost)
        elif partition != plan.partition:
            other_cuts = min(other_cuts, cost)
    found = [why.other_path.plan, why.other_cuts.plan]
    for alternative, expected in zip(found, (other_path, other_cuts), strict=True):
        assert _close(math.inf if alternative is None else alternative.cost, expected)
    if why.other_path.plan is not None:
        assert why.other_path.plan.path != plan.path
        assert why.other_path.extra_cost >= -1e-9 * max(1.0, plan.cost)
    if why.other_cuts.plan is not None:
        assert why.other_cuts.plan.path == plan.path
        assert why.other_cuts.plan.partition != plan.partition


@settings(max_examples=40)
@given(network=small_dags(max_nodes=4, cost_kinds=("linear", "capped", "tiers", "modules"),
                         delays=True),
       profile=small_profiles(max_blocks=3), factor=st.floats(min_value=0.2, max_value=1.2),
       share=st.floats(min_value=0.3, max_value=1.0))  # fmt: skip
def test_the_runners_up_under_a_latency_bound_are_the_best_within_it(
    network: Network, profile: Profile, factor: float, share: float
) -> None:
    inst = compile_instance(network, profile, cuts="chain")
    beta = factor * throughput_optimal(inst).interval
    try:
        free = solve_psg(inst, beta)
        assert free.latency is not None
        plan = solve_latency(inst, beta, latency=share * free.latency)
    except Infeasible:
        assume(False)
        return
    bound = share * free.latency
    assume(plan.status == "optimal")
    why = explain_plan(inst, plan)
    for alternative, keep in (
        (why.other_path, lambda path, _: path != plan.path),
        (why.other_cuts, lambda path, cut: path == plan.path and cut != plan.partition),
    ):
        expected = brute_force_latency_cost(network, profile, beta, bound, keep=keep)
        found = math.inf if alternative.plan is None else alternative.plan.cost
        if alternative.plan is not None and alternative.plan.status != "optimal":
            continue  # a ranking stopped at its limit claims no optimum
        assert found == pytest.approx(expected, rel=1e-6, abs=1e-9) or (
            math.isinf(expected) and math.isinf(found))


@settings(max_examples=30)
@given(network=small_dags(max_nodes=4), graph=layer_graphs(max_layers=6),
       factor=st.floats(min_value=0.1, max_value=1.2))  # fmt: skip
def test_the_runners_up_at_ideals_are_the_best_chains_of_ideals(
    network: Network, graph: LayerGraph, factor: float
) -> None:
    profile = Profile.from_graph("random", graph)
    inst = compile_instance(network, profile, cuts="graph")
    assume(inst.n_cuts <= 60)
    beta = factor * throughput_optimal(inst).interval
    plan = solve_psg(inst, beta)
    why = explain_plan(inst, plan)
    done, mine = frozenset[str](), []
    for names in plan.layers:
        done = done | set(names)
        mine.append(done)
    other_path, other_cuts = math.inf, math.inf
    for seen, (path, chain) in enumerate(graph_deployments(network, graph)):
        assume(seen < 20_000)
        cost = evaluate_graph(network, graph, path, chain, beta).cost
        if path != plan.path:
            other_path = min(other_path, cost)
        elif list(chain) != mine:
            other_cuts = min(other_cuts, cost)
    for alternative, expected in zip([why.other_path.plan, why.other_cuts.plan],
                                     (other_path, other_cuts), strict=True):  # fmt: skip
        assert _close(math.inf if alternative is None else alternative.cost, expected)
        if alternative is not None:
            assert alternative.partition is None and alternative.ideals is not None


def _pair(t_cap: float = math.inf, *, link_price: float = 1.0, bandwidth: float = 1.0) -> Network:
    """``s -> t``; ``s`` slow and sold out (the model runs on ``t``), ``t`` at 1 FLOP/s for 1
    per FLOP/s up to ``t_cap``, the link at ``bandwidth`` for ``link_price`` per bit/s."""
    return Network(
        nodes=(Node("s", 1e-3, 1e6, LinearCost(1e6, 0.0)),
               Node("t", 1.0, 1.0, LinearCost(1.0, t_cap))),
        links=(Link("s", "t", bandwidth, link_price),),
        source="s", target="t",
    )  # fmt: skip


ONE = Profile("one", flops=(1.0,), activation_bits=(1.0, 1e-9))


def test_a_cap_that_binds_has_its_margin_and_one_that_does_not_is_not_listed() -> None:
    # Latency 1 s, 1 bit then 1 FLOP: 1 / B + 1 / C <= 1, each unit of either priced 1.
    # Free, the optimum is B = C = 2 (cost 2); with t's purchase capped at m = 0.5, C = 1.5
    # and B = 3: cost(m) = m + 1 / m, which falls by 1 / m**2 - 1 = 3 per FLOP/s raised.
    capped = _pair(0.5)
    plan = inferplan.provision(capped, ONE, interval=10.0, latency=1.0, cuts="chain")
    assert plan.cost == pytest.approx(2.5, rel=1e-6)
    why = inferplan.explain(capped, ONE, plan, eps=1e-4)
    caps = [c for c in why.binding if c.kind == "cap"]
    assert [(c.element, c.id) for c in caps] == [("node", "t")]
    assert caps[0].used == pytest.approx(0.5) and caps[0].limit == 0.5
    assert caps[0].marginal == pytest.approx(3.0, rel=1e-2)
    (bound,) = [c for c in why.binding if c.kind == "latency"]
    # d cost / d L at L = 1 with m fixed: B = 1 / (L - 1 / 1.5), cost = B - 1: -dB/dL = B**2 = 9
    assert bound.marginal == pytest.approx(9.0, rel=1e-2)
    free = _pair(2.0)
    plan = inferplan.provision(free, ONE, interval=10.0, latency=1.0, cuts="chain")
    assert plan.cost == pytest.approx(2.0, rel=1e-6)
    why = inferplan.explain(free, ONE, plan, eps=1e-4)
    assert [c for c in why.binding if c.kind == "cap"] == []
    assert [c.kind for c in why.binding if c.kind == "latency"] == ["latency"]


def test_the_marginal_cost_of_the_target_and_the_stages_it_fills() -> None:
    # 10 FLOP on t (1 FLOP/s, 1 per FLOP/s) and 2 bits over the link (1 bit/s, 3 per bit/s):
    # at F inferences/s the plan buys 10 F - 1 and 2 F - 1, so each extra inference/s costs
    # 10 * 1 + 2 * 3 = 16, and both stages take the whole interval.
    ten = Profile("ten", flops=(10.0,), activation_bits=(2.0, 1e-9))
    net = _pair(link_price=3.0)
    plan = inferplan.provision(net, ten, throughput=1.0, cuts="chain")
    assert plan.partition == (0, 1) and plan.cost == pytest.approx(9 + 3)
    why = inferplan.explain(net, ten, plan)
    assert why.marginal_throughput == pytest.approx(16.0, rel=1e-9)
    assert {(c.kind, c.id) for c in why.binding} == {("interval", "t"), ("interval", "s->t")}
    # a link fast enough for the target is not tight, and its bandwidth costs nothing more
    roomy = _pair(link_price=3.0, bandwidth=5.0)
    plan = inferplan.provision(roomy, ten, throughput=1.0, cuts="chain")
    why = inferplan.explain(roomy, ten, plan)
    assert {(c.kind, c.id) for c in why.binding} == {("interval", "t")}
    assert why.marginal_throughput == pytest.approx(10.0, rel=1e-9)


def test_no_faster_plan_within_the_caps_makes_the_margin_infinite() -> None:
    net = _pair(9.0)  # t reaches 10 FLOP/s at most: 1 inference/s of `ten` exactly
    ten = Profile("ten", flops=(10.0,), activation_bits=(1.0, 1e-9))
    plan = inferplan.provision(net, ten, throughput=1.0, cuts="chain")
    why = inferplan.explain(net, ten, plan)
    assert math.isinf(why.marginal_throughput)
    assert "no faster plan within the caps" in why.lines()[-1]
    (cap,) = [c for c in why.binding if c.kind == "cap"]
    assert cap.id == "t" and cap.used == pytest.approx(9.0)


def test_explain_refuses_a_heuristic_method_and_a_bad_step() -> None:
    net = inferplan.load_network(EXAMPLES / "network.json")
    plan = inferplan.provision(net, inferplan.vgg16(), throughput=30)
    with pytest.raises(InvalidArgument, match=r"method: .*exact method"):
        inferplan.explain(net, inferplan.vgg16(), plan, method="pfp")
    with pytest.raises(InvalidArgument, match="eps: must lie in"):
        inferplan.explain(net, inferplan.vgg16(), plan, eps=0.0)


def test_provision_explains_in_the_table_the_json_and_the_report(tmp_path: Path) -> None:
    args = ["provision", str(EXAMPLES / "network.json"), str(EXAMPLES / "two-branch.yaml"),
            "--throughput", "30"]  # fmt: skip
    plain = runner.invoke(app, args)
    assert plain.exit_code == 0 and "why this plan" not in plain.stdout
    shown = runner.invoke(app, [*args, "--explain"])
    assert shown.exit_code == 0, shown.stderr
    assert "why this plan" in shown.stdout and "best on another path" in shown.stdout
    assert "marginal cost of the target" in shown.stdout
    out = invoke_json([*args, "--explain", "--json"])
    api = inferplan.explain(inferplan.load_network(EXAMPLES / "network.json"),
                            inferplan.load_profile(EXAMPLES / "two-branch.yaml"),
                            inferplan.provision(inferplan.load_network(EXAMPLES / "network.json"),
                                                inferplan.load_profile(
                                                    EXAMPLES / "two-branch.yaml"),
                                                throughput=30))  # fmt: skip
    assert out["explain"] == json.loads(json.dumps(api.to_dict()))
    kinds = [r["kind"] for r in out["explain"]["runners_up"]]
    assert kinds == ["other path", "other cuts"]
    assert all(r["partition"] is None and r["ideals"] for r in out["explain"]["runners_up"])
    assert "explain" not in invoke_json([*args, "--json"])
    report = tmp_path / "plan.html"
    assert runner.invoke(app, [*args, "--report", str(report)]).exit_code == 0
    page = report.read_text()
    assert "<h2>Why this plan</h2>" in page and "best on other cuts" in page


def test_explain_is_for_one_plan_of_one_path() -> None:
    for extra in (["--services", str(EXAMPLES / "services.yaml")],
                  ["vgg16", "--throughput", "30", "--pipelines", "any"]):  # fmt: skip
        result = runner.invoke(app, ["provision", str(EXAMPLES / "network.json"), *extra,
                                     "--explain"])  # fmt: skip
        assert result.exit_code == 2
        assert result.stderr.count("\n") == 1 and "--explain" in result.stderr


def _with_memory(memory: float, cap: float) -> Network:
    return Network(
        nodes=(Node("s", 1e-3, 1e6, LinearCost(1e6, 0.0)),
               Node("t", 1.0, 1.0, memory=memory, memory_cost=LinearCost(1.0, cap))),
        links=(Link("s", "t", 1.0, 1.0),), source="s", target="t",
    )  # fmt: skip


def test_memory_a_plan_fills_binds_and_so_does_its_cap_when_bought_up_to_it() -> None:
    heavy = Profile("heavy", flops=(1.0,), activation_bits=(1.0, 1e-9), params=(1000,))
    plan = inferplan.provision(_with_memory(100.0, 1e9), heavy, interval=10.0, cuts="chain")
    need = {m.id: m.need for m in plan.memory}["t"]
    assert need > 100.0  # t must buy memory: it ends full, its cap far
    why = inferplan.explain(_with_memory(100.0, 1e9), heavy, plan)
    assert [(c.kind, c.id) for c in why.binding if "memory" in c.kind] == [("memory", "t")]
    capped = _with_memory(100.0, need - 100.0)  # the cap is what the plan buys
    plan = inferplan.provision(capped, heavy, interval=10.0, cuts="chain")
    why = inferplan.explain(capped, heavy, plan)
    found = {c.kind: c for c in why.binding if "memory" in c.kind}
    assert set(found) == {"memory", "memory cap"}
    assert found["memory"].used == pytest.approx(need)
    assert found["memory"].limit == pytest.approx(need)
    # no latency bound: more memory for sale opens no cheaper plan
    assert found["memory cap"].marginal == pytest.approx(0.0, abs=1e-9)
