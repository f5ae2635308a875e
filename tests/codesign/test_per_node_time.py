"""Per-node time models: each node its own loads (seconds per block measured on it), read by
PSG, T*, the MILPs, PFP, PWF, the latency bound and the least latency, checked against a brute
force over every path and partition priced from the measurements alone."""

from __future__ import annotations

import math

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import inferplan
from inferplan.codesign import compile_instance, solve_psg, throughput_optimal
from inferplan.codesign.engine.psg import reference_psg
from inferplan.codesign.heuristics import solve_pfp, solve_pwf
from inferplan.codesign.latency.bound import solve_latency
from inferplan.codesign.latency.least import least_latency, throughput_within
from inferplan.codesign.milp.cost import solve_milp
from inferplan.codesign.milp.latency import solve_milp_latency
from inferplan.codesign.milp.throughput import throughput_milp
from inferplan.codesign.timing import FLOPS_OVER_CAPACITY, MeasuredBlocks, PerNodeTimeModel
from inferplan.errors import Infeasible, InvalidArgument
from tests.oracles import _allocated, _scalar
from tests.strategies import small_dags, small_profiles

Measured = dict[str, list[float]]


@st.composite
def measured_instances(draw: st.DrawFn) -> tuple[inferplan.Network, inferplan.Profile, Measured]:
    """A small DAG, a chain profile and seconds per block measured on some of its nodes
    (zero seconds too: a block a node's accelerator makes free)."""
    net = draw(small_dags(max_nodes=5, cost_kinds=("linear", "capped")))
    prof = draw(small_profiles(max_blocks=4))
    secs = st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=50.0, allow_nan=False))
    measured = {n.id: [draw(secs) for _ in range(prof.n_blocks)]
                for n in net.nodes if draw(st.booleans())}  # fmt: skip
    return net, prof, measured


def _deployments(net: inferplan.Network, n: int):
    for path in nx.all_simple_paths(net.graph, net.source, net.target):
        for inner in _partitions(n, len(path) - 1):
            yield tuple(path), (*inner, n)


def _partitions(n: int, k: int):
    if k == 0:
        yield ()
        return
    for first in range(n + 1):
        for rest in _partitions(n, k - 1):
            if not rest or first <= rest[0]:
                yield (first, *rest)


def _node(net: inferplan.Network, v: str) -> inferplan.Node:
    return next(n for n in net.nodes if n.id == v)


def _load(net, prof, measured: Measured, v: str, a: int, b: int) -> float:
    """The load of blocks ``a+1..b`` on ``v``: its measured seconds times its capacity, or
    the FLOPs."""
    if v in measured:
        return math.fsum(measured[v][a:b]) * _node(net, v).capacity
    return math.fsum(prof.flops[a:b])


def _stages(net, prof, measured, path, partition, beta):
    """``(load, capacity, least purchase, cost)`` of every node and link stage, and the
    links' propagation delays, from the definitions."""
    out, propagation, done = [], 0.0, 0
    for k, v in enumerate(path):
        node, b = _node(net, v), partition[k]
        w = _load(net, prof, measured, v, done, b)
        out.append((w, node.capacity, max(0.0, w / beta - node.capacity), node.capacity_cost))
        if k + 1 < len(path):
            link = next(e for e in net.links if (e.source, e.target) == (v, path[k + 1]))
            bits = prof.activation_bits[b]
            out.append((bits, link.capacity, max(0.0, bits / beta - link.capacity),
                        link.capacity_cost))  # fmt: skip
            propagation += link.delay_s
        done = b
    return out, propagation


def _brute(net, prof, measured, beta: float, latency: float = math.inf):
    """T*, the least latency, the least cost at ``beta`` and within ``latency``, over every
    simple path and monotone partition."""
    t_star = least = cost = bounded = math.inf
    for path, partition in _deployments(net, prof.n_blocks):
        stages, propagation = _stages(net, prof, measured, path, partition, beta)
        t_star = min(t_star, max(w / c for w, c, _, _ in stages))
        least = min(least, math.fsum(w / c for w, c, _, _ in stages) + propagation)
        here = math.fsum(_scalar(f)(rho) for _, _, rho, f in stages)
        cost = min(cost, here)
        if math.isfinite(latency) and here < bounded:
            bounded = min(bounded, _allocated(stages, latency - propagation, bounded))
    return t_star, least, cost, bounded


