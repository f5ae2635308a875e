"""Every method reports its outcome the same way: a plan with a status, or Infeasible."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import inferplan
from inferplan import Infeasible, LinearCost, Network
from inferplan.codesign import METHODS, compile_instance, solve_pfp, solve_pwf
from inferplan.errors import InvalidArgument
from inferplan.units import link_name
from tests.cli import app, runner
from tests.oracles import brute_force_interval_at_caps, evaluate, stage_times_at_caps
from tests.strategies import COST_KINDS, small_dags, small_profiles

CAP = 1e9


def _capped_network() -> Network:
    """Two nodes and a link whose costs carry a cap far below what a fast target needs."""
    return inferplan.network_from_dict(
        {
            "source": "s",
            "target": "t",
            "nodes": [
                {"id": "s", "capacity": 1e9, "cost": {"kind": "linear", "price": 1e-9, "max": CAP}},
                {"id": "t", "capacity": 1e9, "cost": {"kind": "linear", "price": 1e-9, "max": CAP}},
            ],
            "links": [
                {"source": "s", "target": "t", "capacity": 1e8,
                 "cost": {"kind": "linear", "price": 1e-8, "max": CAP}},
            ],
        }
    )  # fmt: skip


@pytest.mark.parametrize("method", list(METHODS))
def test_every_method_refuses_a_target_beyond_the_caps_the_same_way(method):
    with pytest.raises(Infeasible) as info:
        inferplan.provision(_capped_network(), inferplan.vgg16(), throughput=100, method=method)
    assert str(info.value).startswith(
        "no plan reaches an interval of 0.01 s within the capacity caps"
    )


@pytest.mark.parametrize("method", list(METHODS))
def test_plans_say_whether_they_are_proven_optimal(method):
    plan = inferplan.provision(_capped_network(), inferplan.vgg16(), throughput=0.05, method=method)
    assert plan.status == ("optimal" if METHODS[method].exact else "heuristic")
    assert plan.to_dict()["status"] == plan.status


@pytest.mark.parametrize("method", ["psg", "pfp", "milp"])
def test_cli_exits_3_on_infeasible_with_one_json_object(tmp_path, method):
    path = tmp_path / "capped.json"
    inferplan.save_network(_capped_network(), path)
    result = runner.invoke(
        app, ["provision", str(path), "vgg16", "--throughput", "100", "--method", method, "--json"]
    )
    assert result.exit_code == 3
    out = json.loads(result.stdout)
    assert out["status"] == "infeasible" and out["method"] == method
    assert out["message"].startswith("no plan reaches an interval of 0.01 s")
    assert result.stderr.startswith("error: no plan reaches") and result.stderr.count("\n") == 1
    # what the caps allow, as numbers: T* with node 't' at its cap of 2e9 FLOP/s
    t_at_cap = sum(inferplan.vgg16().flops[6:]) / 2e9
    assert out["best_interval"] == pytest.approx(t_at_cap, rel=1e-9)
    assert out["binding"] == [{"kind": "node", "id": "t", "capacity": 2e9}]
    assert out["at_caps"]["path"] == ["s", "t"] and out["at_caps"]["partition"] == [6, 16]
    plain = runner.invoke(app, ["provision", str(path), "vgg16", "--throughput", "100"])
    assert plain.exit_code == 3 and "the caps allow at best 7.985 s" in plain.stderr
    assert "best within the caps: interval 7.985 s" in plain.stdout
    assert "binds: at its cap of 2 GFLOP/s" in plain.stdout and "s -> t" in plain.stdout


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    net=small_dags(max_nodes=5, cost_kinds=COST_KINDS),
    profile=small_profiles(max_blocks=4),
    alpha=st.floats(min_value=0.2, max_value=0.999),
    method=st.sampled_from(list(METHODS)),
)
def test_an_infeasible_target_names_the_best_interval_the_caps_allow_and_what_binds(
    net, profile, alpha, method
):
    best = brute_force_interval_at_caps(net, profile)
    if not 0 < best < math.inf:
        return
    exact = inferplan.provision(net, profile, interval=best * (1 + 1e-6), method="psg")
    assert exact.feasible  # the caps allow this interval: the exact method reaches it
    with pytest.raises(Infeasible) as info:  # and no method goes below it
        inferplan.provision(net, profile, interval=alpha * best, method=method)
    details = info.value.details
    assert details["best_interval"] == pytest.approx(best, rel=1e-9)
    assert f"the caps allow at best {best:.4g} s" in str(info.value)
    # the binding caps are the stages of that deployment as slow as the interval, at their caps
    at_caps = details["at_caps"]
    slow = stage_times_at_caps(net, profile, at_caps["path"], at_caps["partition"])
    assert max(slow.values()) == pytest.approx(best, rel=1e-9)
    bound = {(b["kind"], b["id"]) for b in details["binding"]}
    assert bound == {k for k, t in slow.items() if t >= best * (1 - 1e-9)}
    for b in details["binding"]:
        assert (link_name(b["id"]) if b["kind"] == "link" else repr(b["id"])) in str(info.value)


def test_an_option_a_method_does_not_take_is_an_error_naming_it():
    net, vgg = inferplan.tiered(seed=1), inferplan.vgg16()
    with pytest.raises(InvalidArgument) as info:
        inferplan.provision(net, vgg, throughput=30, method="psg", tie_break="random")
    assert info.value.field == "tie_break"
    with pytest.raises(InvalidArgument) as info:
        inferplan.provision(net, vgg, throughput=30, method="pwf", time_limit=5.0)
    assert info.value.field == "time_limit"
    result = runner.invoke(
        app, ["provision", "examples/network.json", "vgg16", "--throughput", "30",
              "--method", "psg", "--tie-break", "random"],
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: --tie-break: method 'psg' does not take tie_break")


def test_an_unknown_method_lists_the_registry():
    result = runner.invoke(
        app, ["provision", "examples/network.json", "vgg16", "--throughput", "30", "--method", "x"]
    )
    assert result.exit_code == 2
    for name in METHODS:
        assert name in result.output


def _uncapped(network: Network) -> Network:
    """The same network with every cost replaced by an uncapped linear one: PFP and PWF follow
    capacities only, so they take the same deployments on it."""
    return Network(
        nodes=tuple(dataclasses.replace(n, cost=LinearCost(1.0)) for n in network.nodes),
        links=tuple(dataclasses.replace(e, cost=LinearCost(1.0)) for e in network.links),
        source=network.source,
        target=network.target,
    )


def _within_caps(network: Network, plan: inferplan.Plan) -> bool:
    nodes = {n.id: n.capacity_cost for n in network.nodes}
    links = {(e.source, e.target): e.capacity_cost for e in network.links}
    return all(
        x <= nodes[v].max_amount * (1 + 1e-9) for v, x in plan.node_upgrades.items()
    ) and all(
        u.amount <= links[u.source, u.target].max_amount * (1 + 1e-9) for u in plan.link_upgrades
    )


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    net=small_dags(max_nodes=5, cost_kinds=COST_KINDS),
    profile=small_profiles(max_blocks=4),
    alpha=st.floats(min_value=0.05, max_value=1.5),
    solver=st.sampled_from([solve_pfp, solve_pwf]),
)
def test_baselines_respect_every_cap_or_are_infeasible_exactly_when_their_deployment_is(
    net, profile, alpha, solver
):
    inst = compile_instance(net, profile)
    beta = alpha * inferplan.throughput(net, profile).interval
    free = solver(compile_instance(_uncapped(net), profile), beta)
    # The deployment's least purchase, priced from the definitions: inf iff it breaks a cap.
    needed = evaluate(net, profile, free.path, free.partition, beta).cost
    try:
        plan = solver(inst, beta)
    except Infeasible:
        assert math.isinf(needed)
        # the message says whether the caps or the baseline's own deployment fell short
        name = "pfp" if solver is solve_pfp else "pwf"
        with pytest.raises(Infeasible) as info:
            inferplan.provision(net, profile, interval=beta, method=name)
        caps_allow = brute_force_interval_at_caps(net, profile) <= beta * (1 + 1e-9)
        assert ("an exact method (psg, milp) finds that plan" in str(info.value)) == caps_allow
        return
    assert math.isfinite(needed)
    assert (plan.path, plan.partition) == (free.path, free.partition)
    assert _within_caps(net, plan)
    assert math.isfinite(plan.cost) and plan.feasible and plan.status == "heuristic"
