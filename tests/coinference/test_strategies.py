"""The strategy registry: every strategy's decision, priced independently."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.coinference import (
    STRATEGIES,
    decide,
    default_system,
    get_strategy,
    plan_placement,
    planner_names,
    simulate,
)
from inferplan.errors import InvalidArgument
from tests.cli import app, runner

from . import oracles
from .strategies import systems


@settings(max_examples=40, deadline=None)
@given(systems(max_layers=3, max_levels=2), st.data())
def test_every_strategy_costs_what_it_claims(system, data):
    """Z of a decision equals the oracle's cost of the decision's own policy (placement cost
    included), and no strategy beats the brute-force joint optimum."""
    best = min(
        oracles.placement_cost(system, m) + oracles.brute_force_min_etc(system, m)
        for m in range(system.n_layers + 1)
    )
    k = data.draw(st.integers(min_value=0, max_value=system.n_layers))
    for name in [*STRATEGIES, f"fixed:{k}"]:
        d = decide(system, name)
        thresholds = d.policy.thresholds
        assert len(thresholds) == d.placement
        own = oracles.placement_cost(system, d.placement) + oracles.threshold_rule_cost(
            system, thresholds
        )
        assert d.expected_cost == pytest.approx(own, rel=1e-9), name
        assert d.expected_cost >= best * (1 - 1e-9), name
        if get_strategy(name).exact:
            assert d.expected_cost == pytest.approx(best, rel=1e-9), name
    fixed = decide(system, f"fixed:{k}")
    assert fixed.placement == k and fixed.split_stage == k + 1
    assert all(math.isinf(t) for t in fixed.policy.thresholds)


def test_planners_are_the_methods_of_plan_placement():
    system = default_system("alexnet")
    for name in planner_names():
        assert plan_placement(system, method=name).placement == decide(system, name).placement
    assert set(planner_names()) == {n for n, s in STRATEGIES.items() if s.planner}


def test_fixed_placement_beyond_the_model_is_refused():
    system = default_system("alexnet")
    with pytest.raises(InvalidArgument, match=r"strategy: 'fixed:9': the device holds 0..8"):
        decide(system, "fixed:9")
    with pytest.raises(InvalidArgument, match="unknown strategy 'fixed:-1'"):
        decide(system, "fixed:-1")
    assert decide(system, "fixed:0").expected_cost == decide(system, "edge-only").expected_cost
    assert decide(system, "fixed:8").expected_cost == decide(system, "device-only").expected_cost


def test_the_cli_takes_the_registry_names():
    result = runner.invoke(
        app,
        ["coinfer-simulate", "examples/system.yaml", "--strategy", "fixed:3", "--strategy",
         "best-fixed-split", "--inferences", "1000", "--json"],
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    sim = simulate(default_system("alexnet"), ["fixed:3"], inferences=1000, seed=0)
    assert '"fixed:3"' in result.stdout and '"best-fixed-split"' in result.stdout
    assert sim["fixed:3"].placement == 3
    bad = runner.invoke(app, ["coinfer", "examples/system.yaml", "--method", "edge-only"])
    assert bad.exit_code == 2
    for name in planner_names():
        assert name in bad.output
