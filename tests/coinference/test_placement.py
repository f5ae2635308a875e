"""Placement: Z(M) for every M, the three methods, baselines and the MLP closed form."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferplan.coinference import (
    Discrete,
    Layers,
    LogNormal,
    Nakagami,
    Rayleigh,
    compare_baselines,
    default_system,
    expected_costs,
    mlp_layers,
    mlp_placement,
    one_step_terms,
    optimal_thresholds,
    plan_placement,
)
from inferplan.errors import InvalidArgument

from . import oracles
from .strategies import systems


@settings(max_examples=40)
@given(systems(max_layers=3, max_levels=2))
def test_optimal_placement_minimises_brute_force_costs(system):
    brute = [
        oracles.placement_cost(system, m) + oracles.brute_force_min_etc(system, m)
        for m in range(system.n_layers + 1)
    ]
    plan = plan_placement(system)
    assert list(plan.costs) == pytest.approx(brute, rel=1e-12)
    assert plan.expected_cost == pytest.approx(min(brute), rel=1e-12)
    assert len(plan.thresholds) == plan.placement


@settings(max_examples=80)
@given(systems(min_layers=2, max_layers=9, max_levels=3), st.sampled_from([0.0, 0.01, 0.1]))
def test_hybrid_is_exact_or_within_its_tolerance(system, rel_tol):
    exact = plan_placement(system)
    hybrid = plan_placement(system, method="hybrid", rel_tol=rel_tol)
    if rel_tol == 0.0:
        assert hybrid.placement == exact.placement
        assert hybrid.expected_cost == exact.expected_cost
    assert hybrid.expected_cost <= exact.expected_cost * (1 + rel_tol) * (1 + 1e-12)
    assert hybrid.stage_evaluations <= exact.stage_evaluations + 3 * system.n_layers + 2
    for z_h, z in zip(hybrid.costs, exact.costs, strict=True):
        assert math.isnan(z_h) or z_h == pytest.approx(z, rel=1e-12)


@given(systems(max_layers=6, max_levels=3))
def test_one_step_costs_bound_the_optimal_ones(system):
    z_opt, z_sla = expected_costs(system), expected_costs(system, rule="1sla")
    assert np.all(z_opt <= z_sla * (1 + 1e-12))
    assert z_sla[0] == pytest.approx(z_opt[0]) and z_sla[1] == pytest.approx(z_opt[1])
    plan = plan_placement(system, method="1sla")
    assert plan.expected_cost == pytest.approx(z_sla.min())


def test_coinfer_json_object_shape():
    out = plan_placement(default_system("alexnet")).to_dict()
    assert set(out) == {"method", "placement", "expected_cost", "costs", "thresholds"}
    assert len(out["costs"]) == 9 and len(out["thresholds"]) == out["placement"]
    assert out["expected_cost"] == min(out["costs"])


def test_infinite_threshold_is_null_in_json():
    # Running layer 1 on a fast device shrinks the upload 100x: never split before it.
    system = default_system(
        layers=Layers((1.0, 1.0), (1e7, 1e4, 1e4), (0.0, 0.0)),
        channel=Discrete((1.0, 4.0), (0.5, 0.5)),
    )
    plan = plan_placement(system)
    assert plan.placement >= 1 and math.isinf(plan.thresholds[0])
    assert plan.to_dict()["thresholds"][0] is None


def test_baselines_are_never_better_than_the_joint_plan():
    b = compare_baselines(default_system("alexnet"))
    for name in (
        "edge_only",
        "device_only",
        "full_placement",
        "fixed_split",
        "best_fixed_split",
        "joint_1sla",
    ):
        assert getattr(b, name) >= b.joint
        assert b.savings()[name] >= 0
    assert b.best_fixed_split <= b.fixed_split


def test_unknown_method():
    with pytest.raises(InvalidArgument, match="strategy: unknown strategy 'greedy'"):
        plan_placement(default_system(), method="greedy")
    with pytest.raises(InvalidArgument, match="method: 'edge-only' is a baseline"):
        plan_placement(default_system(), method="edge-only")
    with pytest.raises(InvalidArgument, match="rel_tol: method '1sla' does not take rel_tol"):
        plan_placement(default_system(), method="1sla", rel_tol=0.1)


# MLP closed form against enumeration of the generic 1-sla costs over a grid of parameters.
_CHANNELS = [
    Rayleigh(10.0, min_snr=0.25),
    Discrete((0.3, 3.0, 30.0), (0.3, 0.4, 0.3)),
    LogNormal(5.0, 8.0),
    Nakagami(2.0, 3.0),
]
_GRID = list(
    itertools.product(
        [16, 128, 1024, 4096], [2, 7], [1, 30, 3000], [0.0, 0.5, 1.0], range(len(_CHANNELS))
    )
)


@pytest.mark.parametrize(("width", "depth", "k", "beta_e", "channel"), _GRID)
def test_mlp_closed_form_matches_enumeration(width, depth, k, beta_e, channel):
    system = default_system(
        layers=mlp_layers(width, depth),
        channel=_CHANNELS[channel],
        inferences_per_update=k,
        energy_weight=beta_e,
    )
    closed = mlp_placement(system)
    costs = expected_costs(system, rule="1sla")
    assert costs[closed.placement] == pytest.approx(costs.min(), rel=1e-12)
    assert closed.placement == int(np.argmin(costs)) or math.isclose(
        costs[closed.placement], costs.min(), rel_tol=1e-12
    )
    assert closed.expected_cost == pytest.approx(costs[closed.placement], rel=1e-9)
    assert closed.drift <= 0


def test_mlp_closed_form_rejects_unequal_layers():
    with pytest.raises(InvalidArgument, match=r"equal layers\.cycles"):
        mlp_placement(default_system("alexnet"))


@given(systems(min_layers=2, max_layers=7, max_levels=3))
def test_hybrid_lower_bound_holds_for_every_pair(system):
    # V(M) >= V(M') + P1(reach M+1) (E[eta_{M+1}] - E[V^{(M')}_{M+1}]) for M < M'.
    _, reach, forced = one_step_terms(system)
    inductions = {m: optimal_thresholds(system, m)[1] for m in range(system.n_layers + 1)}
    for m in range(system.n_layers):
        for mp in range(m + 1, system.n_layers + 1):
            w = inductions[mp]
            bound = w[0] + reach[m] * (forced[m] - w[m])
            assert bound <= inductions[m][0] * (1 + 1e-12)