def _close(got: float, want: float) -> bool:
    return got == pytest.approx(want, rel=1e-6, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(case=measured_instances(), share=st.sampled_from([1.0, 0.7, 0.3]))
def test_t_star_and_psg_under_measured_times_are_the_brute_force_optimum(case, share):
    net, prof, measured = case
    inst = compile_instance(net, prof, cuts="chain", node_time=MeasuredBlocks.of(measured))
    t_star = _brute(net, prof, measured, math.inf)[0]
    for engine in ("numpy", "auto"):
        assert _close(throughput_optimal(inst, engine=engine).interval, t_star)
    assert _close(throughput_milp(inst).interval, t_star)
    if t_star == 0:
        return
    beta = t_star / share
    _, least, cost, _ = _brute(net, prof, measured, beta)
    assert _close(least_latency(inst).latency, least)
    for solve in (solve_psg, reference_psg, solve_milp, solve_pfp, solve_pwf):
        try:
            plan = solve(inst, beta)
        except Infeasible:
            assert math.isinf(cost) or solve in (solve_pfp, solve_pwf)
            continue
        assert plan.interval <= beta * (1 + 1e-9)
        if solve in (solve_pfp, solve_pwf):
            assert plan.cost >= cost * (1 - 1e-6) - 1e-9
        else:
            assert _close(plan.cost, cost), solve.__name__


@settings(max_examples=40, deadline=None)
@given(case=measured_instances(), share=st.sampled_from([0.7, 0.3]),
       slack=st.sampled_from([0.3, 0.6, 0.9, 1.0, 1.3, 3.0]))  # fmt: skip
def test_the_latency_bound_under_measured_times_is_the_brute_force_optimum(case, share, slack):
    net, prof, measured = case
    inst = compile_instance(net, prof, cuts="chain", node_time=MeasuredBlocks.of(measured))
    t_star, fastest, _, _ = _brute(net, prof, measured, math.inf)
    if t_star == 0:
        return
    beta = t_star / share
    bound = fastest * slack
    within = [
        max(w / c for w, c, _, _ in _stages(net, prof, measured, p, b, beta)[0])
        for p, b in _deployments(net, prof.n_blocks)
        if math.fsum(w / c for w, c, _, _ in _stages(net, prof, measured, p, b, beta)[0])
        + _stages(net, prof, measured, p, b, beta)[1] <= bound * (1 + 1e-9)
    ]  # below 1, the bound is faster than any deployment as the network is: purchases
    if slack >= 1:  # for latency are needed, and the MILP's columns are what they weigh
        assert _close(throughput_within(inst, bound).interval, min(within))
    want = _brute(net, prof, measured, beta, bound)[3]
    for solve in (solve_latency, solve_milp_latency):
        try:
            plan = solve(inst, beta, latency=bound)
        except Infeasible:
            assert math.isinf(want) or want > 1e300, solve.__name__
            continue
        assert plan.latency <= bound * (1 + 1e-9) and plan.interval <= beta * (1 + 1e-9)
        if plan.status == "optimal":
            assert plan.cost == pytest.approx(want, rel=1e-5, abs=1e-8), solve.__name__


def _tiny() -> tuple[inferplan.Network, inferplan.Profile]:
    return inferplan.load_network("examples/network.json"), inferplan.mlp(64, 3)


def test_measuring_every_node_at_its_flops_over_capacity_gives_the_default_plans():
    net = inferplan.tiered(seed=4)
    prof = inferplan.mlp(512, 5)
    same = MeasuredBlocks.of({n.id: [f / n.capacity for f in prof.flops] for n in net.nodes})
    plain = compile_instance(net, prof, cuts="chain")
    measured = compile_instance(net, prof, cuts="chain", node_time=same)
    best = throughput_optimal(plain)
    assert throughput_optimal(measured).interval == pytest.approx(best.interval, rel=1e-12)
    want = solve_psg(plain, 0.5 * best.interval)
    got = solve_psg(measured, 0.5 * best.interval)
    assert got.cost == pytest.approx(want.cost, rel=1e-9)


def test_a_slower_measured_node_is_left_out_and_a_faster_one_taken():
    net, prof = inferplan.tiered(seed=4), inferplan.mlp(512, 5)
    best = throughput_optimal(compile_instance(net, prof, cuts="chain"))
    slow = {v: [1e3] * prof.n_blocks for v in best.path if v not in (net.source, net.target)}
    found = throughput_optimal(compile_instance(net, prof, cuts="chain",
                                                node_time=MeasuredBlocks.of(slow)))  # fmt: skip
    done = (0, *found.partition[:-1])
    held = {v for v, a, b in zip(found.path, done, found.partition, strict=True) if b > a}
    assert not held & slow.keys() and found.interval < 1e3


def test_the_default_model_shares_its_loads_and_a_measured_one_gives_each_node_its_own():
    net, prof = _tiny()
    plain = compile_instance(net, prof)
    assert plain.shared_work and plain.node_loads.shape == (1, 4, 4)
    model = MeasuredBlocks.of({"a1": [0.5, 0.25, 0.25]})
    assert isinstance(model, PerNodeTimeModel)
    assert not isinstance(FLOPS_OVER_CAPACITY, PerNodeTimeModel)
    inst = compile_instance(net, prof, node_time=model)
    edge = inst.node_ids.index("a1")
    assert inst.node_loads.shape == (len(inst.node_ids), 4, 4)
    assert inst.work(1, 3, edge) == 0.5 * _node(net, "a1").capacity
    other = next(v for v in range(len(inst.node_ids)) if v != edge)
    assert inst.work(1, 3, other) == math.fsum(prof.flops[1:3])


@pytest.mark.parametrize(("seconds", "field", "words"), [
    ({"a1": [1.0, -1.0, 1.0]}, "a1", "block 2's time"),
    ({"a1": [1.0, math.nan, 1.0]}, "a1", "finite"),
    ({"a1": [1.0, 1.0]}, "a1", "2 block times given, the model has 3 blocks"),
])  # fmt: skip
def test_bad_measurements_are_refused_in_one_line_naming_the_node(seconds, field, words):
    net, prof = _tiny()
    with pytest.raises(InvalidArgument) as info:
        inferplan.throughput(net, prof, node_time=MeasuredBlocks.of(seconds))
    assert info.value.field == field and words in str(info.value) and "\n" not in str(info.value)


def test_a_node_of_no_finite_capacity_cannot_be_measured():
    net, prof = _tiny()
    cuts = compile_instance(net, prof, cuts="chain").cuts
    model = MeasuredBlocks.of({"a1": [1.0] * 3})
    for capacity in (0.0, math.inf):
        with pytest.raises(InvalidArgument, match="positive finite capacity") as info:
            model.node_work_table(cuts, ("s", "a1"), np.array([1.0, capacity]))
        assert info.value.field == "a1"


def test_measured_blocks_refuse_a_layer_graphs_ideals_and_take_its_blocks():
    net, prof = _tiny()[0], inferplan.load_profile("examples/two-branch.yaml")
    model = MeasuredBlocks.of({"a1": [1.0] * prof.n_blocks})
    with pytest.raises(InvalidArgument, match="cuts='chain'") as info:
        inferplan.throughput(net, prof, cuts="graph", node_time=model)
    assert info.value.field == "node_time"
    assert inferplan.throughput(net, prof, cuts="chain", node_time=model).interval > 0


def test_the_shared_load_table_is_refused_under_a_per_node_model():
    net, prof = _tiny()
    model = MeasuredBlocks.of({"a1": [0.01] * 3})
    inst = compile_instance(net, prof, node_time=model)
    with pytest.raises(InvalidArgument, match="gives each node its own") as info:
        _ = inst.work_between
    assert info.value.field == "node_time"


def test_provision_and_the_least_latency_take_the_node_time_model():
    net = _tiny()[0]
    prof = inferplan.Profile("heavy", flops=(1e12,) * 3, activation_bits=(1e3,) * 4)
    fast = MeasuredBlocks.of({n.id: [1e-9] * 3 for n in net.nodes})
    best = inferplan.throughput(net, prof, node_time=fast)
    plain = inferplan.throughput(net, prof)
    assert best.interval < plain.interval
    plan = inferplan.provision(net, prof, interval=plain.interval, node_time=fast)
    assert plan.interval <= plain.interval and plan.cost <= inferplan.provision(
        net, prof, interval=plain.interval).cost  # fmt: skip
    assert inferplan.latency_optimal(net, prof, node_time=fast).latency < (
        inferplan.latency_optimal(net, prof).latency)  # fmt: skip


def test_the_loads_a_model_gives_are_checked():
    class Wrong:
        additive = False

        def node_work_table(self, cuts, nodes, capacity):
            return np.zeros((len(nodes), cuts.n_cuts, cuts.n_cuts))  # 0 where no stage goes

    net, prof = _tiny()
    with pytest.raises(InvalidArgument, match="inf where no transition goes"):
        throughput_optimal(compile_instance(net, prof, node_time=Wrong()))


def _cli_error(args: list[str]) -> str:
    from tests.cli import app, runner

    result = runner.invoke(app, args)
    assert result.exit_code == 2, (result.stdout, result.stderr)
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    return result.stderr


def _times_file(tmp_path, text: str) -> str:
    path = tmp_path / "times.yaml"
    path.write_text(text)
    return str(path)


def test_the_cli_plans_with_measured_node_times(tmp_path):
    from tests.cli import invoke_json

    net = "examples/network.json"
    plain = invoke_json(["throughput", net, "mlp-64x3", "--json"])
    # the plain deployment's compute node made slow: T* leaves it
    held = [v for v, a, b in zip(plain["path"], [0, *plain["partition"][:-1]], plain["partition"],
                                 strict=True) if b > a]  # fmt: skip
    times = _times_file(tmp_path, "block_seconds:\n" + "".join(
        f"  {v}: [10.0, 10.0, 10.0]\n" for v in held))  # fmt: skip
    slow = invoke_json(["throughput", net, "mlp-64x3", "--json", "--node-times", times])
    assert (slow["path"], slow["partition"]) != (plain["path"], plain["partition"])
    done = [0, *slow["partition"][:-1]]
    assert not {v for v, a, b in zip(slow["path"], done, slow["partition"], strict=True)
                if b > a} & set(held)  # fmt: skip
    plan = invoke_json(["provision", net, "mlp-64x3", "--json", "--node-times", times,
                        "--interval", str(slow["interval"])])  # fmt: skip
    assert plan["cost"] == pytest.approx(0.0, abs=1e-12)


@pytest.mark.parametrize(("text", "words"), [
    ("block_seconds:\n  nowhere: [1, 1, 1]\n", "block_seconds.nowhere: unknown node 'nowhere'"),
    ("block_seconds:\n  a1: [1, 1]\n", "block_seconds.a1: 2 block times given, the model has 3"),
    ("block_seconds:\n  a1: [1, -1, 1]\n", "block_seconds.a1: block 2's time must be"),
    ("block_second:\n  a1: [1, 1, 1]\n", "unknown field"),
])  # fmt: skip
def test_a_bad_node_times_file_is_one_error_line_naming_the_field(tmp_path, text, words):
    times = _times_file(tmp_path, text)
    for command in (["throughput"], ["provision", "--throughput", "10"]):
        line = _cli_error([command[0], "examples/network.json", "mlp-64x3", *command[1:],
                           "--node-times", times])  # fmt: skip
        assert words in line and times in line


def test_node_times_are_refused_where_no_planner_reads_them(tmp_path):
    times = _times_file(tmp_path, "block_seconds:\n  a1: [1, 1, 1]\n")
    assert "--cuts" in _cli_error(["throughput", "examples/network.json", "mlp-64x3",
                                   "--node-times", times, "--cuts", "graph"])  # fmt: skip


def test_flow_plans_take_node_times_on_the_cli(tmp_path):
    """``--pipelines any --node-times``: a node measured slow carries less of the largest
    flow, and provisioning that flow under the same times buys nothing."""
    from tests.cli import invoke_json

    net, heavy = "examples/network.json", "mlp-16384x3"
    plain = invoke_json(["throughput", net, heavy, "--pipelines", "any", "--json"])
    busiest = max((x for x in plain["loads"] if x["kind"] == "node"),
                  key=lambda x: x["load"] / x["capacity"])  # fmt: skip
    times = _times_file(tmp_path, f"block_seconds:\n  {busiest['id']}: [100, 100, 100]\n")
    slow = invoke_json(["throughput", net, heavy, "--pipelines", "any", "--json",
                        "--node-times", times])  # fmt: skip
    assert slow["throughput"] < plain["throughput"] * (1 - 1e-6)
    plan = invoke_json(["provision", net, heavy, "--pipelines", "any", "--json", "--node-times",
                        times, "--throughput", str(slow["throughput"])])  # fmt: skip
    assert plan["cost"] == pytest.approx(0.0, abs=1e-9)
    line = _cli_error(["throughput", net, heavy, "--pipelines", "any", "--node-times",
                       _times_file(tmp_path, "block_seconds:\n  a1: [1, 1]\n")])  # fmt: skip
    assert "block_seconds.a1: 2 block times given" in line
